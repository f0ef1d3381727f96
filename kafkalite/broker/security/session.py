"""What a connection knows about its client's identity: the ``Session`` handlers see as ``context.session``.

A connection to a PLAINTEXT listener of a broker without an authorizer has no session (the client is
``User:ANONYMOUS`` and may do everything). Every other connection has one: its principal (ANONYMOUS,
the mapped name of a TLS client certificate, or the SASL user), its host (the address ACL host
filters compare), the SASL state machine on SASL listeners, and the authorizer when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalite.broker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from kafkalite.broker.security.authorizer import Authorizer
    from kafkalite.broker.security.sasl import SaslAuthenticator

__all__ = ["Session"]


@dataclass(slots=True, eq=False)
class Session:
    listener_name: str
    host: str = ""
    principal: KafkaPrincipal = ANONYMOUS
    authenticator: SaslAuthenticator | None = None  # on SASL listeners
    authorizer: Authorizer | None = None  # when authorizer.class.name is set
    authenticated: bool = True  # False on a SASL listener until SaslAuthenticate succeeds
    close_after_response: bool = False  # a failed authentication: answer, then close
    raw_tokens: bool = False  # after SaslHandshake v0, SASL tokens come without Kafka's request header
    notes: dict[str, str] = field(default_factory=dict)
