"""Faults under the bundled consumer: each recovers, or fails with an error that says what happened.

The coordinator "moves": a proxy in front of the broker answers group requests with NOT_COORDINATOR
(and FindCoordinator with COORDINATOR_NOT_AVAILABLE) for a while, as a cluster does when a group's
coordinator changes; the consumer looks the coordinator up again and goes on without losing or
repeating committed work. The broker restarts during a poll loop; partitions are added to a subscribed
topic; a subscribed topic is deleted (the group goes on with the rest; a manually assigned partition
of it fails with a clear error); a pattern subscription picks up a topic created later.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from kafkalite.client import KafkaError, NewTopic, TopicPartition
from kafkalite.client import sync as blocking
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_response, parse_response_header
from kafkalite.protocol.messages import RESPONSES
from kafkalite.testing.process import wait_for
from tests.tools.frame_proxy import FrameProxy

TIMEOUT_S = 40
GROUP_ARGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000",
              "group.consumer.heartbeat.interval.ms=300", "group.consumer.session.timeout.ms=6000")
FAST = {"fetch_max_wait_ms": 100, "metadata_max_age_ms": 500}
CLASSIC = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 200}
FIND_COORDINATOR, HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, SYNC_GROUP, CONSUMER_HEARTBEAT = (
    10, 12, 8, 9, 11, 14, 68)
_MOVED = {HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, SYNC_GROUP, CONSUMER_HEARTBEAT}


class CoordinatorMovingProxy(FrameProxy):
    """Forwards whole frames to the broker; while ``moves`` are left, answers group requests with
    NOT_COORDINATOR and FindCoordinator with COORDINATOR_NOT_AVAILABLE (rewriting the broker's answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.moves = 0
        self.rewritten: Counter[int] = Counter()
        self.find_coordinator = 0

    def move(self, responses: int) -> None:
        with self._lock:
            self.moves = responses

    def on_request(self, frame: bytes) -> tuple[int, int]:
        api_key, api_version = struct.unpack_from(">hh", frame, 4)
        if api_key == FIND_COORDINATOR:
            with self._lock:
                self.find_coordinator += 1
        return api_key, api_version

    def on_response(self, frame: bytes, note: Any) -> bytes | None:
        api_key, api_version = note
        if api_key in _MOVED or api_key == FIND_COORDINATOR:
            with self._lock:
                rewrite = self.moves > 0
                self.moves -= rewrite
            if rewrite:
                frame = _rewrite(frame, api_key, api_version)
                self.rewritten[api_key] += 1
        return frame


def _rewrite(frame: bytes, api_key: int, api_version: int) -> bytes:
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    response_type = RESPONSES[api_key]
    response = response_type.decode_from(parse_response_header(frame[4:], api_key, api_version), api_version)
    if api_key == FIND_COORDINATOR:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        for entry in getattr(response, "coordinators", None) or []:
            entry.error_code = code
        response.error_code = code
    elif api_key == OFFSET_COMMIT:
        for topic in response.topics:
            for partition in topic.partitions:
                partition.error_code = ErrorCode.NOT_COORDINATOR
    elif api_key == OFFSET_FETCH and api_version >= 8:
        for group in response.groups:
            group.error_code = ErrorCode.NOT_COORDINATOR
    else:
        response.error_code = ErrorCode.NOT_COORDINATOR
    return b"".join(bytes(buffer) for buffer in encode_response(response, api_key, api_version, correlation_id))


def create_topic(bootstrap: str, partitions: int = 2, name: str | None = None) -> str:
    name = name or f"cfault-{uuid.uuid4().hex[:10]}"
    with blocking.Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)])[name].raise_for_error()
    return name


def produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    with blocking.Producer(bootstrap_servers=bootstrap, linger_ms=2) as producer:
        for index in range(start, start + count):
            producer.send(topic, f"{topic}:{index}".encode(), partition=index % partitions)
        producer.flush()


class Reader(threading.Thread):
    """A bundled group consumer polling and committing in a thread; commit failures are counted, not fatal."""

    def __init__(self, bootstrap: str, topics: list[str] | None = None, pattern: str | None = None,
                 protocol: str = "classic", **config: Any) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topics, self.pattern = bootstrap, topics, pattern
        self.config = {**(CLASSIC if protocol == "classic" else {"group_protocol": "consumer"}), **config}
        self.values: list[bytes] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.assignment: set[TopicPartition] = set()

    def run(self) -> None:
        config = {"group_id": f"faults-{uuid.uuid4().hex[:6]}", "auto_offset_reset": "earliest",
                  "enable_auto_commit": False, **FAST, **self.config}
        with blocking.Consumer(bootstrap_servers=self.bootstrap, **config) as consumer:
            if self.pattern is not None:
                consumer.subscribe(pattern=self.pattern)
            else:
                consumer.subscribe(self.topics)
            while not self.stop.is_set():
                try:
                    records = consumer.poll(timeout_ms=100)
                    self.values.extend(record.value for record in records)
                    self.assignment = consumer.assignment()
                    if records:
                        consumer.commit()
                except KafkaError as exc:
                    self.errors.append(exc)

    def halt(self) -> None:
        self.stop.set()
        self.join(TIMEOUT_S)


