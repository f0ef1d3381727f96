"""The one registry of API handlers.

A handler module registers each API it serves with ``@handles(api_key, min_version, max_version)``.
ApiVersions, the network layer and ``docs/compatibility.md`` all read ``HANDLERS``, so what the
broker advertises is exactly what it serves; ``NOT_SERVED`` says why each other API is not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import REQUESTS, RESPONSES

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster

__all__ = ["ApiHandler", "HANDLERS", "NOT_SERVED", "RequestContext", "handles", "HandlerResult"]

# A handler answers with a response, or None when no response is sent (Produce with acks=0);
# it may be a coroutine when the answer has to wait (long-poll Fetch, JoinGroup...).
HandlerResult = Message | None | Awaitable[Message | None]


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    cluster: Cluster
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str  # "host:port" of the client, for log lines
    connection_id: int = 0
    listener_name: str = ""  # the listener the client connected to ("": the first one)
    # the connection's principal and authentication (kafkalite.broker.security.session.Session);
    # None on a PLAINTEXT listener without an authorizer, where every client is ANONYMOUS and allowed
    session: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    request_type: type[Message]
    response_type: type[Message]
    handle: Callable[[RequestContext, Any], HandlerResult]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


HANDLERS: dict[int, ApiHandler] = {}

# The APIs of Kafka's broker listener that kafkalite does not serve, and why. Every API key of the
# generated message classes is either in HANDLERS or here (a unit test checks it), and
# docs/compatibility.md gives the reason for each.
_SHARE_STATE = ("the share coordinator's API between brokers: this node keeps share-partition state itself, in "
                "__share_group_state")
NOT_SERVED: dict[int, str] = {
    38: "delegation tokens are not served: SASL clients authenticate with PLAIN, SCRAM or OAUTHBEARER",
    39: "delegation tokens are not served: SASL clients authenticate with PLAIN, SCRAM or OAUTHBEARER",
    40: "delegation tokens are not served: SASL clients authenticate with PLAIN, SCRAM or OAUTHBEARER",
    41: "delegation tokens are not served: SASL clients authenticate with PLAIN, SCRAM or OAUTHBEARER",
    48: "requests are never throttled, so there are no client quotas to describe",
    49: "requests are never throttled, so there are no client quotas to set",
    57: "no feature is finalized (ApiVersions lists none), so there is nothing to update",
    64: "this node is the only broker and is always registered",
    71: "clients cannot push metrics: client-metrics subscriptions are stored and listed, never applied",
    72: "clients cannot push metrics: client-metrics subscriptions are stored and listed, never applied",
    80: "this node is the only voter of its quorum, which kafkalite does not run as KRaft; there is none to add",
    81: "this node is the only voter of its quorum, which kafkalite does not run as KRaft; there is none to remove",
    83: _SHARE_STATE,
    84: _SHARE_STATE,
    85: _SHARE_STATE,
    86: _SHARE_STATE,
    87: _SHARE_STATE,
}

_F = TypeVar("_F", bound=Callable[..., HandlerResult])


def handles(api_key: int, min_version: int, max_version: int) -> Callable[[_F], _F]:
    """Register the decorated function as the handler of ``api_key`` for these versions."""
    request_type = REQUESTS[api_key]
    response_type = RESPONSES[api_key]
    low, high = request_type.VALID_VERSIONS
    if not low <= min_version <= max_version <= high:
        raise ValueError(f"{request_type.NAME}: versions {min_version}-{max_version} outside the schema's {low}-{high}")

    def register(function: _F) -> _F:
        if api_key in HANDLERS:
            raise ValueError(f"API key {api_key} registered twice")
        HANDLERS[api_key] = ApiHandler(
            api_key=api_key,
            name=request_type.NAME.removesuffix("Request"),
            min_version=min_version,
            max_version=max_version,
            request_type=request_type,
            response_type=response_type,
            handle=function,
        )
        return function

    return register
