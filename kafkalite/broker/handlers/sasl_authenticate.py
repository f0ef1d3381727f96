"""SaslAuthenticate (API key 36), v0-2: one SASL token of the exchange begun by SaslHandshake v1.

The connection's ``SaslAuthenticator`` takes the token and answers the server's. When the exchange
completes, the connection's principal is the authenticated user and, with ``connections.max.reauth.ms``,
v1+ answers ``session_lifetime_ms``. A refused token answers SASL_AUTHENTICATION_FAILED with a message
that does not say what was wrong, and the connection closes after the answer. Out of order (no
handshake first) the answer is ILLEGAL_SASL_STATE and the connection closes, as Kafka's.
"""

from __future__ import annotations

import logging

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.broker.security.sasl import AuthenticationFailed, SaslState
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse

__all__ = ["handle_sasl_authenticate"]

log = logging.getLogger("kafkalite.security")


@handles(api_key=36, min_version=0, max_version=2)
def handle_sasl_authenticate(context: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = context.session
    authenticator = None if session is None else session.authenticator
    if authenticator is None:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="SaslAuthenticate request received on a listener without SASL")
    if authenticator.state is not SaslState.AUTHENTICATE:
        session.close_after_response = True
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="Unexpected SaslAuthenticate request")
    try:
        answer, lifetime_ms = authenticator.authenticate(request.auth_bytes)
    except AuthenticationFailed as exc:
        log.info("authentication failed for %s on %s: %s", context.peer, context.listener_name, exc)
        session.close_after_response = True
        return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                        error_message=exc.client_message)
    if authenticator.authenticated:
        if session.authenticated:
            log.info("%s re-authenticated as %s on %s", context.peer, authenticator.principal, context.listener_name)
        session.authenticated = True
        session.principal = authenticator.principal
    return SaslAuthenticateResponse(auth_bytes=answer, session_lifetime_ms=lifetime_ms)
