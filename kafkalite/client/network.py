"""Connections to a cluster's brokers, the metadata that names them, and coordinators.

:class:`NetworkClient` is what the producer, the admin client and the consumer share:

* **Bootstrap.** ``start()`` tries the ``bootstrap.servers`` addresses in turn until one answers
  ApiVersions and Metadata; from then on brokers are known by node id from the metadata.
* **Connections.** One :class:`~kafkalite.client.connection.BrokerConnection` per broker, opened on
  demand. A failed connect waits before the next try, exponentially from ``reconnect.backoff.ms`` up
  to ``reconnect.backoff.max.ms``, with +-20 % jitter so that many clients do not retry in step.
  :meth:`NetworkClient.ready_connection` never waits (the producer's sender asks it on every
  round); :meth:`NetworkClient.connection` waits for the connect.
* **Metadata.** A background task keeps :class:`~kafkalite.client.metadata.ClusterMetadata` fresh:
  every ``metadata.max.age.ms``, and at once (after ``retry.backoff.ms``) when someone calls
  :meth:`NetworkClient.request_metadata_update`. Only the topics the clients use are asked for.
* **Coordinators.** :meth:`NetworkClient.coordinator` finds (FindCoordinator) and remembers the
  broker that coordinates a group or a transactional id; :meth:`NetworkClient.forget_coordinator`
  drops it after NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE. A consumer talks to its group
  coordinator on a connection of its own (:meth:`NetworkClient.dedicated_id`), as the Java client
  does: a broker answers in request order per connection, so a JoinGroup parked until a rebalance
  completes must not hold up Fetch answers, nor a long-poll Fetch a heartbeat.

Everything runs on the event loop of the caller of ``start()``; nothing here is thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections.abc import Iterable
from typing import Any

from kafkalite.client.config import CommonConfig
from kafkalite.client.connection import BrokerConnection
from kafkalite.client.errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError, error_for
from kafkalite.client.metadata import BrokerInfo, ClusterMetadata
from kafkalite.client.security import ClientSecurity
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic

__all__ = ["COORDINATOR_GROUP", "COORDINATOR_TRANSACTION", "NetworkClient", "monotonic_ms"]

log = logging.getLogger("kafkalite.client")

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1
_BOOTSTRAP_NODE_BASE = -1000
_DEDICATED_NODE_BASE = -2_000_000  # second connections to a broker: this minus its node id


def monotonic_ms() -> float:
    return time.monotonic() * 1000

# Errors of a connection that retrying does not cure (the bootstrap raises them at once).
_AUTHENTICATION_ERRORS = frozenset({ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                    ErrorCode.ILLEGAL_SASL_STATE})


class NetworkClient:
    """The connections and the metadata of one client instance."""

    def __init__(self, config: CommonConfig, *, allow_auto_topic_creation: bool = True) -> None:
        self.config = config
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata = ClusterMetadata(config.metadata_max_age_ms, config.retry_backoff_ms)
        self._bootstrap = config.bootstrap_addresses
        self._security = ClientSecurity.from_config(config)  # TLS and SASL (None: PLAINTEXT)
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, int] = {}
        self._next_attempt_ms: dict[int, float] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self._metadata_wakeup = asyncio.Event()
        self._metadata_changed: asyncio.Future[None] | None = None
        self._metadata_refresh: asyncio.Task[None] | None = None
        self._metadata_task: asyncio.Task[None] | None = None
        self._closed = False
        self._started = False
        self.want_all_topics = False  # pattern subscriptions need every topic's metadata

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self, timeout_ms: int | None = None) -> None:
        """Bootstrap: the first Metadata from any bootstrap server, then keep it fresh."""
        if self._started:
            return
        deadline = monotonic_ms() + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms)
        last_error: BaseException | None = None
        while True:
            for index, (host, port) in enumerate(self._bootstrap):
                try:
                    connection = await self._connect(_BOOTSTRAP_NODE_BASE - index, host, port)
                    await self._refresh_with(connection)
                    break
                except (KafkaError, OSError) as exc:
                    if isinstance(exc, KafkaError) and exc.error_code in _AUTHENTICATION_ERRORS \
                            or isinstance(exc, ssl.SSLCertVerificationError):
                        raise  # refused credentials or an untrusted broker: retrying will not help
                    last_error = exc
                    log.debug("bootstrap server %s:%s failed: %s", host, port, exc)
            else:
                if monotonic_ms() >= deadline:
                    raise KafkaTimeoutError(
                        f"no bootstrap server of {self.config.bootstrap_servers!r} answered: {last_error}"
                    ) from last_error
                await asyncio.sleep(min(self._backoff_ms(self._failures.get(_BOOTSTRAP_NODE_BASE, 0)),
                                        max(0.0, deadline - monotonic_ms())) / 1000)
                self._failures[_BOOTSTRAP_NODE_BASE] = self._failures.get(_BOOTSTRAP_NODE_BASE, 0) + 1
                continue
            break
        self._started = True
        self._metadata_task = asyncio.get_running_loop().create_task(self._metadata_loop())

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in [self._metadata_task, self._metadata_refresh, *self._connecting.values()]:
            if task is not None and not task.done():
                task.cancel()
        for task in [self._metadata_task, self._metadata_refresh, *self._connecting.values()]:
            if task is not None:
                with contextlib.suppress(BaseException):
                    await task
        for connection in list(self._connections.values()):
            connection.close(ClientClosedError("the client was closed"))
        self._connections.clear()
        if self._metadata_changed is not None and not self._metadata_changed.done():
            self._metadata_changed.set_exception(ClientClosedError("the client was closed"))
            self._metadata_changed.exception()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- connections ---------------------------------------------------------------------------

    def _backoff_ms(self, failures: int) -> float:
        base = self.config.reconnect_backoff_ms
        ceiling = max(base, self.config.reconnect_backoff_max_ms)
        delay = min(base * (2 ** min(failures, 30)), ceiling)
        return float(delay * random.uniform(0.8, 1.2))

    async def _connect(self, node_id: int, host: str, port: int) -> BrokerConnection:
        config = self.config
        connection = BrokerConnection(host, port, node_id=node_id, client_id=config.client_id,
                                      request_timeout_ms=config.request_timeout_ms,
                                      send_buffer_bytes=config.send_buffer_bytes,
                                      receive_buffer_bytes=config.receive_buffer_bytes, security=self._security)
        try:
            await connection.open(config.socket_connection_setup_timeout_ms)
        except BaseException:
            failures = self._failures.get(node_id, 0)
            self._failures[node_id] = failures + 1
            self._next_attempt_ms[node_id] = monotonic_ms() + self._backoff_ms(failures)
            raise
        self._failures.pop(node_id, None)
        self._next_attempt_ms.pop(node_id, None)
        self._connections[node_id] = connection
        connection.on_close(self._connection_closed)
        return connection

    def _connection_closed(self, connection: BrokerConnection) -> None:
        if self._connections.get(connection.node_id) is connection:
            del self._connections[connection.node_id]
            self._next_attempt_ms[connection.node_id] = monotonic_ms() + self._backoff_ms(0)
            if connection.node_id >= 0 and not self._closed:
                self.request_metadata_update()  # the broker may be gone, or leadership moved

    def ready_connection(self, node_id: int) -> BrokerConnection | None:
        """An open connection to ``node_id`` now, or ``None`` (and a connect begins, back-off allowing)."""
        connection = self._connections.get(node_id)
        if connection is not None and connection.is_open:
            return connection
        self._begin_connect(node_id)
        return None

    def connect_delay_ms(self, node_id: int) -> float:
        """Milliseconds until a connect to ``node_id`` may be tried again (0: now)."""
        return max(0.0, self._next_attempt_ms.get(node_id, 0.0) - monotonic_ms())

    def _begin_connect(self, node_id: int) -> asyncio.Task[BrokerConnection] | None:
        if self._closed:
            return None
        task = self._connecting.get(node_id)
        if task is not None and not task.done():
            return task
        broker = self.metadata.broker(node_id if node_id > _DEDICATED_NODE_BASE else _DEDICATED_NODE_BASE - node_id)
        if broker is None:
            self.request_metadata_update()
            return None
        delay = self.connect_delay_ms(node_id)

        async def connect() -> BrokerConnection:
            if delay > 0:
                await asyncio.sleep(delay / 1000)
            try:
                return await self._connect(node_id, broker.host, broker.port)
            finally:
                self._connecting.pop(node_id, None)

        task = asyncio.get_running_loop().create_task(connect())
        task.add_done_callback(_consume_exception)
        self._connecting[node_id] = task
        return task

    async def connection(self, node_id: int) -> BrokerConnection:
        """An open connection to ``node_id``, connecting (after any back-off) if needed."""
        if self._closed:
            raise ClientClosedError("the client was closed")
        connection = self._connections.get(node_id)
        if connection is not None and connection.is_open:
            return connection
        task = self._begin_connect(node_id)
        if task is None:
            await self.refresh_metadata()
            task = self._begin_connect(node_id)
            if task is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return await asyncio.shield(task)

    def least_loaded_connection(self) -> BrokerConnection | None:
        """The open connection with the fewest requests in flight."""
        best: BrokerConnection | None = None
        for connection in self._connections.values():
            if connection.is_open and (best is None or connection.in_flight_count < best.in_flight_count):
                best = connection
        return best

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: an open one, else a known broker, else a bootstrap server."""
        connection = self.least_loaded_connection()
        if connection is not None:
            return connection
        node_ids = list(self.metadata.brokers)
        random.shuffle(node_ids)
        last_error: BaseException | None = None
        for node_id in node_ids:
            try:
                return await self.connection(node_id)
            except (KafkaError, OSError) as exc:
                last_error = exc
        for index, (host, port) in enumerate(self._bootstrap):
            try:
                return await self._connect(_BOOTSTRAP_NODE_BASE - index, host, port)
            except (KafkaError, OSError) as exc:
                last_error = exc
        raise KafkaConnectionError(f"no broker of the cluster can be reached: {last_error}")

    def version_for(self, request_type: type[Message], node_id: int | None = None, max_version: int | None = None,
                    min_version: int | None = None) -> int:
        """The version to use with ``node_id`` (or any open connection)."""
        connection = self._connections.get(node_id) if node_id is not None else self.least_loaded_connection()
        if connection is None:
            raise KafkaConnectionError("no open connection to choose a version with")
        return connection.version_for(request_type, max_version, min_version)

    # --- requests --------------------------------------------------------------------------------

    async def send(self, node_id: int, request: Message, *, max_version: int | None = None,
                   min_version: int | None = None, timeout_ms: float | None = None) -> Any:
        """Send ``request`` to ``node_id`` at the highest common version and await the response."""
        connection = await self.connection(node_id)
        return await connection.send(request, connection.version_for(type(request), max_version, min_version),
                                     timeout_ms=timeout_ms)

    async def send_any(self, request: Message, *, max_version: int | None = None,
                       min_version: int | None = None) -> Any:
        connection = await self.any_connection()
        return await connection.send(request, connection.version_for(type(request), max_version, min_version))

    async def send_to_controller(self, request: Message, **versions: Any) -> Any:
        """Admin requests that Kafka wants at the controller (it forwards them anyway since KIP-590)."""
        controller = self.metadata.controller_id
        if controller >= 0 and controller in self.metadata.brokers:
            return await self.send(controller, request, **versions)
        return await self.send_any(request, **versions)

    # --- metadata ------------------------------------------------------------------------------

    def request_metadata_update(self) -> None:
        self.metadata.request_update()
        self._metadata_wakeup.set()

    def add_topics(self, topics: Iterable[str]) -> None:
        if self.metadata.add_topics(topics):
            self._metadata_wakeup.set()

    async def _metadata_loop(self) -> None:
        while not self._closed:
            delay = self.metadata.time_to_next_update(monotonic_ms())
            if delay > 0:
                self._metadata_wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._metadata_wakeup.wait(), delay / 1000)
                continue
            try:
                await self.refresh_metadata()
            except ClientClosedError:
                return
            except (KafkaError, OSError) as exc:
                log.debug("metadata refresh failed: %s", exc)

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *, all_topics: bool = False) -> None:
        """One Metadata round trip (shared by everyone asking at the same time)."""
        if topics is not None:
            self.metadata.add_topics(topics)
        if all_topics:
            await self._refresh_once(all_topics=True)
            return
        running = self._metadata_refresh
        if running is None or running.done():
            running = self._metadata_refresh = asyncio.get_running_loop().create_task(self._refresh_once())
        await asyncio.shield(running)

    async def _refresh_once(self, all_topics: bool = False) -> None:
        self.metadata.attempted(monotonic_ms())
        try:
            connection = await self.any_connection()
            await self._refresh_with(connection, all_topics)
        except BaseException:
            self.metadata.failed(monotonic_ms())
            raise

    async def _refresh_with(self, connection: BrokerConnection, all_topics: bool = False) -> None:
        version = connection.version_for(MetadataRequest, min_version=1)
        wanted = None if all_topics or self.want_all_topics else sorted(self.metadata.interesting_topics)
        request = MetadataRequest(
            topics=None if wanted is None else [MetadataRequestTopic(name=name) for name in wanted],
            allow_auto_topic_creation=self.allow_auto_topic_creation,
        )
        response = await connection.send(request, version)
        self.metadata.update(response, monotonic_ms(), wanted)
        waiter, self._metadata_changed = self._metadata_changed, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def metadata_changed(self) -> None:
        """Wait for the next metadata update."""
        if self._metadata_changed is None:
            self._metadata_changed = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._metadata_changed)

    async def wait_for_topic(self, topic: str, timeout_ms: float) -> int:
        """Wait until ``topic``'s partitions are known; its partition count.

        A topic the broker reports as missing (and does not create) is retried until the deadline,
        then :class:`KafkaTimeoutError` names the topic and the last error.
        """
        count = self.metadata.partition_count(topic)
        if count is not None:
            return count
        deadline = monotonic_ms() + timeout_ms
        self.add_topics([topic])
        while True:
            self.request_metadata_update()
            left = deadline - monotonic_ms()
            if left <= 0:
                error = self.metadata.topic_error(topic)
                detail = f" (the broker says {error.name})" if error not in (None, ErrorCode.NONE) else ""
                raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after {timeout_ms:.0f} ms{detail}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.metadata_changed(), left / 1000)
            count = self.metadata.partition_count(topic)
            if count is not None:
                return count
            error = self.metadata.topic_error(topic)
            if error is not None and error not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                   ErrorCode.LEADER_NOT_AVAILABLE) and not error.retriable:
                raise error_for(error, context=f"topic {topic!r}")

    # --- coordinators --------------------------------------------------------------------------

    async def coordinator(self, key_type: int, key: str, timeout_ms: float | None = None) -> int:
        """The node id coordinating group (key type 0) or transactional id (1) ``key``."""
        known = self._coordinators.get((key_type, key))
        if known is not None:
            return known
        deadline = monotonic_ms() + (timeout_ms if timeout_ms is not None else self.config.request_timeout_ms)
        attempt = 0
        while True:
            connection = await self.any_connection()
            version = connection.version_for(FindCoordinatorRequest)
            if version >= 4:
                request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            else:
                request = FindCoordinatorRequest(key=key, key_type=key_type)
            response: FindCoordinatorResponse = await connection.send(request, version)
            if version >= 4:
                entry = response.coordinators[0]
                error, node_id, host, port = entry.error_code, entry.node_id, entry.host, entry.port
                message = entry.error_message
            else:
                error, node_id, host, port = response.error_code, response.node_id, response.host, response.port
                message = response.error_message
            if error == ErrorCode.NONE:
                if node_id not in self.metadata.brokers:
                    self.metadata.brokers[node_id] = BrokerInfo(node_id, host, port)
                self._coordinators[(key_type, key)] = node_id
                return node_id
            code = ErrorCode.from_code(error)
            if not code.retriable or monotonic_ms() >= deadline:
                kind = "group" if key_type == COORDINATOR_GROUP else "transactional id"
                raise error_for(error, message, context=f"coordinator of {kind} {key!r}")
            attempt += 1
            await asyncio.sleep(min(self.config.retry_backoff_ms * 2 ** min(attempt, 10),
                                    self.config.retry_backoff_max_ms) / 1000)

    @staticmethod
    def dedicated_id(node_id: int) -> int:
        """The id under which :meth:`connection` and :meth:`send` keep a second connection to ``node_id``."""
        return _DEDICATED_NODE_BASE - node_id

    def forget_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)


def _consume_exception(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()

