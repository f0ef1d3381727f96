"""Blocking ``Producer``, ``Consumer`` and ``Admin`` for scripts, notebooks and tests: the asyncio core on one thread.

Every blocking client of a process shares one background thread running one event loop (started on
first use, a daemon thread, so it never keeps the interpreter alive). Each method hands its
coroutine to that loop and waits for the answer; nothing here re-implements the client.

``Producer.send()`` returns a ``concurrent.futures.Future`` at once. Sends are queued and handed to
the loop in bulk (one wake-up of the loop thread carries every send queued meanwhile), in order;
an error of the send itself (a wrong type, no buffer space within ``max.block.ms``) is set on that
future, like a delivery error. ``send_and_wait()`` returns the ``RecordMetadata`` or raises.

``Consumer`` runs the rebalance listener on the thread that called ``poll()`` (or ``close()``,
``unsubscribe()``): while a blocking call waits for the loop, it also runs the listener calls the
loop hands back to it, so a listener may call the consumer (``commit()`` in ``on_partitions_revoked``)
as with the Java client. Iterating over the consumer (``for record in consumer``) takes records a
``poll()``'s worth at a time and counts each as consumed when it is handed out.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import queue
import re
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from kafkalite.client.admin import Admin as AsyncAdmin
from kafkalite.client.admin_types import OffsetAndMetadata
from kafkalite.client.consumer.consumer import Consumer as AsyncConsumer
from kafkalite.client.consumer.fetcher import OffsetAndTimestamp
from kafkalite.client.consumer.records import ConsumerRecord, ConsumerRecords
from kafkalite.client.consumer.subscription import PartitionState
from kafkalite.client.errors import ClientClosedError
from kafkalite.client.metadata import TopicPartition
from kafkalite.client.producer.accumulator import RecordFuture, RecordMetadata
from kafkalite.client.producer.producer import Headers
from kafkalite.client.producer.producer import Producer as AsyncProducer

__all__ = ["Admin", "Consumer", "Producer"]

_T = TypeVar("_T")


class _LoopThread:
    """The one event loop that runs every blocking client's async core."""

    _lock = threading.Lock()
    _instance: _LoopThread | None = None

    def __init__(self) -> None:
        try:
            import uvloop

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover - uvloop is a dependency, but the client does not need it
            self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="kafkalite-client-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> _LoopThread:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise RuntimeError("a blocking client method was called from the client's own loop thread")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)


def _copy_outcome(record_future: RecordFuture, target: concurrent.futures.Future[RecordMetadata]) -> None:
    if target.done():
        return
    error = record_future.exception()
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(record_future.result())


