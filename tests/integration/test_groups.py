"""Consumer groups against a real broker with real clients (kafka-python and confluent-kafka) over real sockets:
a mixed group rebalancing through every generation, eviction of a killed member after its session timeout,
committed offsets resuming across a restart of consumers and broker, static membership, cooperative-sticky.

Each consumer runs on its own thread and polls until stopped; the broker's view of each generation comes
from DescribeGroups (kafka-python's admin decodes the assignments)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]
TIMEOUT_S = 30.0
PARTITIONS = 6
SESSION_MS = 6000
GROUP_ARGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Member(threading.Thread):
    """One consumer of a group, polling on its own thread; records what it is assigned and consumes."""

    def __init__(self, bootstrap: str, topic: str, group: str, **config: Any) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.group, self.config = bootstrap, topic, group, config
        self.assigned: set[int] = set()
        self.revoked_log: list[set[int]] = []
        self.assigned_log: list[set[int]] = []
        self.records: list[tuple[int, int]] = []  # (partition, offset)
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def consume(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stopping.set()
        self.join(TIMEOUT_S)
        assert not self.is_alive(), f"{self} did not stop"
        if self.error is not None:
            raise self.error


class KafkaPythonMember(Member):
    kind = "kafka-python"

    def consume(self) -> None:
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.revoked_log.append({tp.partition for tp in revoked})
                member.assigned = member.assigned - {tp.partition for tp in revoked}

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.assigned_log.append({tp.partition for tp in assigned})
                member.assigned = member.assigned | {tp.partition for tp in assigned}

        config = {"heartbeat_interval_ms": 300, "session_timeout_ms": SESSION_MS, "auto_offset_reset": "earliest",
                  "enable_auto_commit": False, **self.config}
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, **config)
        # Know the topic before joining: a leader without its metadata assigns nothing and rejoins at once,
        # and kafka-python's heartbeat loop can miss being re-enabled after such a quick second rebalance.
        consumer.partitions_for_topic(self.topic)
        consumer.subscribe([self.topic], listener=Listener())
        self.ready.set()
        try:
            while not self.stopping.is_set():
                # A long poll timeout: kafka-python 3.0.12 can lose a SyncGroup answer that arrives just as
                # poll() times out, and then neither heartbeats nor rejoins (a client bug, seen in CI).
                batches = consumer.poll(timeout_ms=2000)
                for records in batches.values():
                    self.records.extend((record.partition, record.offset) for record in records)
                self.assigned = {tp.partition for tp in consumer.assignment()}
        finally:
            consumer.close()


class ConfluentMember(Member):
    kind = "confluent-kafka"

    def consume(self) -> None:
        def on_assign(consumer: Consumer, partitions: Any) -> None:
            self.assigned_log.append({tp.partition for tp in partitions})

        def on_revoke(consumer: Consumer, partitions: Any) -> None:
            self.revoked_log.append({tp.partition for tp in partitions})

        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "heartbeat.interval.ms": 300,
                  "session.timeout.ms": SESSION_MS, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  **self.config}
        consumer = Consumer(config)
        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        self.ready.set()
        try:
            while not self.stopping.is_set():
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    self.records.append((message.partition(), message.offset()))
                self.assigned = {tp.partition for tp in consumer.assignment()}
        finally:
            consumer.close()


@pytest.fixture
def admin_for() -> Iterator[Callable[[BrokerProcess], KafkaAdminClient]]:
    made: list[KafkaAdminClient] = []

    def make(process: BrokerProcess) -> KafkaAdminClient:
        admin = KafkaAdminClient(bootstrap_servers=process.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
        made.append(admin)
        return admin

    yield make
    for admin in made:
        admin.close()


def broker_view(admin: KafkaAdminClient, group: str) -> tuple[str, dict[str, set[int]]]:
    """The group's state and, when Stable, each member's assigned partitions as the broker holds them."""
    described = admin.describe_groups([group])[group]
    assignments = {}
    for member in described["members"]:
        assignment = member["member_assignment"] or {}
        assignments[member["member_id"]] = {p for item in assignment.get("assigned_partitions", [])
                                            for p in item["partitions"]}
    return described["group_state"], assignments


def wait_for_generation(admin: KafkaAdminClient, group: str, members: list[Member], wait_until: WaitUntil) -> dict[
        str, set[int]]:
    """Wait until the broker holds a Stable generation of exactly these members and each client runs its
    assignment; check that every partition has exactly one owner and none is idle beside a member with two."""
    def settled() -> dict[str, set[int]] | None:
        state, assignments = broker_view(admin, group)
        if state != "Stable" or len(assignments) != len(members):
            return None
        if not any(assignments.values()):
            return None  # a leader that did not know the topic yet assigns nothing, then rejoins at once
        if sorted(map(sorted, assignments.values())) != sorted(sorted(member.assigned) for member in members):
            return None
        return assignments

    assignments: dict[str, set[int]] = wait_until(settled, TIMEOUT_S, f"group {group} did not settle with "
                                                  f"{len(members)} members")  # type: ignore[assignment]
    owned = [p for partitions in assignments.values() for p in partitions]
    assert sorted(owned) == list(range(PARTITIONS)), f"each partition must have exactly one owner: {assignments}"
    counts = [len(partitions) for partitions in assignments.values()]
    assert not (min(counts) == 0 and max(counts) >= 2), f"an idle member beside one with two or more: {assignments}"
    return assignments


def create_topic(process: BrokerProcess, admin: KafkaAdminClient, partitions: int = PARTITIONS) -> str:
    topic = unique("groups")
    admin.create_topics([NewTopic(topic, partitions, 1)])
    return topic


def test_mixed_clients_share_a_group_through_every_generation(fresh_broker: Callable[..., BrokerProcess],
                                                              admin_for: Callable[..., KafkaAdminClient],
                                                              wait_until: WaitUntil) -> None:
    process = fresh_broker(*GROUP_ARGS)
    admin = admin_for(process)
    topic, group = create_topic(process, admin), unique("mixed")
    producer = KafkaProducer(bootstrap_servers=process.bootstrap, enable_idempotence=False)
    for index in range(60):
        producer.send(topic, value=b"%d" % index, partition=index % PARTITIONS)
    producer.flush()
    producer.close()
    members: list[Member] = []
    kinds = [KafkaPythonMember, ConfluentMember] * 3
    try:
        for kind in kinds:  # one generation per arrival
            member = kind(process.bootstrap, topic, group)
            member.start()
            members.append(member)
            wait_for_generation(admin, group, members, wait_until)
        assert {member.kind for member in members} == {"kafka-python", "confluent-kafka"}
        expected = {(partition, offset) for partition in range(PARTITIONS) for offset in range(10)}
        wait_until(lambda: {record for member in members for record in member.records} >= expected, TIMEOUT_S,
                   "not every record was consumed")
        while len(members) > 1:  # one generation per departure (LeaveGroup)
            members.pop(0).stop()
            wait_for_generation(admin, group, members, wait_until)
    finally:
        for member in members:
            member.stop()


KILLED_MEMBER = f"""
import sys
from kafka import KafkaConsumer
consumer = KafkaConsumer(sys.argv[3], bootstrap_servers=sys.argv[1], group_id=sys.argv[2],
                         session_timeout_ms={SESSION_MS}, heartbeat_interval_ms=300)
