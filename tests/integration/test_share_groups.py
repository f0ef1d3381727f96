"""Share groups (KIP-932) end to end with confluent-kafka's ShareConsumer (librdkafka: ShareGroupHeartbeat,
ShareFetch and ShareAcknowledge v1): consumers sharing one partition each get their own records and
together every record, released records come back, a consumer killed mid-batch has its records
delivered again once their acquisition lock times out, nothing accepted is delivered twice, and the
share-partition state survives a broker restart. Group configs go through the admin client."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]
TIMEOUT_S = 30.0
LOCK_MS = 2000
# A short acquisition lock for the tests that wait for one to time out (Kafka's floor is 15 s).
SHORT_LOCKS = (f"group.share.record.lock.duration.ms={LOCK_MS}", "group.share.min.record.lock.duration.ms=1000")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def prepare(bootstrap: str, topic: str, group: str, **configs: str) -> None:
    """A one-partition topic, and a share group that starts at the earliest record."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=TIMEOUT_S)
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
               for name, value in {"share.auto.offset.reset": "earliest", **configs}.items()]
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=entries)]).values():
        future.result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, count: int, per_batch: int = 5, start: int = 0) -> None:
    """``count`` records in batches of ``per_batch`` (one flush each, so each is its own stored batch)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for first in range(start, start + count, per_batch):
        for number in range(first, min(start + count, first + per_batch)):
            producer.produce(topic, value=f"record-{number}".encode())
        producer.flush(TIMEOUT_S)


def share_consumer(bootstrap: str, group: str, topic: str, **config: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit", **config})
    consumer.subscribe([topic])
    return consumer


class Ledger:
    """What the consumers of one test saw: every delivery, and every record accepted, by whom."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: dict[int, list[tuple[str, int]]] = collections.defaultdict(list)  # offset -> (who, count)
        self.accepted: dict[int, list[str]] = collections.defaultdict(list)

    def delivered(self, who: str, offset: int, count: int) -> None:
        with self.lock:
            self.deliveries[offset].append((who, count))

    def accept(self, who: str, offset: int) -> None:
        with self.lock:
            self.accepted[offset].append(who)

    def accepted_by(self, who: str) -> set[int]:
        with self.lock:
            return {offset for offset, names in self.accepted.items() if who in names}

    def accepted_offsets(self) -> set[int]:
        with self.lock:
            return set(self.accepted)

    def accepted_twice(self) -> list[int]:
        with self.lock:
            return sorted(offset for offset, names in self.accepted.items() if len(names) > 1)


class Member(threading.Thread):
    """A share consumer on its own thread: accepts what it gets, except what ``release`` says to release."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger,
                 release: Callable[[int, int], bool] = lambda offset, count: False, **config: Any) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = share_consumer(bootstrap, group, topic, **config)
        self.ledger, self.release = ledger, release
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                for message in self.consumer.poll(0.2):
                    if message.error():
                        continue
                    offset, count = message.offset(), message.delivery_count()
                    self.ledger.delivered(self.name, offset, count)
                    if self.release(offset, count):
                        self.consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    else:
                        self.consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                        self.ledger.accept(self.name, offset)
                self.consumer.commit_sync(TIMEOUT_S)
        except BaseException as exc:  # surfaced by stop()
            self.failure = exc
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(TIMEOUT_S)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.failure is not None:
            raise self.failure


def test_share_consumers_split_one_partition_and_every_record_is_delivered_once(broker: BrokerProcess,
                                                                             wait_until: WaitUntil) -> None:
    topic, group = unique("share-split"), unique("share-split-group")
    prepare(broker.bootstrap, topic, group)
    total = 300
    ledger = Ledger()
    members = [Member(f"consumer-{index}", broker.bootstrap, group, topic, ledger, **{"max.poll.records": 5})
               for index in range(3)]
    for member in members:
        member.start()
    try:
        produce(broker.bootstrap, topic, total)
        wait_until(lambda: len(ledger.accepted_offsets()) == total, TIMEOUT_S,
                   "not every record was delivered and accepted")
    finally:
        for member in members:
            member.stop()
    assert ledger.accepted_offsets() == set(range(total))
    assert ledger.accepted_twice() == []
    shares = [ledger.accepted_by(member.name) for member in members]
    print("records accepted per consumer:", [len(share) for share in shares])
    assert all(shares), "a consumer of the group got no record"
    assert not (shares[0] & shares[1] or shares[0] & shares[2] or shares[1] & shares[2])


def test_released_records_are_delivered_again_with_a_higher_delivery_count(broker: BrokerProcess,
                                                                           wait_until: WaitUntil) -> None:
    topic, group = unique("share-release"), unique("share-release-group")
    prepare(broker.bootstrap, topic, group)
    produce(broker.bootstrap, topic, 40)
    ledger = Ledger()
    released = {offset for offset in range(40) if offset % 4 == 0}
    member = Member("releasing", broker.bootstrap, group, topic, ledger,
                    release=lambda offset, count: offset in released and count == 1)
    member.start()
    try:
        wait_until(lambda: len(ledger.accepted_offsets()) == 40, TIMEOUT_S, "the released records did not come back")
    finally:
        member.stop()
    assert ledger.accepted_twice() == []
    for offset in released:
        assert [count for _, count in ledger.deliveries[offset]] == [1, 2], offset
    assert all(len(ledger.deliveries[offset]) == 1 for offset in set(range(40)) - released)


def test_rejected_records_are_not_delivered_again(broker: BrokerProcess, wait_until: WaitUntil) -> None:
    topic, group = unique("share-reject"), unique("share-reject-group")
    prepare(broker.bootstrap, topic, group)
    produce(broker.bootstrap, topic, 10)
    consumer = share_consumer(broker.bootstrap, group, topic)
    seen: list[int] = []
    try:
        def poll() -> bool:
            for message in consumer.poll(0.2):
                if not message.error():
                    seen.append(message.offset())
                    consumer.acknowledge(message, AcknowledgeType.REJECT if message.offset() < 5
                                         else AcknowledgeType.ACCEPT)
            consumer.commit_sync(TIMEOUT_S)
            return len(seen) >= 10

        wait_until(poll, TIMEOUT_S, "the records were not delivered")
        produce(broker.bootstrap, topic, 1, start=10)  # behind the rejected ones: released ones would come first
        wait_until(lambda: poll() and 10 in seen, TIMEOUT_S, "the next record did not come")
    finally:
        consumer.close()
    assert sorted(seen) == list(range(11))  # the rejected ones never again


KILLED_CONSUMER = """
import sys
import time
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
accept_below = int(sys.argv[4])
while True:
    messages = [message for message in consumer.poll(0.2) if not message.error()]
    if not messages:
        continue
    for message in messages:
        if message.offset() < accept_below:
            consumer.acknowledge(message)
    consumer.commit_sync()
    print(" ".join(str(message.offset()) for message in messages), flush=True)
    while True:  # mid-batch: the rest stays acquired until this process is killed
        time.sleep(1)
