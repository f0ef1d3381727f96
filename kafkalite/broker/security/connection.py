"""``SecureConnection``: a ``KafkaConnection`` for a listener that authenticates or authorizes.

PLAINTEXT listeners of a broker without an authorizer use ``KafkaConnection`` itself, whose cost for
security is one attribute (``session``, None) passed to each request's context. Every other listener
uses this subclass, which:

* gives the connection a ``Session``; on TLS with ``ssl.client.auth`` the principal is the client
  certificate's distinguished name mapped by ``ssl.principal.mapping.rules``;
* on SASL listeners, until authentication succeeds: serves only ApiVersions, SaslHandshake and
  SaslAuthenticate (anything else closes the connection), caps request frames at
  ``sasl.server.max.receive.size`` (512 KiB: checked on the size prefix, before any buffer is made),
  and closes the connection when authentication has not finished within
  ``sasl.server.authentication.timeout.ms``;
* answers a failed authentication (SASL_AUTHENTICATION_FAILED) and then closes; as Kafka's, it holds
  both the answer and the close for ``connection.failed.authentication.delay.ms`` (100 ms), reading
  nothing more meanwhile, so a client that retries at once cannot hammer the broker. The wait is a
  loop timer, not a blocked loop, and the connection keeps its place in ``max.connections`` until it
  closes, so what waiting connections hold stays bounded;
* after SaslHandshake v0, reads the SASL tokens that follow as bare size-prefixed frames, and answers
  them the same way, as Kafka's first SASL protocol did;
* with ``connections.max.reauth.ms``, closes a connection whose session has run out and that sends
  anything but SaslHandshake (KIP-368).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any

from kafkalite.broker.net import KafkaConnection
from kafkalite.broker.security.authorizer import Authorizer
from kafkalite.broker.security.principal import KafkaPrincipal, NoMatchingRule, SslPrincipalMapper, distinguished_name
from kafkalite.broker.security.sasl import AuthenticationFailed, SaslAuthenticator, SaslSettings, SaslState
from kafkalite.broker.security.session import Session

__all__ = ["ListenerSecurity", "SecureConnection"]

log = logging.getLogger("kafkalite.security")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
_AUTHENTICATING = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})  # the requests whose failure is delayed
_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How one listener secures its connections."""

    listener_name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    sasl: SaslSettings | None = None
    authorizer: Authorizer | None = None
    max_receive_size: int = 524_288
    authentication_timeout_ms: int = 10_000
    failed_authentication_delay_ms: int = 100

    @property
    def plain(self) -> bool:
        """Whether connections need nothing of this module (PLAINTEXT, no authorizer)."""
        return self.protocol == "PLAINTEXT" and self.authorizer is None


def _now_ms() -> int:
    return int(time.time() * 1000)