def read(reader: Reader, expected: set[bytes]) -> None:
    wait_for(lambda: expected <= set(reader.values), TIMEOUT_S,
             f"{len(expected - set(reader.values))} of {len(expected)} records were not read")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_coordinator_moves_and_the_group_goes_on(fresh_broker: Any, protocol: str) -> None:
    proxy = CoordinatorMovingProxy()
    broker = fresh_broker(*GROUP_ARGS, "--advertised-listeners", f"PLAINTEXT://127.0.0.1:{proxy.port}")
    proxy.start(broker.address)
    try:
        bootstrap = f"127.0.0.1:{proxy.port}"
        topic = create_topic(bootstrap, 3)
        produce(bootstrap, topic, 0, 60, 3)
        reader = Reader(bootstrap, [topic], protocol=protocol)
        reader.start()
        read(reader, {f"{topic}:{index}".encode() for index in range(60)})
        lookups = proxy.find_coordinator
        proxy.move(12)
        produce(bootstrap, topic, 60, 60, 3)
        read(reader, {f"{topic}:{index}".encode() for index in range(120)})
        wait_for(lambda: proxy.moves == 0, TIMEOUT_S, "the group sent too few requests to the coordinator")
        produce(bootstrap, topic, 120, 30, 3)
        read(reader, {f"{topic}:{index}".encode() for index in range(150)})
        reader.halt()
        print(f"rewritten answers: {dict(proxy.rewritten)}; FindCoordinator {lookups} -> {proxy.find_coordinator}; "
              f"errors seen by poll/commit: {[type(error).__name__ for error in reader.errors]}")
        assert proxy.find_coordinator > lookups, "the consumer never looked the coordinator up again"
        counts = Counter(reader.values)
        assert [value for value, count in counts.items() if count > 1] == []
    finally:
        proxy.close()


def test_a_broker_restart_during_a_poll_loop(fresh_broker: Any) -> None:
    broker = fresh_broker(*GROUP_ARGS)
    topic = create_topic(broker.bootstrap, 2)
    produce(broker.bootstrap, topic, 0, 50, 2)
    reader = Reader(broker.bootstrap, [topic])
    reader.start()
    try:
        read(reader, {f"{topic}:{index}".encode() for index in range(50)})
        broker.restart()
        produce(broker.bootstrap, topic, 50, 50, 2)
        read(reader, {f"{topic}:{index}".encode() for index in range(100)})
    finally:
        reader.halt()
    repeated = sum(count - 1 for count in Counter(reader.values).values())
    print(f"broker restarted under the consumer: 100 records read, {repeated} read again, "
          f"{len(reader.errors)} errors seen: {sorted({type(error).__name__ for error in reader.errors})}")


def test_partitions_added_a_topic_deleted_and_a_pattern_matching_a_new_topic(fresh_broker: Any) -> None:
    broker = fresh_broker(*GROUP_ARGS)
    bootstrap = broker.bootstrap
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    growing = create_topic(bootstrap, 2, f"{prefix}-growing")
    doomed = create_topic(bootstrap, 2, f"{prefix}-doomed")
    produce(bootstrap, growing, 0, 20, 2)
    produce(bootstrap, doomed, 0, 20, 2)
    # without auto-creation, or the next Metadata request would create the deleted topic again
    pattern_reader = Reader(bootstrap, pattern=f"{prefix}-.*", allow_auto_create_topics=False)
    listed_reader = Reader(bootstrap, [growing, doomed], allow_auto_create_topics=False)
    for reader in (pattern_reader, listed_reader):
        reader.start()
    try:
        first = {f"{topic}:{index}".encode() for topic in (growing, doomed) for index in range(20)}
        read(pattern_reader, first)
        read(listed_reader, first)
        # partitions added: picked up after a metadata refresh and a rebalance
        with blocking.Admin(bootstrap_servers=bootstrap) as admin:
            admin.create_partitions({growing: 4})[growing].raise_for_error()
        wait_for(lambda: len([tp for tp in listed_reader.assignment if tp.topic == growing]) == 4, TIMEOUT_S,
                 "the new partitions were never assigned")
        produce(bootstrap, growing, 20, 40, 4)
        later = {f"{growing}:{index}".encode() for index in range(20, 60)}
        read(listed_reader, later)
        read(pattern_reader, later)
        # a pattern subscription picks up a topic created later
        newcomer = create_topic(bootstrap, 1, f"{prefix}-newcomer")
        produce(bootstrap, newcomer, 0, 10, 1)
        read(pattern_reader, {f"{newcomer}:{index}".encode() for index in range(10)})
        # a subscribed topic is deleted: the group goes on with the others
        with blocking.Admin(bootstrap_servers=bootstrap) as admin:
            admin.delete_topics([doomed])[doomed].raise_for_error()
        wait_for(lambda: not any(tp.topic == doomed for tp in listed_reader.assignment), TIMEOUT_S,
                 "the deleted topic stayed assigned")
        produce(bootstrap, growing, 60, 20, 4)
        read(listed_reader, {f"{growing}:{index}".encode() for index in range(60, 80)})
        read(pattern_reader, {f"{growing}:{index}".encode() for index in range(60, 80)})
    finally:
        for reader in (pattern_reader, listed_reader):
            reader.halt()
    for reader in (pattern_reader, listed_reader):
        assert [value for value, count in Counter(reader.values).items() if count > 1] == []
    print("errors seen while topics changed:", [repr(error) for error in listed_reader.errors + pattern_reader.errors])


def test_an_assigned_partition_of_a_deleted_topic_fails_clearly(fresh_broker: Any) -> None:
    broker = fresh_broker(*GROUP_ARGS)
    topic = create_topic(broker.bootstrap, 1)
    produce(broker.bootstrap, topic, 0, 5, 1)
    with blocking.Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                           allow_auto_create_topics=False, **FAST) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        wait_for(lambda: got.extend(consumer.poll(timeout_ms=100)) or len(got) == 5, TIMEOUT_S, "nothing read")
        with blocking.Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.delete_topics([topic])[topic].raise_for_error()
        deadline = time.monotonic() + TIMEOUT_S
        with pytest.raises(KafkaError, match="does not exist") as caught:
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=100)
        assert caught.value.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert consumer.poll(timeout_ms=200).count() == 0  # reported once; the partition is no longer fetched
