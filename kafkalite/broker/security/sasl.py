"""The SASL authentication of one connection: a small state machine driven by SaslHandshake and
SaslAuthenticate.

States::

    HANDSHAKE --SaslHandshake(enabled mechanism)--> AUTHENTICATE --exchange completes--> AUTHENTICATED
        |                                               |                                    |
        |                          bad credentials or a malformed token: FAILED (the         |
        |                          connection answers SASL_AUTHENTICATION_FAILED and closes)  |
        +-- SaslHandshake(other mechanism): UNSUPPORTED_SASL_MECHANISM, stays in HANDSHAKE     |
                                                                                             |
    AUTHENTICATED --SaslHandshake (re-authentication, KIP-368; same mechanism)--> AUTHENTICATE

Mechanisms:

* PLAIN: ``[authzid] NUL user NUL password`` checked against the listener's users (the
  ``user_<name>="<password>"`` options of ``PlainLoginModule`` in its ``sasl.jaas.config``);
* SCRAM-SHA-256, SCRAM-SHA-512: ``kafkalite.broker.security.scram``, with the stored credentials;
* OAUTHBEARER with unsecured tokens (for local testing, as Kafka's default unsecured validator):
  ``n,,\\x01auth=Bearer <token>\\x01\\x01`` where the token is a JWS with ``"alg": "none"``, whose
  ``sub`` claim (``sasl.oauthbearer.sub.claim.name``) is the user and whose ``exp`` must be in the future.

Every failure gives the client one message that says the credentials were refused, not which part
(user, password, proof, token) was wrong; the log says more. With ``connections.max.reauth.ms`` above
zero, a successful SaslAuthenticate v1+ answers ``session_lifetime_ms`` (for OAUTHBEARER no longer
than the token lives) and the connection must authenticate again before it runs out.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from kafkalite.broker.security.principal import KafkaPrincipal
from kafkalite.broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkalite.broker.security.scram import ScramCredentials, ScramExchange, ScramFailure
from kafkalite.protocol.errors import ErrorCode

__all__ = ["AuthenticationFailed", "SaslAuthenticator", "SaslSettings", "SaslState", "SERVED_MECHANISMS"]

log = logging.getLogger("kafkalite.security")

SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class AuthenticationFailed(Exception):
    """Raised by a step that refuses the client: ``str()`` is for the log, ``client_message`` for the client."""

    def __init__(self, detail: str, client_message: str) -> None:
        super().__init__(detail)
        self.client_message = client_message


class SaslState(Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What a SASL listener accepts."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    scram: ScramCredentials
    reauth_ms: int = 0
    oauth_sub_claim: str = "sub"
    oauth_clock_skew_s: int = 30


def _refused(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class _Plain:
    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.user: str | None = None
        self.expires_at_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("malformed PLAIN token", "Authentication failed: Invalid username or password")
        authzid, user_bytes, password_bytes = parts
        try:
            user, password = user_bytes.decode("utf-8"), password_bytes.decode("utf-8")
            authorization_id = authzid.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("PLAIN token is not UTF-8",
                                       "Authentication failed: Invalid username or password") from None
        expected = self._users.get(user)
        matches = hmac.compare_digest(password.encode(), (expected if expected is not None else "\x00" * 8).encode())
        if expected is None or not matches or not user:
            raise AuthenticationFailed(f"PLAIN: user {user!r} refused (unknown user or wrong password)",
                                       "Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != user:
            raise AuthenticationFailed(f"PLAIN: user {user!r} asked to act as {authorization_id!r}",
                                       "Authentication failed: Invalid username or password")
        self.user = user
        return b""


class _Scram:
    def __init__(self, mechanism: str, credentials: ScramCredentials) -> None:
        self._exchange = ScramExchange(mechanism, credentials.get)
        self._mechanism = mechanism
        self.user: str | None = None
        self.expires_at_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        try:
            answer = self._exchange.step(token)
        except ScramFailure as exc:
            raise AuthenticationFailed(f"{self._mechanism}: {exc}", _refused(self._mechanism)) from None
        if self._exchange.complete:
            self.user = self._exchange.user
        return answer


def _base64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class _OAuthBearer:
    def __init__(self, sub_claim: str, clock_skew_s: int, now_ms: Callable[[], int]) -> None:
        self._sub_claim, self._skew_ms, self._now_ms = sub_claim, clock_skew_s * 1000, now_ms
        self.user: str | None = None
        self.expires_at_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        refused = _refused("OAUTHBEARER")
        try:
            text = token.decode("utf-8")
            header, _, rest = text.partition("\x01")
            if not header.startswith(("n,", "y,")):
                raise ValueError("no GS2 header")
            fields = dict(item.split("=", 1) for item in rest.split("\x01") if item)
            scheme, _, jws = fields["auth"].partition(" ")
            if scheme.lower() != "bearer":
                raise ValueError("not a bearer token")
            encoded_header, encoded_payload, _signature = jws.split(".")
            jose = json.loads(_base64url(encoded_header))
            claims = json.loads(_base64url(encoded_payload))
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            raise AuthenticationFailed(f"OAUTHBEARER: malformed token ({exc})", refused) from None
        if not isinstance(jose, dict) or jose.get("alg") != "none" or not isinstance(claims, dict):
            raise AuthenticationFailed("OAUTHBEARER: only unsecured tokens (alg none) are accepted", refused)
        subject, expires = claims.get(self._sub_claim), claims.get("exp")
        if not isinstance(subject, str) or not subject or not isinstance(expires, (int, float)):
            raise AuthenticationFailed(f"OAUTHBEARER: token without {self._sub_claim!r} or 'exp'", refused)
        expires_at_ms = int(expires * 1000)
        if expires_at_ms + self._skew_ms <= self._now_ms():
            raise AuthenticationFailed("OAUTHBEARER: the token has expired", refused)
        self.user, self.expires_at_ms = subject, expires_at_ms
        return b""


class SaslAuthenticator:
    """One connection's SASL state (see the module docstring)."""

    def __init__(self, settings: SaslSettings, now_ms: Callable[[], int]) -> None:
        self.settings = settings
        self._now_ms = now_ms
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self._exchange: _Plain | _Scram | _OAuthBearer | None = None
        self.session_expires_at_ms: int | None = None  # when re-authentication is due (None: never)

    @property
    def authenticated(self) -> bool:
        """Whether the last exchange completed (and none is under way)."""
        return self.state is SaslState.AUTHENTICATED

    def handshake(self, mechanism: str) -> ErrorCode:
        """SaslHandshake: choose a mechanism (again, to re-authenticate)."""
        if self.state not in (SaslState.HANDSHAKE, SaslState.AUTHENTICATED):
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.settings.mechanisms or mechanism not in SERVED_MECHANISMS:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        if self.state is SaslState.AUTHENTICATED and mechanism != self.mechanism:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM  # Kafka: re-authentication keeps the mechanism
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._exchange = _Plain(self.settings.plain_users)
        elif mechanism in SCRAM_MECHANISMS:
            self._exchange = _Scram(mechanism, self.settings.scram)
        else:
            self._exchange = _OAuthBearer(self.settings.oauth_sub_claim, self.settings.oauth_clock_skew_s,
                                          self._now_ms)
        self.state = SaslState.AUTHENTICATE
        return ErrorCode.NONE

    def authenticate(self, token: bytes) -> tuple[bytes, int]:
        """SaslAuthenticate: one step of the exchange. Returns the server's token and, once complete, the
        session lifetime in ms (0: none). Raises AuthenticationFailed (state FAILED) or, out of
        order, AuthenticationFailed with ILLEGAL_SASL_STATE's meaning (state unchanged)."""
        exchange = self._exchange
        if self.state is not SaslState.AUTHENTICATE or exchange is None:
            raise AuthenticationFailed("SaslAuthenticate out of order", "Unexpected SaslAuthenticate request")
        try:
            answer = exchange.step(token)
        except AuthenticationFailed:
            self.state = SaslState.FAILED
            raise
        if exchange.user is None:
            return answer, 0
        principal = KafkaPrincipal.user(exchange.user)
        if self.principal is not None and principal != self.principal:
            self.state = SaslState.FAILED
            raise AuthenticationFailed(f"re-authentication as {principal} on a connection of {self.principal}",
                                       "Cannot change principals during re-authentication")
        self.principal = principal
        self.state = SaslState.AUTHENTICATED
        self._exchange = None
        lifetime = 0
        now = self._now_ms()
        if self.settings.reauth_ms > 0:
            lifetime = self.settings.reauth_ms
            if exchange.expires_at_ms is not None:
                lifetime = max(0, min(lifetime, exchange.expires_at_ms - now))
        self.session_expires_at_ms = now + lifetime if lifetime else None
        return answer, lifetime
