"""SaslHandshake (API key 17), v0-1: the client names the SASL mechanism it will authenticate with.

On a SASL listener the connection's ``SaslAuthenticator`` (``kafkalite.broker.security.sasl``) takes
the mechanism: NONE and the listener's enabled mechanisms, or UNSUPPORTED_SASL_MECHANISM with the
same list. After v0, the SASL tokens follow as bare frames (``SecureConnection`` reads them); after v1,
in SaslAuthenticate requests. A second handshake on an authenticated connection starts a
re-authentication (KIP-368). On a listener without SASL the answer is ILLEGAL_SASL_STATE, as Kafka's.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse

__all__ = ["handle_sasl_handshake"]


@handles(api_key=17, min_version=0, max_version=1)
def handle_sasl_handshake(context: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = context.session
    authenticator = None if session is None else session.authenticator
    if authenticator is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    error = authenticator.handshake(request.mechanism)
    if error == ErrorCode.NONE and context.api_version == 0:
        session.raw_tokens = True
    elif error == ErrorCode.ILLEGAL_SASL_STATE:
        session.close_after_response = True
    return SaslHandshakeResponse(error_code=error, mechanisms=list(authenticator.settings.mechanisms))