class Producer:
    """The blocking producer: the same methods as :class:`kafkalite.client.Producer`, without ``await``."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        self._runner = _LoopThread.get()
        self._producer = AsyncProducer(config, **keywords)
        self._queue: collections.deque[tuple[tuple[Any, ...], concurrent.futures.Future[RecordMetadata]]] = (
            collections.deque())
        self._queue_lock = threading.Lock()
        self._drain_scheduled = False
        self._waiting: dict[Any, list[tuple[RecordFuture, concurrent.futures.Future[RecordMetadata]]]] = {}
        self._runner.run(self._producer.start())

    @property
    def config(self) -> Any:
        return self._producer.config

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             headers: Headers | None = None, timestamp: int | None = None) -> concurrent.futures.Future[RecordMetadata]:
        """Queue one record; a future resolving to its :class:`RecordMetadata` (or its error)."""
        target: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        with self._queue_lock:
            self._queue.append(((topic, value, key, partition, headers, timestamp), target))
            schedule = not self._drain_scheduled
            self._drain_scheduled = True
        if schedule:
            self._runner.loop.call_soon_threadsafe(self._start_drain)
        return target

    def _start_drain(self) -> None:
        self._runner.loop.create_task(self._drain())

    async def _drain(self) -> None:
        producer = self._producer
        while True:
            with self._queue_lock:
                if not self._queue:
                    self._drain_scheduled = False
                    return
                items = list(self._queue)
                self._queue.clear()
            for arguments, target in items:
                try:
                    record_future = await producer.send(*arguments)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller's future
                    if not target.done():
                        target.set_exception(exc)
                    continue
                if record_future.done():
                    _copy_outcome(record_future, target)
                    continue
                batch = record_future.batch
                waiting = self._waiting.get(batch)
                if waiting is None:  # one callback per batch, not per record
                    waiting = self._waiting[batch] = []
                    batch.future.add_done_callback(functools.partial(self._settle, batch))
                waiting.append((record_future, target))

    def send_and_wait(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                      headers: Headers | None = None, timestamp: int | None = None,
                      timeout: float | None = None) -> RecordMetadata:
        return self._runner.run(self._producer.send_and_wait(topic, value, key, partition, headers, timestamp),
                                timeout)

    def send_many(self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None = None,
                  partition: int | None = None, timestamp: int | None = None) -> list[concurrent.futures.Future[Any]]:
        """Queue many records of one topic in one call; one future per batch used (see the async one)."""
        self._flush_queue()
        futures = self._runner.run(self._producer.send_many(topic, values, keys, partition, timestamp))
        results = []
        for record_future in futures:
            target: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
            self._runner.loop.call_soon_threadsafe(self._watch, record_future, target)
            results.append(target)
        return results

    def _settle(self, batch: Any, _: Any = None) -> None:
        for record_future, target in self._waiting.pop(batch, ()):
            _copy_outcome(record_future, target)

    @staticmethod
    def _watch(record_future: RecordFuture, target: concurrent.futures.Future[RecordMetadata]) -> None:
        record_future.add_done_callback(lambda done: _copy_outcome(done, target))

    def _flush_queue(self) -> None:
        """Wait until every queued send has reached the async producer (keeps order with other calls)."""
        async def settle() -> None:
            while self._drain_scheduled:
                await asyncio.sleep(0)

        self._runner.run(settle())

    def flush(self, timeout: float | None = None) -> None:
        self._flush_queue()
        self._runner.run(self._producer.flush(timeout))

    def close(self, timeout: float | None = None) -> None:
        if self._producer.closed:
            return
        self._flush_queue()
        self._runner.run(self._producer.close(timeout))

    def partitions_for(self, topic: str) -> list[int]:
        return self._runner.run(self._producer.partitions_for(topic))

    def init_transactions(self) -> None:
        self._runner.run(self._producer.init_transactions())

    def begin_transaction(self) -> None:
        self._runner.run(self._producer.begin_transaction())

    def send_offsets_to_transaction(self, offsets: Mapping[Any, int], group_metadata: Any) -> None:
        self._flush_queue()
        self._runner.run(self._producer.send_offsets_to_transaction(offsets, group_metadata))

    def commit_transaction(self) -> None:
        self._flush_queue()
        self._runner.run(self._producer.commit_transaction())

    def abort_transaction(self) -> None:
        self._flush_queue()
        self._runner.run(self._producer.abort_transaction())


class Admin:
    """The blocking admin client: every method of :class:`kafkalite.client.Admin`, without ``await``."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        self._runner = _LoopThread.get()
        self._admin = AsyncAdmin(config, **keywords)
        self._runner.run(self._admin.start())

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._runner.run(self._admin.close())

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._admin, name)
        if not callable(method) or name.startswith("_"):
            return method

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._runner.run(method(*args, **kwargs))

        blocking.__name__ = name
        blocking.__doc__ = method.__doc__
        return blocking


_Work = tuple[Callable[..., Any], tuple[Any, ...], concurrent.futures.Future[Any]]


