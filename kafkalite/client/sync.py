"""Blocking ``Producer`` and ``Admin`` for scripts, notebooks and tests: the asyncio core on one thread.

Every blocking client of a process shares one background thread running one event loop (started on
first use, a daemon thread, so it never keeps the interpreter alive). Each method hands its
coroutine to that loop and waits for the answer; nothing here re-implements the client.

``Producer.send()`` returns a ``concurrent.futures.Future`` at once. Sends are queued and handed to
the loop in bulk (one wake-up of the loop thread carries every send queued meanwhile), in order;
an error of the send itself (a wrong type, no buffer space within ``max.block.ms``) is set on that
future, like a delivery error. ``send_and_wait()`` returns the ``RecordMetadata`` or raises.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import threading
from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from kafkalite.client.admin import Admin as AsyncAdmin
from kafkalite.client.producer.accumulator import RecordFuture, RecordMetadata
from kafkalite.client.producer.producer import Headers
from kafkalite.client.producer.producer import Producer as AsyncProducer

__all__ = ["Admin", "Producer"]

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
