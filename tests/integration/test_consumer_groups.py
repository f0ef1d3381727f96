"""Classic consumer groups mixing the bundled consumer with confluent-kafka and kafka-python members.

Each member polls in its own thread, records every record it reads, and commits after each batch.
An :class:`Ownership` fed by every member's rebalance callbacks fails the test if a partition is ever
assigned to a member while another still owns it; the end state must give every partition to exactly
one member, and every record must be read exactly once across members leaving (after commits). A
member killed without leaving runs in a subprocess (SIGKILL); the group evicts it after its session
timeout and its partitions go on from its committed offsets. A static member restarts without a
rebalance.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import KafkaException as ConfluentKafkaException
from kafka import ConsumerRebalanceListener as KafkaPythonListener
from kafka import KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor as KafkaPythonCooperative
from kafka.coordinator.assignors.range import RangePartitionAssignor as KafkaPythonRange

from kafkalite.client import NewTopic, TopicPartition
from kafkalite.client import sync as blocking
from kafkalite.client.errors import CommitFailedError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.process import BrokerProcess, wait_for

TIMEOUT_S = 40
SESSION_MS = 3000
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = BrokerProcess(Path(tmp_path_factory.mktemp("groups")) / "data",
                            {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
                             "group.consumer.heartbeat.interval.ms": 300, "group.consumer.session.timeout.ms": 6000})
    with process:
        yield process.bootstrap_servers


def fresh_topic(bootstrap: str, partitions: int) -> str:
    name = f"group-{uuid.uuid4().hex[:10]}"
    with blocking.Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)])[name].raise_for_error()
    return name


def produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    with blocking.Producer(bootstrap_servers=bootstrap, linger_ms=2) as producer:
        for index in range(start, start + count):
            producer.send(topic, f"r{index}".encode(), partition=index % partitions)
        producer.flush()


class Ownership:
    """Who owns which partition, from every member's rebalance callbacks; records any double ownership."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[tuple[str, int], str] = {}
        self.violations: list[str] = []
        self.rebalances: Counter[str] = Counter()

    def assigned(self, member: str, partitions: list[tuple[str, int]]) -> None:
        with self.lock:
            self.rebalances[member] += 1
            for partition in partitions:
                other = self.owner.get(partition)
                if other is not None and other != member:
                    self.violations.append(f"{partition} assigned to {member} while {other} owns it")
                self.owner[partition] = member

    def released(self, member: str, partitions: list[tuple[str, int]]) -> None:
        with self.lock:
            self.rebalances[member] += 1
            for partition in partitions:
                if self.owner.get(partition) == member:
                    del self.owner[partition]

    def of(self, member: str) -> set[tuple[str, int]]:
        with self.lock:
            return {partition for partition, owner in self.owner.items() if owner == member}