"""


def start_killed_consumer(bootstrap: str, group: str, topic: str, accept_below: int) -> tuple[subprocess.Popen[str],
                                                                                               list[int]]:
    """A share consumer in a child process that acquires one batch, accepts the offsets below ``accept_below``,
    says which offsets it got, and then holds the rest until it is killed."""
    child = subprocess.Popen([sys.executable, "-c", KILLED_CONSUMER, bootstrap, group, topic, str(accept_below)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    return child, [int(offset) for offset in line.split()]


def test_a_consumer_killed_mid_batch_has_its_records_redelivered_after_the_lock_times_out(
        fresh_broker: Callable[..., BrokerProcess], wait_until: WaitUntil) -> None:
    process = fresh_broker(*SHORT_LOCKS)
    topic, group = unique("share-kill"), unique("share-kill-group")
    prepare(process.bootstrap, topic, group)
    produce(process.bootstrap, topic, 20, per_batch=20)
    child, held = start_killed_consumer(process.bootstrap, group, topic, accept_below=5)
    try:
        assert held == list(range(20)), held
        os.kill(child.pid, signal.SIGKILL)
        child.wait(TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(TIMEOUT_S)
    ledger = Ledger()
    survivor = Member("survivor", process.bootstrap, group, topic, ledger)
    survivor.start()
    try:
        wait_until(lambda: len(ledger.accepted_offsets()) == 15, TIMEOUT_S,
                   "the killed consumer's records were not delivered again")
    finally:
        survivor.stop()
    assert ledger.accepted_offsets() == set(range(5, 20))  # what the killed consumer accepted never again
    assert {count for offset in range(5, 20) for _, count in ledger.deliveries[offset]} == {2}


def test_share_state_survives_a_broker_restart(fresh_broker: Callable[..., BrokerProcess],
                                               wait_until: WaitUntil) -> None:
    process = fresh_broker()
    topic, group = unique("share-restart"), unique("share-restart-group")
    prepare(process.bootstrap, topic, group)
    produce(process.bootstrap, topic, 20, per_batch=20)
    child, held = start_killed_consumer(process.bootstrap, group, topic, accept_below=8)
    try:
        assert held == list(range(20)), held
        process.restart()  # offsets 0-7 accepted, 8-19 acquired and never acknowledged
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(TIMEOUT_S)
    produce(process.bootstrap, topic, 5, start=20)
    ledger = Ledger()
    member = Member("after-restart", process.bootstrap, group, topic, ledger)
    member.start()
    try:
        wait_until(lambda: len(ledger.accepted_offsets()) == 17, TIMEOUT_S,
                   "the unacknowledged records did not come back after the restart")
    finally:
        member.stop()
    assert ledger.accepted_offsets() == set(range(8, 25))
    assert ledger.accepted_twice() == []


@pytest.mark.parametrize("value", ["sometimes", "by_duration:-PT1H"])
def test_a_bad_group_config_is_refused(broker: BrokerProcess, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", value, incremental_operation=AlterConfigOpType.SET)
    (future,) = admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, unique("bad"),
                                                                incremental_configs=[entry])]).values()
    with pytest.raises(Exception, match="share.auto.offset.reset"):
        future.result(timeout=TIMEOUT_S)