class _ListenerOnCallerThread:
    """The rebalance listener as the async core sees it: each call runs on the thread blocked in the consumer."""

    def __init__(self, listener: Any, owner: Consumer) -> None:
        self.listener = listener
        self.owner = owner

    async def _call(self, method: str, partitions: list[TopicPartition]) -> None:
        callback = getattr(self.listener, method, None)
        if callback is None and method == "on_partitions_lost":
            callback = getattr(self.listener, "on_partitions_revoked", None)
        if callback is None:
            return
        inbox = self.owner._servicing[-1] if self.owner._servicing else None
        if inbox is None:  # nobody waits on the consumer: run it here
            callback(partitions)
            return
        reply: concurrent.futures.Future[Any] = concurrent.futures.Future()
        inbox.put((callback, (partitions,), reply))
        await asyncio.wrap_future(reply)

    async def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        await self._call("on_partitions_revoked", partitions)

    async def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        await self._call("on_partitions_assigned", partitions)

    async def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        await self._call("on_partitions_lost", partitions)


class Consumer:
    """The blocking consumer: the methods of :class:`kafkalite.client.Consumer`, without ``await``."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        self._runner = _LoopThread.get()
        self._consumer = AsyncConsumer(config, **keywords)
        self._servicing: list[queue.SimpleQueue[_Work | None]] = []
        self._records: list[ConsumerRecord] = []
        self._index = 0
        self._state: PartitionState | None = None
        self._end = 0
        self._chunks: collections.deque[tuple[PartitionState, list[ConsumerRecord], int, int | None]] = (
            collections.deque())
        self._handed: dict[int, tuple[PartitionState, int]] = {}
        self._run(self._consumer.start())

    @property
    def config(self) -> Any:
        return self._consumer.config

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # --- running on the loop -------------------------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        positions, refetch = self._settle()
        consumer = self._consumer

        async def run() -> _T:
            if positions or refetch:
                consumer._apply_positions(positions, refetch)
            return await coroutine

        if threading.current_thread() is self._runner.thread:
            coroutine.close()
            raise RuntimeError("a blocking consumer method was called from the client's own loop thread")
        future = asyncio.run_coroutine_threadsafe(run(), self._runner.loop)
        inbox: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        future.add_done_callback(lambda _: inbox.put(None))
        self._servicing.append(inbox)
        try:
            while True:
                work = inbox.get()
                if work is None:
                    break
                function, arguments, reply = work
                try:
                    reply.set_result(function(*arguments))
                except BaseException as exc:  # noqa: BLE001 - handed back to the loop
                    reply.set_exception(exc)
        finally:
            self._servicing.pop()
        return future.result(timeout)

    def _call(self, function: Callable[..., _T], *arguments: Any) -> _T:
        async def call() -> _T:
            return function(*arguments)

        return self._run(call())

    def _settle(self) -> tuple[list[tuple[PartitionState, int]], list[PartitionState]]:
        """What the iterator handed out (positions to set) and, for a call other than the iterator's own
        next poll, the partitions whose records it holds but did not hand out (to fetch again)."""
        positions = list(self._handed.values())
        self._handed.clear()
        return positions, []

    def _drop_held(self) -> list[PartitionState]:
        held: dict[int, PartitionState] = {}
        if self._state is not None and self._index < len(self._records):
            held[id(self._state)] = self._state
        for state, records, _, _ in self._chunks:
            if records:
                held[id(state)] = state
        self._chunks.clear()
        self._records = []
        self._index = 0
        return list(held.values())

    def _run_settled(self, coroutine: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        """Run a call that moves positions or reads records: the iterator's held records are dropped first."""
        held = self._drop_held()
        if held:
            positions = list(self._handed.values())
            self._handed.clear()
            consumer = self._consumer

            async def run() -> _T:
                consumer._apply_positions(positions, held)
                return await coroutine

            return self._run(run(), timeout)
        return self._run(coroutine, timeout)

    # --- the API -------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str | re.Pattern[str] | None = None, listener: Any = None, *,
                  pattern: str | re.Pattern[str] | None = None) -> None:
        wrapped = _ListenerOnCallerThread(listener, self) if listener is not None else None
        self._call(functools.partial(self._consumer.subscribe, topics, wrapped, pattern=pattern))

    def subscription(self) -> set[str]:
        return self._call(self._consumer.subscription)

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._drop_held()
        self._call(self._consumer.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._call(self._consumer.assignment)

    def unsubscribe(self) -> None:
        self._run_settled(self._consumer.unsubscribe())

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        self._run_settled(_returning(self._consumer.seek, partition, offset))

    def seek_to_beginning(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._run_settled(_returning(self._consumer.seek_to_beginning, *partitions))

    def seek_to_end(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._run_settled(_returning(self._consumer.seek_to_end, *partitions))

    def position(self, partition: TopicPartition | tuple[str, int], timeout_ms: float | None = None) -> int:
        return self._run(self._consumer.position(partition, timeout_ms))

    def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]] | TopicPartition,
                  timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._run(self._consumer.committed(partitions, timeout_ms))

    def offsets_for_times(self, timestamps: Mapping[Any, int], timeout_ms: float | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._consumer.offsets_for_times(timestamps, timeout_ms))

    def beginning_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                          timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        return self._run(self._consumer.beginning_offsets(list(partitions), timeout_ms))

    def end_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                    timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        return self._run(self._consumer.end_offsets(list(partitions), timeout_ms))

    def highwater(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        return self._call(self._consumer.highwater, partition)

    def pause(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._call(self._consumer.pause, *partitions)

    def resume(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._call(self._consumer.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return self._call(self._consumer.paused)

    def partitions_for(self, topic: str, timeout_ms: float | None = None) -> list[int]:
        return self._run(self._consumer.partitions_for(topic, timeout_ms))

    def list_topics(self) -> dict[str, int]:
        return self._run(self._consumer.list_topics())

    def poll(self, timeout_ms: float = 1000, max_records: int | None = None) -> ConsumerRecords:
        return self._run_settled(self._consumer.poll(timeout_ms, max_records))

    def commit(self, offsets: Mapping[Any, int | OffsetAndMetadata] | None = None,
               timeout_ms: float | None = None) -> None:
        self._run(self._consumer.commit(offsets, timeout_ms))

    def commit_async(self, offsets: Mapping[Any, int | OffsetAndMetadata] | None = None,
                     callback: Callable[[Any, BaseException | None], Any] | None = None
                     ) -> concurrent.futures.Future[None]:
        """Send a commit; returns a ``concurrent.futures.Future`` (the callback runs on the loop thread)."""
        async def start() -> asyncio.Future[None]:
            return self._consumer.commit_async(offsets, callback)

        task = self._run(start())
        result: concurrent.futures.Future[None] = concurrent.futures.Future()

        def copy(done: asyncio.Future[None]) -> None:
            if done.cancelled():
                result.cancel()
            elif (error := done.exception()) is not None:
                result.set_exception(error)
            else:
                result.set_result(None)

        self._runner.loop.call_soon_threadsafe(task.add_done_callback, copy)
        return result

    def group_metadata(self) -> Any:
        return self._call(self._consumer.group_metadata)

    def close(self, timeout: float | None = None) -> None:
        if self._consumer.closed:
            return
        self._run_settled(self._consumer.close(timeout))

    @property
    def closed(self) -> bool:
        return self._consumer.closed

    # --- iterating -----------------------------------------------------------------------------------

    def __iter__(self) -> Consumer:
        return self

    def __next__(self) -> ConsumerRecord:
        index = self._index
        records = self._records
        if index < len(records):
            record = records[index]
            self._index = index + 1
            state = self._state
            assert state is not None
            self._handed[id(state)] = (state, record[2] + 1 if index + 1 < len(records) else self._end)
            return record
        while True:
            while self._chunks:
                state, records, end, _ = self._chunks.popleft()
                if not records:
                    self._handed[id(state)] = (state, end)
                    continue
                self._state, self._records, self._end, self._index = state, records, end, 1
                self._handed[id(state)] = (state, records[0][2] + 1 if len(records) > 1 else end)
                return records[0]
            if self._consumer.closed:
                raise StopIteration
            try:
                chunks = self._run(self._consumer._poll_chunks(1000, self._consumer.config.max_poll_records))
            except ClientClosedError:
                raise StopIteration from None
            self._chunks.extend(chunks)


async def _returning(function: Callable[..., Any], *arguments: Any) -> Any:
    return function(*arguments)
