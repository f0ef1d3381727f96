"""DescribeUserScramCredentials (API key 50), v0: the SCRAM mechanisms and iteration counts of users.

Reads ``cluster.scram_credentials`` (``kafkalite.broker.security.scram``). A null user list describes
every user with a credential; a named user without one is RESOURCE_NOT_FOUND, a user named twice
DUPLICATE_RESOURCE, with Kafka's messages. Salts and keys never leave the broker.
"""

from __future__ import annotations

from collections import Counter

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.broker.security.scram import MECHANISMS
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse
from kafkalite.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)

__all__ = ["handle_describe_user_scram_credentials"]


@handles(api_key=50, min_version=0, max_version=0)
def handle_describe_user_scram_credentials(context: RequestContext, request: DescribeUserScramCredentialsRequest
                                           ) -> DescribeUserScramCredentialsResponse:
    store = context.cluster.scram_credentials
    names = store.users() if request.users is None else [user.name for user in request.users]
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, credential_infos=[],
                error_message="Cannot describe SCRAM credentials for the same user twice in a single request"))
            continue
        mechanisms = store.mechanisms_of(name)
        if not mechanisms:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND, credential_infos=[],
                error_message="Attempt to describe a user credential that does not exist"))
            continue
        results.append(DescribeUserScramCredentialsResult(user=name, error_message=None, credential_infos=[
            CredentialInfo(mechanism=MECHANISMS[mechanism][0], iterations=credential.iterations)
            for mechanism, credential in sorted(mechanisms.items())]))
    return DescribeUserScramCredentialsResponse(error_message=None, results=results)
