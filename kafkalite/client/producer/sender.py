"""The sender: one task that moves ready batches from the accumulator to the brokers.

Each round it asks the accumulator which partition leaders have a batch ready, and for every leader
with an open connection that has room (fewer than ``max.in.flight.requests.per.connection`` requests
in flight) it drains one Produce request of up to ``max.request.size`` bytes and writes it. The answer
is handled in a callback, partition by partition:

* success (or DUPLICATE_SEQUENCE_NUMBER, a retry of a batch already written): the batch completes;
* a retriable error (stale metadata, a lost connection, a timeout, NOT_ENOUGH_REPLICAS...) while
  ``retries`` and ``delivery.timeout.ms`` allow: the batch goes back to the front of its queue to be
  retried after ``retry.backoff.ms`` (exponential), and metadata is refreshed when it is stale;
* anything else: the batch fails with the error, naming its topic-partition.

Between rounds the task sleeps until the accumulator's next deadline (``linger.ms``, a back-off) or
until it is woken: a batch filled up, a response arrived, a flush or a close began. Producer id,
epoch bumps and transactional partitions (see :mod:`~kafkalite.client.producer.transactions`) are
taken care of here too, before batches that need them are drained.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafkalite.client.config import ProducerConfig
from kafkalite.client.errors import KafkaTimeoutError, error_for
from kafkalite.client.metadata import is_stale_metadata_error
from kafkalite.client.network import NetworkClient, monotonic_ms
from kafkalite.client.producer.accumulator import ProducerBatch, RecordAccumulator
from kafkalite.client.producer.transactions import TransactionManager
from kafkalite.protocol.compression import Compression
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.messages import ProduceRequest, ProduceResponse
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData

__all__ = ["Sender"]

log = logging.getLogger("kafkalite.client")

_SEQUENCE_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})
_COMPRESSION = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
                "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


class Sender:
    """Drains the accumulator into Produce requests (see the module docstring)."""

    def __init__(self, client: NetworkClient, accumulator: RecordAccumulator, transactions: TransactionManager,
                 config: ProducerConfig) -> None:
        self.client = client
        self.accumulator = accumulator
        self.transactions = transactions
        self.config = config
        self.acks = config.acks
        self.compression = _COMPRESSION[config.compression_type]
        self.compression_level = {
            Compression.GZIP: config.compression_gzip_level, Compression.LZ4: config.compression_lz4_level,
            Compression.ZSTD: config.compression_zstd_level}.get(self.compression)
        self.in_flight_requests = 0
        self.running = True
        self.force_close = False
        self.fatal_error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._idle: asyncio.Future[None] | None = None
        self._can_send = transactions.can_send if (transactions.idempotent or transactions.is_transactional) else None

    # --- waking ------------------------------------------------------------------------------------

    def wakeup(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def _sleep(self, delay_ms: float) -> None:
        if delay_ms <= 0:
            await asyncio.sleep(0)
            return
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(min(delay_ms, 60000) / 1000, self._wake_waiter, waiter)
        try:
            await waiter
        finally:
            timer.cancel()

    @staticmethod
    def _wake_waiter(waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_result(None)

    async def wait_idle(self) -> None:
        """Wait until no Produce request is in flight."""
        while self.in_flight_requests:
            if self._idle is None or self._idle.done():
                self._idle = self._loop.create_future()
            await self._idle

    # --- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while self.running or (not self.force_close and (self.accumulator.incomplete or self.in_flight_requests)):
                await self._round()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # pragma: no cover - a bug: fail everything rather than hang
            log.exception("the producer's sender stopped")
            self.fatal_error = exc
            self.accumulator.abort_all(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"the sender stopped: {exc}"))
        finally:
            if self.force_close:
                self.accumulator.abort_all(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                      "the producer was closed before the record was sent"))

    async def _round(self) -> None:
        transactions = self.transactions
        accumulator = self.accumulator
        now = monotonic_ms()
        if transactions.idempotent:
            if not transactions.has_producer_id and not transactions.is_transactional:
                if accumulator.incomplete:
                    await self._init_producer_id(bump=False)
                    return
            elif transactions.epoch_bump_needed and not transactions.is_transactional:
                if self.in_flight_requests == 0:
                    await self._init_producer_id(bump=True)
                    transactions.reset_sequences(list(accumulator))
                    return
            if transactions.is_transactional:
                if transactions.pending_partitions and not transactions.adding_partitions:
                    task = self._loop.create_task(transactions.add_pending_partitions())
                    task.add_done_callback(self._partitions_added)
        for batch in accumulator.expired(now):
            self._fail(batch, KafkaTimeoutError(
                f"{batch.topic_partition}: {batch.records_count} record(s) expired after delivery.timeout.ms "
                f"({self.config.delivery_timeout_ms} ms) without being delivered"), expired=True)
        ready_nodes, next_check, unknown_leader = accumulator.ready(self.client.metadata, now, self._can_send)
        if unknown_leader:
            self.client.request_metadata_update()
            next_check = min(next_check, self.config.retry_backoff_ms)
        max_in_flight = self.config.max_in_flight_requests_per_connection
        for node_id in ready_nodes:
            connection = self.client.ready_connection(node_id)
            if connection is None:
                next_check = min(next_check, max(self.client.connect_delay_ms(node_id), 10))
                continue
            if connection.in_flight_count >= max_in_flight:
                continue  # a response wakes us
            batches = accumulator.drain(self.client.metadata, node_id, self.config.max_request_size, now,
                                        self._can_send)
            if batches:
                self._send(connection, batches)
        if not self.running and self.force_close:
            return
        await self._sleep(next_check if next_check != float("inf") else 60000)

    async def _init_producer_id(self, bump: bool) -> None:
        try:
            await self.transactions.init_producer_id(bump=bump)
        except KafkaError as exc:
            if exc.retriable:
                await self._sleep(self.config.retry_backoff_ms)
                return
            log.error("the producer cannot get a producer id: %s", exc)
            self.accumulator.abort_all(exc)

    def _partitions_added(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.debug("AddPartitionsToTxn failed: %s", task.exception())
        failed = self.transactions.take_failed_partitions()
        if failed:
            error = self.transactions.last_error or KafkaError(ErrorCode.TRANSACTION_ABORTABLE)
            for topic_partition in failed:
                queue = self.accumulator.batches.get(topic_partition)
                while queue:
                    self._fail(queue.popleft(), error)
        self.wakeup()

    # --- sending -----------------------------------------------------------------------------------

    def _send(self, connection: Any, batches: list[ProducerBatch]) -> None:
        transactions = self.transactions
        idempotent = transactions.idempotent
        transactional = transactions.is_transactional
        topics: dict[str, list[PartitionProduceData]] = {}
        for batch in batches:
            if idempotent:
                sequence = batch.base_sequence
                if sequence == -1:
                    sequence = transactions.assign_sequence(batch)
                records = batch.build(self.compression, self.compression_level, transactions.producer_id,
                                      transactions.producer_epoch, sequence, transactional)
            else:
                records = batch.build(self.compression, self.compression_level, -1, -1, -1, False)
            batch.attempts += 1
            batch.sent_once = True
            topic_partition = batch.topic_partition
            partitions = topics.get(topic_partition.topic)
            if partitions is None:
                partitions = topics[topic_partition.topic] = []
            partitions.append(PartitionProduceData(topic_partition.partition, records))
        request = ProduceRequest(transactional_id=transactions.transactional_id, acks=self.acks,
                                 timeout_ms=self.config.request_timeout_ms,
                                 topic_data=[TopicProduceData(name, data) for name, data in topics.items()])
        try:
            version = connection.version_for(ProduceRequest, min_version=3)
        except KafkaError as exc:
            for batch in batches:
                self._fail(batch, exc)
            return
        expect_response = self.acks != 0
        future = connection.send(request, version, expect_response=expect_response)
        self.in_flight_requests += 1
        future.add_done_callback(lambda done: self._handle_response(done, batches, expect_response))

    def _handle_response(self, future: asyncio.Future[Any], batches: list[ProducerBatch],
                         expect_response: bool) -> None:
        self.in_flight_requests -= 1
        if self.in_flight_requests == 0 and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)
        now = monotonic_ms()
        try:
            try:
                response = future.result()
            except (KafkaError, ProtocolError, OSError) as exc:
                error = exc if isinstance(exc, KafkaError) else KafkaError(ErrorCode.NETWORK_EXCEPTION, str(exc))
                for batch in batches:
                    self._failed_attempt(batch, ErrorCode.NETWORK_EXCEPTION, error, now)
                self.client.request_metadata_update()
                return
            if not expect_response:
                for batch in batches:
                    self._complete(batch, -1, -1)
                return
            self._handle_produce_response(response, batches, now)
        finally:
            self.wakeup()

    def _handle_produce_response(self, response: ProduceResponse, batches: list[ProducerBatch], now: float) -> None:
        results: dict[tuple[str, int], Any] = {}
        for topic in response.responses:
            for partition in topic.partition_responses:
                results[(topic.name, partition.index)] = partition
        for batch in batches:
            topic_partition = batch.topic_partition
            result = results.get((topic_partition.topic, topic_partition.partition))
            if result is None:
                self._failed_attempt(batch, ErrorCode.UNKNOWN_SERVER_ERROR, KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"{topic_partition}: the broker's answer left this partition out"),
                    now)
                continue
            code = ErrorCode.from_code(result.error_code)
            if code is ErrorCode.NONE or code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._complete(batch, result.base_offset, result.log_append_time_ms)
                continue
            message = result.error_message
            if result.record_errors:
                details = "; ".join(f"record {item.batch_index}: {item.batch_index_error_message}"
                                    for item in result.record_errors)
                message = f"{message or code.message} ({details})"
            self._failed_attempt(batch, code, error_for(code, message, context=str(topic_partition)), now)

    def _failed_attempt(self, batch: ProducerBatch, code: ErrorCode, error: KafkaError, now: float) -> None:
        """An attempt failed: retry if allowed, else fail the batch."""
        transactions = self.transactions
        if is_stale_metadata_error(code) or code is ErrorCode.NETWORK_EXCEPTION:
            self.client.request_metadata_update()
        retriable = code.retriable or code is ErrorCode.NETWORK_EXCEPTION or isinstance(error, KafkaTimeoutError)
        if transactions.idempotent and code in _SEQUENCE_ERRORS:
            if batch.producer_epoch != transactions.producer_epoch:
                retriable = True  # sent before an epoch bump: resend with the new one
            elif not transactions.is_next_expected(batch):
                retriable = True  # a gap behind an earlier failed batch: that one is retried first
            elif transactions.is_transactional:
                retriable = False
            else:
                transactions.request_epoch_bump(f"{code.name} on {batch.topic_partition}")
                retriable = True
        elif code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED) and (
                not transactions.is_transactional):
            if batch.producer_epoch == transactions.producer_epoch:
                transactions.request_epoch_bump(code.name)
            retriable = transactions.idempotent
        within_time = now - batch.created_ms < self.config.delivery_timeout_ms
        if retriable and within_time and batch.attempts <= self.config.retries and not self.force_close:
            log.debug("%s: retrying after %s (attempt %d)", batch.topic_partition, code.name, batch.attempts)
            self.accumulator.reenqueue(batch, now)
            return
        if retriable and not within_time:
            error = KafkaTimeoutError(f"{batch.topic_partition}: not delivered within delivery.timeout.ms "
                                      f"({self.config.delivery_timeout_ms} ms); last error {code.name}: {error}")
        self._fail(batch, error, code=code)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self.transactions.batch_done(batch, True)
        self.accumulator.deallocate(batch)
        batch.complete(base_offset, log_append_time)

    def _fail(self, batch: ProducerBatch, error: BaseException, code: ErrorCode | None = None,
              expired: bool = False) -> None:
        transactions = self.transactions
        transactions.batch_done(batch, False)
        self.accumulator.deallocate(batch)
        batch.fail(error)
        if transactions.is_transactional:
            kafka_error = error if isinstance(error, KafkaError) else KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                                                  str(error))
            transactions.fail_from_produce(code or kafka_error.error_code, kafka_error)
        elif transactions.idempotent and batch.sent_once and batch.base_sequence != -1:
            # The broker may or may not hold this batch's sequence: start a new epoch.
            transactions.request_epoch_bump(f"a batch of {batch.topic_partition} failed after it was sent")
