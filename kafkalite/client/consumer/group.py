"""What both group protocols share: the coordinator, commits, committed offsets, the rebalance listener.

:class:`GroupCoordinatorBase` is the consumer's door to its group's coordinator. The protocol
subclasses (:class:`~.classic.ClassicCoordinator`, :class:`~.membership.ConsumerGroupCoordinator`)
add membership; this class does what does not depend on it:

* **Finding the coordinator** (FindCoordinator through :class:`~kafkalite.client.network.NetworkClient`),
  and forgetting it after NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection.
* **Commits** (OffsetCommit) with the member's identity: generation and member id (classic), member
  epoch (KIP-848), or neither for a consumer without a group membership (``assign()`` with a group
  id). ``commit`` retries coordinator errors until its deadline; a group that moved on
  (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, STALE_MEMBER_EPOCH) is
  :class:`~kafkalite.client.errors.CommitFailedError`, and the membership rejoins. ``commit_async``
  sends without waiting; its outcome goes to a callback and a future. **Auto-commit** sends the
  positions every ``auto.commit.interval.ms`` from ``poll()``.
* **Committed offsets** (OffsetFetch with ``require_stable``: offsets still pending in a transaction
  are retried, UNSTABLE_OFFSET_COMMIT, rather than read half-done).
* **The rebalance listener**: its methods may be plain functions or coroutines; they run inside
  ``poll()`` (or ``close()``/``unsubscribe()``), never in the background, so they may call the
  consumer. An exception from a listener is raised from that ``poll()`` once the rebalance step is
  complete, as the Java client does.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkalite.client.admin_types import OffsetAndMetadata
from kafkalite.client.config import ConsumerConfig
from kafkalite.client.consumer.fetcher import Fetcher, Wakeup
from kafkalite.client.consumer.subscription import SubscriptionState
from kafkalite.client.errors import CommitFailedError, KafkaTimeoutError, error_for
from kafkalite.client.metadata import TopicPartition
from kafkalite.client.network import COORDINATOR_GROUP, NetworkClient, monotonic_ms
from kafkalite.client.producer.transactions import ConsumerGroupMetadata
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest
from kafkalite.protocol.messages import offset_commit_request as offset_commit
from kafkalite.protocol.messages import offset_fetch_request as offset_fetch

__all__ = ["ConsumerRebalanceListener", "GroupCoordinatorBase", "OffsetCommitCallback", "invoke_listener"]

log = logging.getLogger("kafkalite.client")

OffsetCommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRIABLE_COMMIT = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT,
                               ErrorCode.NETWORK_EXCEPTION, ErrorCode.UNSTABLE_OFFSET_COMMIT,
                               *COORDINATOR_ERRORS})
_GROUP_MOVED_ON = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                             ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.STALE_MEMBER_EPOCH,
                             ErrorCode.FENCED_MEMBER_EPOCH})


class ConsumerRebalanceListener:
    """Told when partitions come and go. Override what you need; each method may be ``async``.

    ``on_partitions_revoked`` runs before partitions are given up in a rebalance (commit here what
    you processed), ``on_partitions_assigned`` after new ones arrive, and ``on_partitions_lost``
    when the group already gave them to someone else (the membership was lost: committing is no
    longer possible). By default a loss is reported as a revocation, as in the Java client.
    """

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> Any:
        return None

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> Any:
        return None

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> Any:
        return self.on_partitions_revoked(partitions)


async def invoke_listener(listener: Any, method: str, partitions: Iterable[TopicPartition]) -> BaseException | None:
    """Call ``listener.<method>(sorted partitions)`` (awaiting it if it is a coroutine); its error, if any."""
    if listener is None:
        return None
    callback = getattr(listener, method, None)
    if callback is None and method == "on_partitions_lost":
        callback = getattr(listener, "on_partitions_revoked", None)
    if callback is None:
        return None
    try:
        result = callback(sorted(partitions))
        if inspect.isawaitable(result):
            await result
    except Exception as exc:  # noqa: BLE001 - handed to poll()
        log.error("rebalance listener %s failed: %r", method, exc)
        return exc
    return None


class GroupCoordinatorBase:
    """The group's coordinator, commits and committed offsets (see the module docstring)."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, fetcher: Fetcher,
                 config: ConsumerConfig) -> None:
        assert config.group_id is not None
        self.client = client
        self.subscriptions = subscriptions
        self.fetcher = fetcher
        self.config = config
        self.group_id: str = config.group_id
        self.group_instance_id = config.group_instance_id
        self.coordinator_id: int | None = None
        self.fatal_error: BaseException | None = None
        self.listener_errors: list[BaseException] = []
        self.wakeup = Wakeup()  # poll() has something to do (a rejoin, an assignment)
        self.closed = False
        self.last_poll_ms = monotonic_ms()
        self.next_auto_commit_ms = monotonic_ms() + config.auto_commit_interval_ms
        self._auto_commit: asyncio.Future[None] | None = None
        self._pending_commits: set[asyncio.Task[None]] = set()

    # --- what subclasses provide ------------------------------------------------------------------------

    def commit_identity(self) -> tuple[int, str, str | None]:
        """(generation or member epoch, member id, group instance id) for OffsetCommit."""
        return -1, "", None

    def fetch_identity(self) -> tuple[str | None, int]:
        """(member id, member epoch) for OffsetFetch v9+ (KIP-848 members); (None, -1) otherwise."""
        return None, -1

    def on_group_moved_on(self, code: ErrorCode) -> None:
        """A commit learned that the group rebalanced without this member: rejoin."""

    def group_metadata(self) -> ConsumerGroupMetadata:
        generation, member_id, instance_id = self.commit_identity()
        return ConsumerGroupMetadata(self.group_id, generation, member_id, instance_id)

    def raise_pending(self) -> None:
        if self.fatal_error is not None:
            raise self.fatal_error
        if self.listener_errors:
            raise self.listener_errors.pop(0)

    # --- the coordinator ------------------------------------------------------------------------------

    async def ensure_coordinator(self, deadline_ms: float) -> int:
        """The id of the connection to the coordinator (looking it up and retrying until ``deadline_ms``)."""
        attempt = 0
        while True:
            if self.coordinator_id is not None:
                return self.coordinator_id
            try:
                node_id = await self.client.coordinator(COORDINATOR_GROUP, self.group_id,
                                                        max(1.0, deadline_ms - monotonic_ms()))
                dedicated = self.client.dedicated_id(node_id)
                await self.client.connection(dedicated)
                self.coordinator_id = dedicated
                return dedicated
            except KafkaError as exc:
                if not (exc.retriable or exc.error_code in COORDINATOR_ERRORS):
                    raise
                last: BaseException = exc
            except OSError as exc:
                last = exc
            self.client.forget_coordinator(COORDINATOR_GROUP, self.group_id)
            attempt += 1
            if monotonic_ms() >= deadline_ms:
                raise KafkaTimeoutError(f"no coordinator found for group {self.group_id!r}: {last}")
            await asyncio.sleep(min(self.config.retry_backoff_ms * 2 ** min(attempt, 5),
                                    self.config.retry_backoff_max_ms, max(1.0, deadline_ms - monotonic_ms())) / 1000)

    def coordinator_dead(self, reason: object) -> None:
        if self.coordinator_id is not None:
            log.info("group %r: coordinator %s unavailable (%s); looking it up again", self.group_id,
                     self.client.dedicated_id(self.coordinator_id), reason)
        self.coordinator_id = None
        self.client.forget_coordinator(COORDINATOR_GROUP, self.group_id)

    async def send_to_coordinator(self, request: Any, deadline_ms: float, **versions: Any) -> Any:
        node_id = await self.ensure_coordinator(deadline_ms)
        try:
            return await self.client.send(node_id, request, **versions)
        except (KafkaError, OSError) as exc:
            if isinstance(exc, OSError) or exc.error_code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT):
                self.coordinator_dead(exc)
            raise

    # --- commits ----------------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline_ms: float) -> None:
        """Commit ``offsets``, retrying coordinator errors until ``deadline_ms``."""
        if not offsets:
            return
        attempt = 0
        while True:
            try:
                await self._commit_once(offsets, deadline_ms)
                return
            except KafkaError as exc:
                if isinstance(exc, CommitFailedError) or exc.error_code not in _RETRIABLE_COMMIT:
                    raise
                last: BaseException = exc
            except OSError as exc:
                last = exc
            attempt += 1
            if monotonic_ms() >= deadline_ms:
                raise KafkaTimeoutError(f"offset commit for group {self.group_id!r} did not complete in time: {last}")
            await asyncio.sleep(min(self.config.retry_backoff_ms * 2 ** min(attempt - 1, 5),
                                    self.config.retry_backoff_max_ms, max(1.0, deadline_ms - monotonic_ms())) / 1000)

    async def _commit_once(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline_ms: float) -> None:
        generation, member_id, instance_id = self.commit_identity()
        topics: dict[str, list[offset_commit.OffsetCommitRequestPartition]] = {}
        for partition, value in sorted(offsets.items()):
            topics.setdefault(partition.topic, []).append(offset_commit.OffsetCommitRequestPartition(
                partition_index=partition.partition, committed_offset=value.offset,
                committed_leader_epoch=value.leader_epoch, committed_metadata=value.metadata))
        request = OffsetCommitRequest(
            group_id=self.group_id, generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=instance_id,
            topics=[offset_commit.OffsetCommitRequestTopic(name, partitions) for name, partitions in topics.items()])
        response: OffsetCommitResponse = await self.send_to_coordinator(request, deadline_ms, min_version=2)
        failure: KafkaError | None = None
        for topic in response.topics:
            for item in topic.partitions:
                if item.error_code == ErrorCode.NONE:
                    continue
                code = ErrorCode.from_code(item.error_code)
                context = f"commit of {topic.name}-{item.partition_index} for group {self.group_id!r}"
                if code in COORDINATOR_ERRORS:
                    self.coordinator_dead(code.name)
                if code in _GROUP_MOVED_ON:
                    self.on_group_moved_on(code)
                    failure = CommitFailedError(code, (
                        f"{context}: {code.name}: the group rebalanced and the partitions may belong to another "
                        "member now; the consumer rejoins on its next poll()"))
                elif code is ErrorCode.FENCED_INSTANCE_ID:
                    failure = error_for(code, context=context)
                    self.fatal_error = failure
                elif failure is None:
                    failure = error_for(code, context=context)
        if failure is not None:
            raise failure

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     callback: OffsetCommitCallback | None = None) -> asyncio.Future[None]:
        """Send a commit without waiting; ``callback(offsets, error)`` and the future tell the outcome."""
        loop = asyncio.get_running_loop()
        result: asyncio.Future[None] = loop.create_future()
        offsets = dict(offsets)

        async def run() -> None:
            error: BaseException | None = None
            try:
                await self.commit(offsets, monotonic_ms() + self.config.default_api_timeout_ms)
            except Exception as exc:  # noqa: BLE001 - handed to the callback and the future
                error = exc
            if callback is not None:
                try:
                    outcome = callback(offsets, error)
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception:  # noqa: BLE001
                    log.exception("offset commit callback failed")
            if not result.done():
                if error is None:
                    result.set_result(None)
                else:
                    result.set_exception(error)
                    result.exception()  # retrieved: an unobserved failure is the callback's business

        task = loop.create_task(run())
        self._pending_commits.add(task)
        task.add_done_callback(self._pending_commits.discard)
        return result

    async def wait_for_pending_commits(self, deadline_ms: float) -> None:
        if self._pending_commits:
            await asyncio.wait(list(self._pending_commits), timeout=max(0.0, (deadline_ms - monotonic_ms()) / 1000))

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {partition: OffsetAndMetadata(offset, "", epoch if epoch is not None else -1)
                for partition, (offset, epoch) in self.subscriptions.consumed_offsets().items()}

    def maybe_auto_commit(self) -> None:
        """From poll(): commit the positions when ``auto.commit.interval.ms`` has passed."""
        if not self.config.enable_auto_commit:
            return
        now = monotonic_ms()
        if now < self.next_auto_commit_ms:
            return
        if self._auto_commit is not None and not self._auto_commit.done():
            return
        self.next_auto_commit_ms = now + self.config.auto_commit_interval_ms
        offsets = self.consumed_offsets()
        if offsets and self.can_commit():
            self._auto_commit = self.commit_async(offsets, _log_auto_commit)

    def can_commit(self) -> bool:
        """Whether a commit now would be accepted (a member in a generation, or no membership at all)."""
        return True

    async def commit_consumed_sync(self, deadline_ms: float, what: str) -> None:
        """Auto-commit before a rebalance or on close: best effort, errors logged."""
        if not self.config.enable_auto_commit or not self.can_commit():
            return
        offsets = self.consumed_offsets()
        if not offsets:
            return
        try:
            await self.commit(offsets, deadline_ms)
        except (KafkaError, OSError) as exc:
            log.warning("group %r: auto-commit %s failed: %s", self.group_id, what, exc)

    # --- committed offsets ------------------------------------------------------------------------------

    async def fetch_committed(self, partitions: Iterable[TopicPartition],
                              deadline_ms: float) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets for ``partitions`` (None where nothing is committed)."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        attempt = 0
        while True:
            try:
                return await self._fetch_committed_once(wanted, deadline_ms)
            except KafkaError as exc:
                if exc.error_code not in _RETRIABLE_COMMIT and not exc.retriable:
                    raise
                last: BaseException = exc
            except OSError as exc:
                last = exc
            attempt += 1
            if monotonic_ms() >= deadline_ms:
                raise KafkaTimeoutError(f"committed offsets of group {self.group_id!r} not fetched in time: {last}")
            await asyncio.sleep(min(self.config.retry_backoff_ms * 2 ** min(attempt - 1, 5),
                                    self.config.retry_backoff_max_ms, max(1.0, deadline_ms - monotonic_ms())) / 1000)

    async def _fetch_committed_once(self, wanted: list[TopicPartition],
                                    deadline_ms: float) -> dict[TopicPartition, OffsetAndMetadata | None]:
        by_topic: dict[str, list[int]] = {}
        for partition in wanted:
            by_topic.setdefault(partition.topic, []).append(partition.partition)
        node_id = await self.ensure_coordinator(deadline_ms)
        connection = await self.client.connection(node_id)
        version = connection.version_for(OffsetFetchRequest, min_version=1)
        member_id, member_epoch = self.fetch_identity()
        if version >= 8:
            request = OffsetFetchRequest(require_stable=True, groups=[offset_fetch.OffsetFetchRequestGroup(
                group_id=self.group_id, member_id=member_id, member_epoch=member_epoch,
                topics=[offset_fetch.OffsetFetchRequestTopics(name, indexes) for name, indexes in by_topic.items()])])
        else:
            request = OffsetFetchRequest(group_id=self.group_id, require_stable=True, topics=[
                offset_fetch.OffsetFetchRequestTopic(name, indexes) for name, indexes in by_topic.items()])
        try:
            response = await connection.send(request, version)
        except (KafkaError, OSError) as exc:
            self.coordinator_dead(exc)
            raise
        if version >= 8:
            group = response.groups[0]
            group_error, topics = group.error_code, group.topics
        else:
            group_error, topics = response.error_code, response.topics
        if group_error != ErrorCode.NONE:
            self._offset_fetch_error(group_error)
        result: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for topic in topics:
            for item in topic.partitions:
                partition = TopicPartition(topic.name, item.partition_index)
                if item.error_code != ErrorCode.NONE:
                    self._offset_fetch_error(item.error_code, str(partition))
                result[partition] = (
                    OffsetAndMetadata(item.committed_offset, item.metadata, item.committed_leader_epoch)
                    if item.committed_offset >= 0 else None)
        for partition in wanted:
            result.setdefault(partition, None)
        return result

    def _offset_fetch_error(self, code: int, context: str = "") -> None:
        error = ErrorCode.from_code(code)
        if error in COORDINATOR_ERRORS:
            self.coordinator_dead(error.name)
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.STALE_MEMBER_EPOCH):
            self.on_group_moved_on(error)
        text = f"committed offsets of group {self.group_id!r}" + (f" for {context}" if context else "")
        raise error_for(error, context=text)

    # --- lifecycle --------------------------------------------------------------------------------------

    async def poll(self, deadline_ms: float) -> None:
        """Called by every ``poll()``: keep the membership current; may run the rebalance listener."""
        self.last_poll_ms = monotonic_ms()
        self.raise_pending()
        self.maybe_auto_commit()

    async def close(self, deadline_ms: float) -> None:
        self.closed = True
        await self.commit_consumed_sync(deadline_ms, "on close")
        await self.wait_for_pending_commits(deadline_ms)

    async def on_unsubscribe(self, deadline_ms: float) -> None:
        """``unsubscribe()``: give up the assignment (listener told) and leave the group."""


def _log_auto_commit(offsets: dict[TopicPartition, OffsetAndMetadata], error: BaseException | None) -> None:
    if error is not None:
        log.warning("auto-commit of %d partitions failed: %s", len(offsets), error)