while True:
    consumer.poll(timeout_ms=1000)
"""


def test_killed_member_is_evicted_after_its_session_timeout(fresh_broker: Callable[..., BrokerProcess],
                                                            admin_for: Callable[..., KafkaAdminClient],
                                                            wait_until: WaitUntil) -> None:
    process = fresh_broker(*GROUP_ARGS)
    admin = admin_for(process)
    topic, group = create_topic(process, admin), unique("evict")
    survivor = ConfluentMember(process.bootstrap, topic, group)
    survivor.start()
    victim = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, process.bootstrap, group, topic])
    try:
        def two_members() -> dict[str, set[int]] | None:
            state, assignments = broker_view(admin, group)
            ok = state == "Stable" and len(assignments) == 2 and len(survivor.assigned) == 3
            return assignments if ok else None

        before = wait_until(two_members, TIMEOUT_S, "the two members did not share the topic")
        os.kill(victim.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout can tell
        victim.wait(TIMEOUT_S)
        killed_at = time.monotonic()
        wait_until(lambda: len(survivor.assigned) == PARTITIONS, TIMEOUT_S, "the victim's partitions did not move")
        moved_after = time.monotonic() - killed_at
        assert moved_after >= SESSION_MS / 1000 * 0.7, f"moved after {moved_after:.1f} s, before the session timeout"
        state, assignments = broker_view(admin, group)
        assert state == "Stable" and list(assignments.values()) == [set(range(PARTITIONS))]
        assert before  # the victim had owned three partitions
    finally:
        if victim.poll() is None:
            victim.kill()
        survivor.stop()


def test_committed_offsets_resume_after_consumers_and_broker_restart(fresh_broker: Callable[..., BrokerProcess],
                                                                     admin_for: Callable[..., KafkaAdminClient],
                                                                     wait_until: WaitUntil) -> None:
    process = fresh_broker(*GROUP_ARGS)
    admin = admin_for(process)
    topic, group = create_topic(process, admin, partitions=2), unique("resume")
    producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 0})
    for index in range(40):
        producer.produce(topic, value=b"%d" % index, partition=index % 2)
    producer.flush(TIMEOUT_S)
    # kafka-python consumes 10 records of each partition and commits; then everything stops.
    first = KafkaConsumer(bootstrap_servers=process.bootstrap, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False, heartbeat_interval_ms=300)
    first.subscribe([topic])
    seen: dict[int, list[int]] = {0: [], 1: []}
    deadline = time.monotonic() + TIMEOUT_S
    while min(len(offsets) for offsets in seen.values()) < 10 and time.monotonic() < deadline:
        for partition, records in first.poll(timeout_ms=2000, max_records=5).items():
            seen[partition.partition].extend(record.offset for record in records)
    from kafka.structs import OffsetAndMetadata as KafkaOffset
    from kafka.structs import TopicPartition
    first.commit({TopicPartition(topic, p): KafkaOffset(10, "checkpoint", -1) for p in (0, 1)})
    first.close()
    process.restart(kill=True)  # SIGKILL: the commits must already be in __consumer_offsets
    # confluent-kafka resumes exactly there after the broker restart.
    second = Consumer({"bootstrap.servers": process.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    second.subscribe([topic])
    firsts: dict[int, int] = {}
    deadline = time.monotonic() + TIMEOUT_S
    while len(firsts) < 2 and time.monotonic() < deadline:
        message = second.poll(0.2)
        if message is not None and message.error() is None:
            firsts.setdefault(message.partition(), message.offset())
    committed = second.committed([second.assignment()[0]] if second.assignment() else [], TIMEOUT_S)
    second.close()
    assert firsts == {0: 10, 1: 10}
    assert committed and committed[0].offset == 10 and committed[0].metadata == "checkpoint"


def test_static_member_restart_gets_its_partitions_back_without_rebalance(fresh_broker: Callable[..., BrokerProcess],
                                                                          admin_for: Callable[..., KafkaAdminClient],
                                                                          wait_until: WaitUntil) -> None:
    process = fresh_broker(*GROUP_ARGS)
    admin = admin_for(process)
    topic, group = create_topic(process, admin), unique("static")
    steady = ConfluentMember(process.bootstrap, topic, group, **{"group.instance.id": "steady"})
    restarting = ConfluentMember(process.bootstrap, topic, group, **{"group.instance.id": "restarting"})
    members = [steady, restarting]
    for member in members:
        member.start()
    try:
        wait_for_generation(admin, group, members, wait_until)
        before = set(restarting.assigned)
        steady_callbacks = (len(steady.assigned_log), len(steady.revoked_log))
        restarting.stop()  # a static member sends no LeaveGroup when it closes
        state, assignments = broker_view(admin, group)
        assert state == "Stable" and len(assignments) == 2  # still a member until its session times out
        restarted = ConfluentMember(process.bootstrap, topic, group, **{"group.instance.id": "restarting"})
        restarted.start()
        members[1] = restarted
        wait_until(lambda: restarted.assigned == before, TIMEOUT_S, "the restarted member did not get its partitions")
        time.sleep(SESSION_MS / 1000 + 1)  # past the old session: nothing may move
        assert restarted.assigned == before and steady.assigned == set(range(PARTITIONS)) - before
        assert (len(steady.assigned_log), len(steady.revoked_log)) == steady_callbacks  # it saw no rebalance
        state, assignments = broker_view(admin, group)
        assert state == "Stable" and len(assignments) == 2
    finally:
        for member in members:
            member.stop()


def test_cooperative_sticky_keeps_unaffected_partitions(fresh_broker: Callable[..., BrokerProcess],
                                                        admin_for: Callable[..., KafkaAdminClient],
                                                        wait_until: WaitUntil) -> None:
    process = fresh_broker(*GROUP_ARGS)
    admin = admin_for(process)
    topic, group = create_topic(process, admin), unique("cooperative")
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    members: list[Member] = [ConfluentMember(process.bootstrap, topic, group, **config) for _ in range(2)]
    try:
        for member in members:
            member.start()
        wait_for_generation(admin, group, members, wait_until)
        held = [set(member.assigned) for member in members]
        revocations = [len(member.revoked_log) for member in members]
        newcomer = ConfluentMember(process.bootstrap, topic, group, **config)
        newcomer.start()
        members.append(newcomer)
        wait_for_generation(admin, group, members, wait_until)
        for member, before, count in zip(members[:2], held, revocations, strict=False):
            revoked = set().union(*member.revoked_log[count:])
            kept = before - revoked
            assert member.assigned == kept, "an incremental rebalance only takes partitions away from old members"
            assert len(kept) == 2 and revoked <= newcomer.assigned
            assert all(len(item) < len(before) for item in member.revoked_log[count:]), "eager revocation of all"
    finally:
        for member in members:
            member.stop()
