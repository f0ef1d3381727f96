"""The one registry of API handlers, each handler module imported when its API is first asked for.

``SERVED`` lists every API the broker serves: its key, the handler module and the versions served.
``HANDLERS`` maps each of those keys to its ``ApiHandler``, importing the handler module (and its
message classes and the core rooms it uses) on the first look-up of that key, so a broker starts
without loading the code of APIs no client has asked for yet. A handler module registers its API
with ``@handles(api_key, min_version, max_version)`` when it is imported; ``handles`` refuses a
registration that ``SERVED`` does not list with the same module and versions, so the table cannot
drift from the handlers (and ``tests/unit/test_handler_registry.py`` imports every one to check it).

ApiVersions answers from ``SERVED`` without importing any handler, the network layer looks handlers
up in ``HANDLERS``, and ``docs/compatibility.md`` reads both, so what the broker advertises is exactly
what it serves; ``NOT_SERVED`` says why each other API is not.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import REQUESTS, RESPONSES

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster

__all__ = ["ApiHandler", "HANDLERS", "HandlerRegistry", "HandlerResult", "NOT_SERVED", "RequestContext", "SERVED",
           "ServedApi", "handles", "served_versions"]

# A handler answers with a response, or None when no response is sent (Produce with acks=0);
# it may be a coroutine when the answer has to wait (long-poll Fetch, JoinGroup...).
HandlerResult = Message | None | Awaitable[Message | None]


@dataclass(slots=True, eq=False)
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
    # the connection can send file regions (a plaintext socket): Fetch may answer with them (log.region)
    file_regions: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class ApiHandler:
    """One API's handler, the versions it serves and its request and response classes."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    request_type: type[Message]
    response_type: type[Message]
    handle: Callable[[RequestContext, Any], HandlerResult]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


@dataclass(frozen=True, slots=True)
class ServedApi:
    """An API the broker serves: the handler module (in this package) and the versions it serves."""

    module: str
    min_version: int
    max_version: int


# API key -> where its handler lives and the versions it serves. A handler's @handles must agree.
SERVED: dict[int, ServedApi] = {
    0: ServedApi("produce", 0, 11),
    1: ServedApi("fetch", 4, 17),
    2: ServedApi("list_offsets", 1, 10),
    3: ServedApi("metadata", 0, 12),
    8: ServedApi("offset_commit", 0, 9),
    9: ServedApi("offset_fetch", 0, 9),
    10: ServedApi("find_coordinator", 0, 6),
    11: ServedApi("join_group", 0, 9),
    12: ServedApi("heartbeat", 0, 4),
    13: ServedApi("leave_group", 0, 5),
    14: ServedApi("sync_group", 0, 5),
    15: ServedApi("describe_groups", 0, 5),
    16: ServedApi("list_groups", 0, 5),
    17: ServedApi("sasl_handshake", 0, 1),
    18: ServedApi("api_versions", 0, 4),
    19: ServedApi("create_topics", 0, 7),
    20: ServedApi("delete_topics", 0, 6),
    21: ServedApi("delete_records", 0, 2),
    22: ServedApi("init_producer_id", 0, 5),
    23: ServedApi("offset_for_leader_epoch", 0, 4),
    24: ServedApi("add_partitions_to_txn", 0, 3),
    25: ServedApi("add_offsets_to_txn", 0, 4),
    26: ServedApi("end_txn", 0, 4),
    27: ServedApi("write_txn_markers", 0, 1),
    28: ServedApi("txn_offset_commit", 0, 4),
    29: ServedApi("describe_acls", 1, 3),
    30: ServedApi("create_acls", 1, 3),
    31: ServedApi("delete_acls", 1, 3),
    32: ServedApi("describe_configs", 0, 4),
    33: ServedApi("alter_configs", 0, 2),
    34: ServedApi("alter_replica_log_dirs", 1, 2),
    35: ServedApi("describe_log_dirs", 0, 4),
    36: ServedApi("sasl_authenticate", 0, 2),
    37: ServedApi("create_partitions", 0, 3),
    42: ServedApi("delete_groups", 0, 2),
    43: ServedApi("elect_leaders", 0, 2),
    44: ServedApi("incremental_alter_configs", 0, 1),
    45: ServedApi("alter_partition_reassignments", 0, 0),
    46: ServedApi("list_partition_reassignments", 0, 0),
    47: ServedApi("offset_delete", 0, 0),
    50: ServedApi("describe_user_scram_credentials", 0, 0),
    51: ServedApi("alter_user_scram_credentials", 0, 0),
    55: ServedApi("describe_quorum", 0, 2),
    60: ServedApi("describe_cluster", 0, 1),
    61: ServedApi("describe_producers", 0, 0),
    65: ServedApi("describe_transactions", 0, 0),
    66: ServedApi("list_transactions", 0, 1),
    68: ServedApi("consumer_group_heartbeat", 0, 1),
    69: ServedApi("consumer_group_describe", 0, 0),
    74: ServedApi("list_client_metrics_resources", 0, 0),
    75: ServedApi("describe_topic_partitions", 0, 0),
    76: ServedApi("share_group_heartbeat", 1, 1),
    77: ServedApi("share_group_describe", 1, 1),
    78: ServedApi("share_fetch", 1, 2),
    79: ServedApi("share_acknowledge", 1, 2),
    90: ServedApi("describe_share_group_offsets", 0, 1),
    91: ServedApi("alter_share_group_offsets", 0, 0),
    92: ServedApi("delete_share_group_offsets", 0, 0),
}


