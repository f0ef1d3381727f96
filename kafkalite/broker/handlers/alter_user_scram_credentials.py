"""AlterUserScramCredentials (API key 51), v0: add, replace and delete users' SCRAM credentials.

The client sends the salt, the iteration count and the salted password; the broker keeps the salt,
the count, StoredKey and ServerKey (``kafkalite.broker.security.scram``), durable in the data
directory. One result per user, with Kafka's checks and messages: a user changed twice for one
mechanism (or deleted and upserted) is DUPLICATE_RESOURCE, an empty name or an iteration count out
of 4096-16384 UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, deleting a
credential that does not exist RESOURCE_NOT_FOUND. A user with an error has none of its changes applied.
"""

from __future__ import annotations

from collections import Counter

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.broker.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, derive_credential
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from kafkalite.protocol.messages.alter_user_scram_credentials_response import AlterUserScramCredentialsResult

__all__ = ["handle_alter_user_scram_credentials"]

_BY_NUMBER = {number: name for name, (number, _) in MECHANISMS.items()}


@handles(api_key=51, min_version=0, max_version=0)
def handle_alter_user_scram_credentials(context: RequestContext, request: AlterUserScramCredentialsRequest
                                        ) -> AlterUserScramCredentialsResponse:
    store = context.cluster.scram_credentials
    changes = [(item.name, item.mechanism) for item in request.deletions]
    changes += [(item.name, item.mechanism) for item in request.upsertions]
    counts = Counter(changes)
    errors: dict[str, tuple[ErrorCode, str]] = {}

    def refuse(user: str, error: ErrorCode, message: str) -> None:
        errors.setdefault(user, (error, message))

    for user, mechanism in changes:
        if counts[(user, mechanism)] > 1:
            refuse(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        if not user:
            refuse(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        if mechanism not in _BY_NUMBER:
            refuse(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for deletion in request.deletions:
        mechanism_name = _BY_NUMBER.get(deletion.mechanism)
        if mechanism_name is not None and store.get(deletion.name, mechanism_name) is None:
            refuse(deletion.name, ErrorCode.RESOURCE_NOT_FOUND,
                   "Attempt to delete a user credential that does not exist")
    for upsertion in request.upsertions:
        if upsertion.iterations < MIN_ITERATIONS:
            refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif upsertion.iterations > MAX_ITERATIONS:
            refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not upsertion.salt or not upsertion.salted_password:
            refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    changed = False
    for deletion in request.deletions:
        if deletion.name not in errors:
            changed |= store.delete(deletion.name, _BY_NUMBER[deletion.mechanism])
    for upsertion in request.upsertions:
        if upsertion.name not in errors:
            mechanism_name = _BY_NUMBER[upsertion.mechanism]
            store.set(upsertion.name, mechanism_name, derive_credential(
                mechanism_name, upsertion.salted_password, upsertion.salt, upsertion.iterations))
            changed = True
    if changed:
        store.save()
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(user=user, error_code=errors.get(user, (ErrorCode.NONE, ""))[0],
                                        error_message=errors[user][1] if user in errors else None)
        for user in dict.fromkeys(name for name, _ in changes)])