class Member(threading.Thread):
    """One group member of some client, polling in its own thread until told to stop (then it leaves)."""

    def __init__(self, name: str, kind: str, bootstrap: str, group: str, topic: str, strategy: str,
                 ownership: Ownership, read: list[tuple[str, int, int, bytes]], protocol: str = "classic",
                 **config: Any) -> None:
        super().__init__(name=name, daemon=True)
        self.protocol = protocol
        self.kind, self.bootstrap, self.group, self.topic, self.strategy = kind, bootstrap, group, topic, strategy
        self.ownership, self.read, self.config = ownership, read, config
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.first_offsets: dict[int, int] = {}

    def run(self) -> None:
        try:
            getattr(self, f"_run_{self.kind.replace('-', '_')}")()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _record(self, partition: int, offset: int, value: bytes) -> None:
        self.first_offsets.setdefault(partition, offset)
        self.read.append((self.name, partition, offset, value))

    def _run_bundled(self) -> None:
        member = self

        class Listener:
            def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
                member.ownership.assigned(member.name, [(tp.topic, tp.partition) for tp in partitions])

            def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
                member.ownership.released(member.name, [(tp.topic, tp.partition) for tp in partitions])

        if self.protocol == "consumer":
            config = {"group_protocol": "consumer", "group_remote_assignor": self.strategy, **self.config}
        else:
            config = {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": 200,
                      "partition_assignment_strategy": self.strategy, **self.config}
        with blocking.Consumer(bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
                               auto_offset_reset="earliest", fetch_max_wait_ms=100, **config) as consumer:
            consumer.subscribe([self.topic], listener=Listener())
            self.ready.set()
            uncommitted = False
            while not self.stop.is_set():
                records = consumer.poll(timeout_ms=100)
                for record in records:
                    self._record(record.partition, record.offset, record.value)
                if records or uncommitted:
                    try:
                        consumer.commit()
                        uncommitted = False
                    except CommitFailedError as exc:
                        if exc.error_code is not ErrorCode.STALE_MEMBER_EPOCH:
                            raise
                        # a heartbeat bumped the epoch while the commit was on its way (Kafka refuses it,
                        # and the Java consumer reports it so); the partitions are still this member's:
                        # commit again after the next poll
                        uncommitted = True

    def _run_confluent(self) -> None:
        member = self
        group_config: dict[str, Any] = (
            {"group.protocol": "consumer", "group.remote.assignor": self.strategy} if self.protocol == "consumer"
            else {"partition.assignment.strategy": self.strategy, "session.timeout.ms": SESSION_MS,
                  "heartbeat.interval.ms": 200})
        consumer = ConfluentConsumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
            **group_config})

        def on_assign(_: Any, partitions: list[Any]) -> None:
            member.ownership.assigned(member.name, [(tp.topic, tp.partition) for tp in partitions])

        def on_revoke(_: Any, partitions: list[Any]) -> None:
            member.ownership.released(member.name, [(tp.topic, tp.partition) for tp in partitions])

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        self.ready.set()
        uncommitted = False
        try:
            while not self.stop.is_set():
                messages = consumer.consume(500, timeout=0.1)
                for message in messages:
                    if message.error() is None:
                        self._record(message.partition(), message.offset(), message.value())
                if messages or uncommitted:
                    try:
                        consumer.commit(asynchronous=False)
                        uncommitted = False
                    except ConfluentKafkaException as exc:
                        code = exc.args[0].code()
                        if code == ConfluentKafkaError._NO_OFFSET:  # nothing left to commit
                            uncommitted = False
                        elif code == ConfluentKafkaError.STALE_MEMBER_EPOCH:
                            uncommitted = True  # as for the bundled member above
                        else:
                            raise
        finally:
            consumer.close()

    def _run_kafka_python(self) -> None:
        member = self

        class Listener(KafkaPythonListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.ownership.released(member.name, [(tp.topic, tp.partition) for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.ownership.assigned(member.name, [(tp.topic, tp.partition) for tp in assigned])

        assignor = KafkaPythonCooperative if self.strategy == "cooperative-sticky" else KafkaPythonRange
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
                                 auto_offset_reset="earliest", partition_assignment_strategy=[assignor],
                                 session_timeout_ms=SESSION_MS, heartbeat_interval_ms=200, fetch_max_wait_ms=100,
                                 metadata_max_age_ms=1000)
        consumer.subscribe([self.topic], listener=Listener())
        self.ready.set()
        try:
            while not self.stop.is_set():
                batches = consumer.poll(timeout_ms=100)
                for records in batches.values():
                    for record in records:
                        self._record(record.partition, record.offset, record.value)
                if batches:
                    consumer.commit()
        finally:
            consumer.close()

    def leave(self) -> None:
        self.stop.set()
        self.join(TIMEOUT_S)
        assert not self.is_alive(), f"{self.name} did not stop"
        assert self.error is None, f"{self.name} failed: {self.error!r}"


def settled(ownership: Ownership, members: list[Member], partitions: set[tuple[str, int]]) -> Callable[[], bool]:
    def check() -> bool:
        for member in members:
            assert member.error is None, f"{member.name} failed: {member.error!r}"
        owned = [ownership.of(member.name) for member in members]
        return all(owned) and set().union(*owned) == partitions and sum(map(len, owned)) == len(partitions)

    return check


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_mixed_group_owns_every_partition_once_and_reads_every_record_once(bootstrap: str, strategy: str) -> None:
    partitions = 6
    topic = fresh_topic(bootstrap, partitions)
    group = f"mixed-{strategy}-{uuid.uuid4().hex[:6]}"
    every = {(topic, index) for index in range(partitions)}
    ownership = Ownership()
    read: list[tuple[str, int, int, bytes]] = []
    produce(bootstrap, topic, 0, 300, partitions)
    # Another client leads first (it joins first): the bundled members follow its assignments; once it
    # has left, a bundled member leads and assigns for the others.
    leader = "kafka-python" if strategy == "range" else "confluent"
    follower = "confluent" if leader == "kafka-python" else "kafka-python"
    members = [Member(name, kind, bootstrap, group, topic, strategy, ownership, read)
               for name, kind in [(leader, leader), ("bundled", "bundled"), (follower, follower),
                                  ("bundled-2", "bundled")]]
    try:
        members[0].start()
        wait_for(settled(ownership, members[:1], every), TIMEOUT_S, f"{leader} never got the partitions")
        for member in members[1:]:
            member.start()
        wait_for(settled(ownership, members, every), TIMEOUT_S, "the mixed group never settled with 4 members")
        wait_for(lambda: len(read) >= 300, TIMEOUT_S, "the group did not read the first records")
        produce(bootstrap, topic, 300, 300, partitions)
        members[0].leave()  # the leader leaves while records arrive
        members[2].leave()  # then the other foreign client
        remaining = [members[1], members[3]]
        wait_for(settled(ownership, remaining, every), TIMEOUT_S, "the group did not settle after members left")
        produce(bootstrap, topic, 600, 300, partitions)
        wait_for(lambda: len({value for *_, value in read}) >= 900, TIMEOUT_S,
                 f"only {len({value for *_, value in read})} of 900 records were read")
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(TIMEOUT_S)
    assert not ownership.violations, ownership.violations
    print("records read per member:", Counter(name for name, *_ in read), "rebalances:", dict(ownership.rebalances))
    values = Counter(value for *_, value in read)
    assert set(values) == {f"r{index}".encode() for index in range(900)}  # nothing skipped
    assert [value for value, count in values.items() if count > 1] == []  # nothing read twice
    readers = {name for name, *_ in read}
    assert {"bundled", "confluent", "kafka-python"} <= readers or len(readers) >= 3


_KILLED_MEMBER = """
import sys, time
sys.path.insert(0, {repo!r})
from kafkalite.client import sync
consumer = sync.Consumer(bootstrap_servers={bootstrap!r}, group_id={group!r}, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms={session}, heartbeat_interval_ms=200,
                         fetch_max_wait_ms=100, max_poll_records=7)
consumer.subscribe([{topic!r}])
while True:
    records = consumer.poll(timeout_ms=100)
    if records:
        consumer.commit()
        print("committed", flush=True)
        time.sleep(0.05)
"""


def test_a_killed_member_is_evicted_and_its_partitions_go_on_from_committed_offsets(bootstrap: str,
                                                                                     tmp_path: Path) -> None:
    partitions = 4
    topic = fresh_topic(bootstrap, partitions)
    group = f"killed-{uuid.uuid4().hex[:6]}"
    ownership = Ownership()
    read: list[tuple[str, int, int, bytes]] = []
    produce(bootstrap, topic, 0, 400, partitions)
    script = tmp_path / "member.py"
    script.write_text(_KILLED_MEMBER.format(repo=str(REPO), bootstrap=bootstrap, group=group, topic=topic,
                                            session=SESSION_MS))
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               cwd=REPO)
    survivors = [Member("bundled", "bundled", bootstrap, group, topic, "range", ownership, read),
                 Member("confluent", "confluent", bootstrap, group, topic, "range", ownership, read)]
    try:
        assert process.stdout is not None
        for _ in range(3):  # the killed member has committed some of its partitions' records
            assert process.stdout.readline().startswith(b"committed")
        for member in survivors:
            member.start()
        wait_for(lambda: all(ownership.of(member.name) for member in survivors), TIMEOUT_S,
                 "the survivors never joined")
        taken_by_survivors = {partition for member in survivors for partition in ownership.of(member.name)}
        os.kill(process.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout tells the coordinator
        process.wait(10)
        with blocking.Admin(bootstrap_servers=bootstrap) as admin:
            committed = {tp.partition: value.offset for tp, value in admin.list_consumer_group_offsets(group).items()}
        orphans = {index for index in range(partitions) if (topic, index) not in taken_by_survivors}
        assert orphans, "the killed member owned nothing when it was killed"
        started = time.monotonic()
        wait_for(settled(ownership, survivors, {(topic, index) for index in range(partitions)}), TIMEOUT_S,
                 "the survivors never took over the killed member's partitions")
        print(f"killed member evicted and its partitions reassigned after {time.monotonic() - started:.1f} s")
        wait_for(lambda: all(index in member.first_offsets for index in orphans
                             for member in survivors if (topic, index) in ownership.of(member.name)),
                 TIMEOUT_S, "the orphaned partitions were not read")
        for member in survivors:
            for index in orphans:
                if (topic, index) in ownership.of(member.name):
                    assert member.first_offsets[index] == committed.get(index, 0), (
                        f"partition {index} resumed at {member.first_offsets[index]}, committed {committed.get(index)}")
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
        for member in survivors:
            member.stop.set()
        for member in survivors:
            member.join(TIMEOUT_S)
    assert not ownership.violations, ownership.violations


def test_a_static_member_restarts_without_a_rebalance(bootstrap: str) -> None:
    partitions = 4
    topic = fresh_topic(bootstrap, partitions)
    group = f"static-{uuid.uuid4().hex[:6]}"
    every = {(topic, index) for index in range(partitions)}
    ownership = Ownership()
    read: list[tuple[str, int, int, bytes]] = []
    produce(bootstrap, topic, 0, 40, partitions)
    other = Member("confluent", "confluent", bootstrap, group, topic, "range", ownership, read)
    static = Member("static", "bundled", bootstrap, group, topic, "range", ownership, read,
                    group_instance_id="instance-a", session_timeout_ms=20000)
    other.start()
    static.start()
    try:
        wait_for(settled(ownership, [other, static], every), TIMEOUT_S, "the group never settled")
        before = dict(ownership.rebalances)
        mine = ownership.of("static")
        static.leave()  # a static member closes without LeaveGroup and keeps its partitions (no callbacks)
        assert ownership.of("static") == mine
        restarted = Member("static", "bundled", bootstrap, group, topic, "range", ownership, read,
                           group_instance_id="instance-a", session_timeout_ms=20000)
        restarted.start()
        wait_for(lambda: ownership.of("static") == mine, TIMEOUT_S, "the static member did not get its partitions back")
        produce(bootstrap, topic, 40, 40, partitions)
        wait_for(lambda: len(read) >= 80, TIMEOUT_S, "records after the restart were not read")
        assert ownership.rebalances["confluent"] == before["confluent"], "the other member saw a rebalance"
        restarted.leave()
    finally:
        other.stop.set()
        other.join(TIMEOUT_S)
    assert not ownership.violations, ownership.violations


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_kip848_group_with_a_confluent_member_hands_partitions_over_once(bootstrap: str, assignor: str) -> None:
    partitions = 6
    topic = fresh_topic(bootstrap, partitions)
    group = f"kip848-{assignor}-{uuid.uuid4().hex[:6]}"
    every = {(topic, index) for index in range(partitions)}
    ownership = Ownership()
    read: list[tuple[str, int, int, bytes]] = []
    produce(bootstrap, topic, 0, 300, partitions)
    members = [Member(name, kind, bootstrap, group, topic, assignor, ownership, read, protocol="consumer")
               for name, kind in [("bundled", "bundled"), ("confluent", "confluent"), ("bundled-2", "bundled")]]
    try:
        for member in members:
            member.start()
        wait_for(settled(ownership, members, every), TIMEOUT_S, "the KIP-848 group never settled with 3 members")
        wait_for(lambda: len(read) >= 300, TIMEOUT_S, "the group did not read the first records")
        produce(bootstrap, topic, 300, 300, partitions)
        members[0].leave()
        wait_for(settled(ownership, members[1:], every), TIMEOUT_S, "the group did not settle after a member left")
        produce(bootstrap, topic, 600, 150, partitions)
        wait_for(lambda: len({value for *_, value in read}) >= 750, TIMEOUT_S, "not every record was read")
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(TIMEOUT_S)
    assert not ownership.violations, ownership.violations
    values = Counter(value for *_, value in read)
    assert set(values) == {f"r{index}".encode() for index in range(750)}
    assert [value for value, count in values.items() if count > 1] == []


def test_kip848_static_member_leaves_with_epoch_minus_two_and_keeps_its_partitions(bootstrap: str) -> None:
    partitions = 4
    topic = fresh_topic(bootstrap, partitions)
    group = f"kip848-static-{uuid.uuid4().hex[:6]}"
    every = {(topic, index) for index in range(partitions)}
    ownership = Ownership()
    read: list[tuple[str, int, int, bytes]] = []
    other = Member("other", "bundled", bootstrap, group, topic, "uniform", ownership, read, protocol="consumer")
    static = Member("static", "bundled", bootstrap, group, topic, "uniform", ownership, read, protocol="consumer",
                    group_instance_id="kip848-a")
    other.start()
    static.start()
    try:
        wait_for(settled(ownership, [other, static], every), TIMEOUT_S, "the group never settled")
        before = ownership.rebalances["other"]
        mine = ownership.of("static")
        static.leave()
        restarted = Member("static", "bundled", bootstrap, group, topic, "uniform", ownership, read,
                           protocol="consumer", group_instance_id="kip848-a")
        restarted.start()
        wait_for(lambda: ownership.rebalances["static"] > 0 and ownership.of("static") == mine, TIMEOUT_S,
                 "the static member did not get its partitions back")
        assert ownership.rebalances["other"] == before, "the other member's assignment changed"
        restarted.leave()
    finally:
        other.stop.set()
        other.join(TIMEOUT_S)
    assert not ownership.violations, ownership.violations
