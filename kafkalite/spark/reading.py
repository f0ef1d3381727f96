"""Talking to the cluster for the source: which partitions a subscription has, where offsets are, and
reading one offset range into Arrow batches. Spark-free (it runs in Spark's Python workers, but any
code can call it), on the bundled blocking client.

Driver side, :class:`OffsetLookup` answers with an admin client: the partitions of ``subscribe`` /
``subscribePattern`` / ``assign`` now, and the offsets of a :class:`~.options.StartingPoint`
(ListOffsets: earliest, latest, by timestamp). "Latest" is the high watermark, or with
``kafka.isolation.level=read_committed`` the last stable offset, so a range never waits for a
transaction to finish.

Executor side, :func:`read_range` assigns one consumer to one partition, seeks to the range's start
and polls until its position reaches the range's end, yielding one Arrow batch per poll (records at
or past the end are cut off). Transaction markers and aborted records have offsets too: the
position moves past them without records, which is why the loop follows the position and not the
last record's offset. An offset below the log start (retention removed it) is data loss: an error
with ``failOnDataLoss=true`` (the default), else the read goes on from the log start.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from kafkalite.client.admin_types import OffsetSpec
from kafkalite.client.errors import OffsetOutOfRangeError
from kafkalite.client.metadata import TopicPartition
from kafkalite.spark.arrow import arrow_schema, records_to_batch
from kafkalite.spark.offsets import OffsetRange
from kafkalite.spark.options import EARLIEST, LATEST, SourceOptions, StartingPoint

__all__ = ["DataLossError", "OffsetLookup", "read_range"]

_READ_BATCH_RECORDS = 20_000  # records per Arrow batch at most (one poll)
_FETCH_BYTES = 8 * 1024 * 1024  # one consumer reads one partition: let each Fetch bring more of it


class DataLossError(RuntimeError):
    """Offsets a query was to read are gone (``failOnDataLoss=false`` skips them instead)."""


class OffsetLookup:
    """Partitions and offsets, through one admin client (close it when done)."""

    def __init__(self, options: SourceOptions) -> None:
        from kafkalite.client.sync import Admin

        self.options = options
        self.admin = Admin({**options.admin, "client.id": options.admin.get("client.id", "kafkalite-spark")})

    def close(self) -> None:
        self.admin.close()

    def __enter__(self) -> OffsetLookup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def partitions(self) -> list[TopicPartition]:
        """The partitions the query reads now (a subscribed topic that does not exist has none)."""
        options = self.options
        if options.assign:
            return list(options.assign)
        topics = self.admin.list_topics()
        if options.subscribe:
            names = [name for name in options.subscribe if name in topics]
        else:
            pattern = re.compile(options.subscribe_pattern or "")
            names = sorted(name for name in topics if pattern.fullmatch(name))
        return [TopicPartition(name, index) for name in names for index in range(topics[name])]

    def offsets(self, partitions: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        """Each partition's offset for EARLIEST, LATEST (the last stable offset with read_committed) or a
        timestamp (the first offset at or after it; -1 where there is none)."""
        if not partitions:
            return {}
        found = self.admin.list_offsets({partition: spec for partition in partitions},
                                        isolation_level=1 if self.options.read_committed else 0)
        result = {}
        for partition in partitions:
            answer = found[partition]
            if answer.error is not None:
                raise answer.error
            result[partition] = answer.offset
        return result

    def resolve(self, point: StartingPoint, partitions: list[TopicPartition], *,
                what: str) -> dict[TopicPartition, int]:
        """``point`` as offsets of ``partitions`` (``what`` names the option in errors)."""
        if point.kind in ("earliest", "latest"):
            return self.offsets(partitions, OffsetSpec.EARLIEST if point.kind == "earliest" else OffsetSpec.LATEST)
        if point.kind == "timestamp":
            stamps = point.offset_map()
            wanted = {partition: point.timestamp if point.timestamp is not None else stamps.get(partition)
                      for partition in partitions}
            missing = sorted(str(partition) for partition, stamp in wanted.items() if stamp is None)
            if missing:
                raise ValueError(f"option {what!r} has no timestamp for {', '.join(missing)}")
            result = {}
            latest: dict[TopicPartition, int] | None = None
            for stamp in sorted({stamp for stamp in wanted.values() if stamp is not None}):
                group = [partition for partition, wanted_stamp in wanted.items() if wanted_stamp == stamp]
                for partition, offset in self.offsets(group, stamp).items():
                    if offset < 0:
                        if what.startswith("ending") or self.options.timestamp_strategy == "latest":
                            if latest is None:
                                latest = self.offsets(partitions, OffsetSpec.LATEST)
                            offset = latest[partition]
                        else:
                            raise ValueError(f"option {what!r}: {partition} has no record at or after timestamp "
                                             f"{stamp} (startingOffsetsByTimestampStrategy=latest reads from the "
                                             "end instead)")
                    result[partition] = offset
            return result
        given = point.offset_map()
        special = {partition: given.get(partition, point.default) for partition in partitions}
        result = {partition: offset for partition, offset in special.items() if offset >= 0}
        for spec in (EARLIEST, LATEST):
            group = [partition for partition, offset in special.items() if offset == spec]
            result.update(self.offsets(group, OffsetSpec(spec)))
        return result


def read_range(offset_range: OffsetRange, options: SourceOptions) -> Iterator[Any]:
    """The records of ``offset_range`` as Arrow batches of the source schema."""
    from kafkalite.client.sync import Consumer

    if offset_range.end <= offset_range.start:
        return
    schema = arrow_schema(options.include_headers)
    config: dict[str, Any] = {"client.id": "kafkalite-spark", "max.poll.records": _READ_BATCH_RECORDS,
                              "max.partition.fetch.bytes": _FETCH_BYTES, **options.consumer,
                              "enable.auto.commit": False, "auto.offset.reset": "none"}
    config.pop("group.id", None)  # accepted as Spark's connector accepts it; no group is joined or committed to
    topic_partition = offset_range.topic_partition
    end = offset_range.end
    consumer = Consumer(config)
    try:
        consumer.assign([topic_partition])
        consumer.seek(topic_partition, offset_range.start)
        position = offset_range.start
        last_progress = time.monotonic()
        while position < end:
            try:
                records = consumer.poll(timeout_ms=500).records(topic_partition)
            except OffsetOutOfRangeError:
                beginning = consumer.beginning_offsets([topic_partition])[topic_partition]
                if options.fail_on_data_loss:
                    raise DataLossError(
                        f"{topic_partition}: offsets {position} to {beginning} were removed before they were read "
                        "(failOnDataLoss=false skips them)") from None
                if beginning >= end:
                    return
                consumer.seek(topic_partition, max(beginning, position))
                continue
            if records:
                if records[-1].offset >= end:
                    records = [record for record in records if record.offset < end]
                if records:
                    yield records_to_batch(records, schema, options.include_headers)
                    position = records[-1].offset + 1
            if not records and position < end:  # markers and aborted records move the position alone
                position = max(position, consumer.position(topic_partition))
            now = time.monotonic()
            if records:
                last_progress = now
            elif (now - last_progress) * 1000 > options.poll_timeout_ms:
                raise TimeoutError(f"{topic_partition}: no record between offsets {position} and {end} within "
                                   f"kafkaConsumer.pollTimeoutMs ({options.poll_timeout_ms} ms)")
    finally:
        consumer.close()


def check_offsets(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                  options: SourceOptions) -> None:
    """A partition whose end moved below where the query stands lost data (a topic deleted and made anew)."""
    for partition, offset in start.items():
        now = latest.get(partition)
        if now is None or now < offset:
            if options.fail_on_data_loss:
                state = "is gone" if now is None else f"ends at {now}, before offset {offset}"
                raise DataLossError(f"{partition} {state} (failOnDataLoss=false goes on without it)")