class SecureConnection(KafkaConnection):
    """See the module docstring."""

    def __init__(self, *args: Any, security: ListenerSecurity, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.security = security
        authenticator = None if security.sasl is None else SaslAuthenticator(security.sasl, _now_ms)
        self.session = Session(security.listener_name, authenticator=authenticator, authorizer=security.authorizer,
                               authenticated=authenticator is None)
        self._full_request_bytes = self._max_request_bytes
        self._authentication_timer: asyncio.TimerHandle | None = None
        self._failure_close: asyncio.TimerHandle | None = None  # a failed login's delayed answer and close
        if authenticator is not None:
            self._max_request_bytes = min(self._max_request_bytes, security.max_receive_size)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._closed:
            return
        session = self.session
        session.host = self._address
        mapper = self.security.principal_mapper
        if mapper is not None:
            certificate = transport.get_extra_info("peercert")
            if certificate:
                name = distinguished_name(certificate)
                try:
                    session.principal = KafkaPrincipal.user(mapper.name(name))
                except NoMatchingRule as exc:
                    return self._violation(f"its certificate maps to no principal: {exc}")
        if not session.authenticated and self.security.authentication_timeout_ms > 0:
            self._authentication_timer = asyncio.get_running_loop().call_later(
                self.security.authentication_timeout_ms / 1000, self._authentication_overdue)

    def _authentication_overdue(self) -> None:
        self._authentication_timer = None
        if not self._closed and not self.session.authenticated:
            log.info("closing connection from %s: not authenticated within %d ms "
                     "(sasl.server.authentication.timeout.ms)", self.who, self.security.authentication_timeout_ms)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._authentication_timer, self._failure_close):
            if timer is not None:
                timer.cancel()
        self._authentication_timer = self._failure_close = None
        super().connection_lost(exc)

    def _dispatch(self, frame: bytes | bytearray | memoryview) -> None:
        if self._failure_close is not None:  # read before reading stopped: a failed login reads no more
            return
        session = self.session
        if session.raw_tokens:
            return self._raw_token(bytes(frame))
        authenticator = session.authenticator
        api_key = -1
        if authenticator is not None:
            api_key = _SIZE.unpack_from(b"\0\0" + bytes(frame[:2]))[0] if len(frame) >= 2 else -1
            if not session.authenticated:
                if api_key not in _BEFORE_AUTHENTICATION:
                    return self._violation(f"sent API key {api_key} before authenticating")
            elif authenticator.session_expires_at_ms is not None and api_key != SASL_HANDSHAKE \
                    and authenticator.state is SaslState.AUTHENTICATED \
                    and _now_ms() >= authenticator.session_expires_at_ms:
                return self._violation("its session expired without re-authentication (connections.max.reauth.ms)")
        delay_ms = self.security.failed_authentication_delay_ms
        if delay_ms <= 0 or api_key not in _AUTHENTICATING:
            super()._dispatch(frame)
            return self._after_request()
        # This request's answer is held back if the login fails: it is what the dispatch adds to the
        # corked responses of this read (a list of its own when there is none).
        corked = self._corked
        held: list[bytes | bytearray | memoryview] = [] if corked is None else corked
        self._corked = held
        mark = len(held)
        try:
            super()._dispatch(frame)
        finally:
            if corked is None and not self._closed:
                self._corked = None
        if self._closed:  # close() wrote what was corked before it
            return
        answer = held[mark:]
        if session.close_after_response:
            del held[mark:]
            return self._close_later(answer, delay_ms)
        if corked is None and answer and self.transport is not None:
            self.transport.writelines(answer)
        self._after_request()

    def _close_later(self, answer: list[Any], delay_ms: int) -> None:
        """A failed login: stop reading, then after ``delay_ms`` write its answer and close."""
        log.info("authentication failed for %s: answering and closing in %d ms (connection.failed.authentication"
                 ".delay.ms)", self.who, delay_ms)
        self._draining = True  # nothing more is read or dispatched
        self._update_reading()
        self._failure_close = asyncio.get_running_loop().call_later(delay_ms / 1000, self._close_now, answer)

    def _close_now(self, answer: list[Any]) -> None:
        self._failure_close = None
        if self._closed:
            return
        if answer and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(answer)
        self.close()

    def _after_request(self) -> None:
        session = self.session
        if session.close_after_response:
            log.info("closing connection from %s after a failed authentication", self.who)
            self.close()
        elif session.authenticated and self._max_request_bytes != self._full_request_bytes:
            self._max_request_bytes = self._full_request_bytes
            if self._authentication_timer is not None:
                self._authentication_timer.cancel()
                self._authentication_timer = None

    def _raw_token(self, token: bytes) -> None:
        """A SASL token after SaslHandshake v0: answered as a bare size-prefixed token."""
        session = self.session
        authenticator = session.authenticator
        assert authenticator is not None
        try:
            answer, _ = authenticator.authenticate(token)
        except AuthenticationFailed as exc:
            log.info("authentication failed for %s: %s", self.who, exc)
            delay_ms = self.security.failed_authentication_delay_ms
            return self._close_later([], delay_ms) if delay_ms > 0 else self.close()
        if authenticator.state is SaslState.AUTHENTICATED:
            session.raw_tokens = False
            session.authenticated = True
            assert authenticator.principal is not None
            session.principal = authenticator.principal
        if self._corked is not None:  # after the SaslHandshake answer of the same read
            self._corked.append(_SIZE.pack(len(answer)) + answer)
        elif self.transport is not None:
            self.transport.write(_SIZE.pack(len(answer)) + answer)
        self._after_request()