class HandlerRegistry(Mapping[int, ApiHandler]):
    """API key -> handler, for the keys of ``served``; a handler module is imported on its first look-up.

    ``in``, ``len`` and iteration read ``served`` alone; a look-up (``[]``, ``get``, ``values()``...)
    imports the handler's module if it is not loaded yet. Touch it from the event loop thread (or
    before the loop runs): importing is not something two threads should race on.
    """

    __slots__ = ("_loaded", "_package", "served")

    def __init__(self, served: Mapping[int, ServedApi], package: str = __package__ or "") -> None:
        self.served = served
        self._package = package
        self._loaded: dict[int, ApiHandler] = {}

    def __getitem__(self, api_key: int) -> ApiHandler:
        handler = self._loaded.get(api_key)
        if handler is None:
            handler = self._load(api_key)
        return handler

    def get(self, api_key: int, default: ApiHandler | None = None) -> ApiHandler | None:  # type: ignore[override]
        handler = self._loaded.get(api_key)
        if handler is None:
            if api_key not in self.served:
                return default
            handler = self._load(api_key)
        return handler

    def __contains__(self, api_key: object) -> bool:
        return api_key in self.served

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.served))

    def __len__(self) -> int:
        return len(self.served)

    def loaded(self) -> frozenset[int]:
        """The API keys whose handler modules are imported so far."""
        return frozenset(self._loaded)

    def register(self, handler: ApiHandler, module: str) -> None:
        """Called by ``@handles`` as a handler module is imported."""
        if handler.api_key in self._loaded:
            raise ValueError(f"API key {handler.api_key} registered twice")
        served = self.served.get(handler.api_key)
        expected = ServedApi(module.rpartition(".")[2], handler.min_version, handler.max_version)
        if served != expected:
            raise ValueError(f"{handler.name} (API key {handler.api_key}) is registered by {module} for versions "
                             f"{handler.min_version}-{handler.max_version}, but SERVED lists {served}: "
                             "change the table in kafkalite.broker.handlers.registry with the handler")
        self._loaded[handler.api_key] = handler

    def _load(self, api_key: int) -> ApiHandler:
        served = self.served[api_key]  # KeyError: not an API this broker serves
        importlib.import_module(f"{self._package}.{served.module}")
        handler = self._loaded.get(api_key)
        if handler is None:
            raise LookupError(f"{self._package}.{served.module} registers no handler of API key {api_key}")
        return handler


HANDLERS = HandlerRegistry(SERVED)


def served_versions(handlers: Mapping[int, ApiHandler]) -> list[tuple[int, int, int]]:
    """(API key, min version, max version) of every handler, by API key, without importing any that the
    registry has not loaded yet."""
    if isinstance(handlers, HandlerRegistry):
        return [(key, api.min_version, api.max_version) for key, api in sorted(handlers.served.items())]
    return [(key, handler.min_version, handler.max_version) for key, handler in sorted(handlers.items())]


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
        HANDLERS.register(ApiHandler(
            api_key=api_key,
            name=request_type.NAME.removesuffix("Request"),
            min_version=min_version,
            max_version=max_version,
            request_type=request_type,
            response_type=response_type,
            handle=function,
        ), function.__module__)
        return function

    return register
