"""KIP-848 end to end: confluent-kafka consumers with ``group.protocol=consumer`` (ConsumerGroupHeartbeat v1,
OffsetCommit/OffsetFetch v9) share a topic, hand partitions over without ever both owning one, commit,
and take over from a member that leaves or is killed; the admin client describes the group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]
TIMEOUT_S = 30.0
PARTITIONS = 6
SESSION_MS = 6000
BROKER_ARGS = ("group.consumer.heartbeat.interval.ms=300", f"group.consumer.session.timeout.ms={SESSION_MS}")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def settle(futures: dict[Any, Future[Any]]) -> dict[Any, Any]:
    return {key: future.result(timeout=TIMEOUT_S) for key, future in futures.items()}


class Kip848Member(threading.Thread):
    """A ``group.protocol=consumer`` consumer polling on its own thread, committing what it reads."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.topic = topic
        self.assigned: set[int] = set()
        self.records: list[tuple[int, int]] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        # What the member owns, kept by the rebalance callbacks: librdkafka tells the coordinator a
        # partition is given up only after on_revoke returns, so the set shrinks before another member
        # can be handed that partition (a copy of consumer.assignment() taken after each poll would lag).
        def assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            self.assigned = self.assigned | {tp.partition for tp in partitions}

        def revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            self.assigned = self.assigned - {tp.partition for tp in partitions}

        try:
            self.consumer.subscribe([self.topic], on_assign=assign, on_revoke=revoke, on_lost=revoke)
            while not self.stopping.is_set():
                message = self.consumer.poll(0.05)
                if message is not None and message.error() is None:
                    self.records.append((message.partition(), message.offset()))
                    self.consumer.commit(message=message, asynchronous=False)
        except BaseException as exc:
            self.error = exc
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(TIMEOUT_S)
        if self.error is not None:
            raise self.error


def test_group_protocol_consumer_end_to_end(fresh_broker: Callable[..., BrokerProcess], wait_until: WaitUntil) -> None:
    process = fresh_broker(*BROKER_ARGS)
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    topic, group = unique("kip848"), unique("kip848-group")
    settle(admin.create_topics([NewTopic(topic, PARTITIONS, 1)]))
    producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 0})
    for index in range(60):
        producer.produce(topic, value=b"%d" % index, partition=index % PARTITIONS)
    producer.flush(TIMEOUT_S)

    overlaps: list[set[int]] = []
    watching = threading.Event()
    members: list[Kip848Member] = []

    def watch() -> None:  # sample both clients' assignments throughout: they must never overlap
        while not watching.is_set():
            if len(members) == 2 and members[0].assigned & members[1].assigned:
                overlaps.append(members[0].assigned & members[1].assigned)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        first = Kip848Member(process.bootstrap, topic, group)
        members.append(first)
        first.start()
        wait_until(lambda: first.assigned == set(range(PARTITIONS)), TIMEOUT_S, "the first member got no partitions")
        second = Kip848Member(process.bootstrap, topic, group)
        members.append(second)
        second.start()
        wait_until(lambda: len(first.assigned) == len(second.assigned) == 3
                   and first.assigned | second.assigned == set(range(PARTITIONS)), TIMEOUT_S,
                   "the partitions were not shared out")
        everything = {(partition, offset) for partition in range(PARTITIONS) for offset in range(10)}
        wait_until(lambda: set(first.records) | set(second.records) >= everything, TIMEOUT_S, "records missing")
        [description] = settle(admin.describe_consumer_groups([group])).values()
        assert description.state.name == "STABLE" and len(description.members) == 2
        assert sorted(tp.partition for member in description.members for tp in member.assignment.topic_partitions) \
            == list(range(PARTITIONS))

        second.stop()  # leaves the group (member epoch -1): the first member takes everything back
        members.pop()
        wait_until(lambda: first.assigned == set(range(PARTITIONS)), TIMEOUT_S, "the partitions did not come back")
        [offsets] = settle(admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])])).values()
        assert [tp.offset for tp in offsets.topic_partitions] == [10] * PARTITIONS
    finally:
        watching.set()
        for member in members:
            member.stop()
    assert not overlaps, f"a partition was owned by both members: {overlaps[:3]}"


KILLED_MEMBER = """
import sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer"})
consumer.subscribe([sys.argv[3]])
while True:
    consumer.poll(0.1)
"""


def test_killed_kip848_member_is_fenced_after_the_session_timeout(fresh_broker: Callable[..., BrokerProcess],
                                                                  wait_until: WaitUntil) -> None:
    process = fresh_broker(*BROKER_ARGS)
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    topic, group = unique("kip848-kill"), unique("kip848-kill-group")
    settle(admin.create_topics([NewTopic(topic, PARTITIONS, 1)]))
    survivor = Kip848Member(process.bootstrap, topic, group)
    survivor.start()
    victim = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, process.bootstrap, group, topic])
    try:
        wait_until(lambda: len(survivor.assigned) == 3, TIMEOUT_S, "the victim never took half of the partitions")
        mark = process.log_mark()
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(TIMEOUT_S)
        wait_until(lambda: survivor.assigned == set(range(PARTITIONS)), TIMEOUT_S, "the partitions did not move")
        # They moved because the broker fenced the silent member for its session timeout, not otherwise.
        assert "failed its session timeout" in process.log_text(since=mark)
    finally:
        if victim.poll() is None:
            victim.kill()
        survivor.stop()
