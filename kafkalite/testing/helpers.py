"""What a test does with a broker besides pointing its own code at it: make topics, write records, look.

Both brokers of ``kafkalite.testing`` (in this process and in a subprocess) have these, through the
bundled client's blocking classes (``kafkalite.client.sync``), created on first use and closed with
the broker::

    broker.create_topic("orders", partitions=3, configs={"retention.ms": "60000"})
    broker.produce("orders", [b"a", b"b"], key=b"customer-1")
    records = broker.consume("orders")           # everything up to the end, as ConsumerRecords
    broker.admin.list_topics()
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkalite.client.consumer.records import ConsumerRecord
    from kafkalite.client.producer.accumulator import RecordMetadata
    from kafkalite.client.sync import Admin, Producer

__all__ = ["BrokerHelpers"]

Headers = Mapping[str, Any] | Sequence[tuple[str, Any]]


class BrokerHelpers:
    """Mixed into a broker: ``admin``, ``create_topic``, ``produce``, ``consume`` (``bootstrap_servers`` is the
    broker's)."""

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    _admin: Admin | None = None
    _producer: Producer | None = None

    @property
    def admin(self) -> Admin:
        """A blocking admin client connected to this broker (made on first use)."""
        if self._admin is None:
            from kafkalite.client.sync import Admin

            self._admin = Admin({"bootstrap.servers": self.bootstrap_servers, "client.id": "kafkalite-testing"})
        return self._admin

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        """Create a topic (raises the client's error when the broker refuses, e.g. it exists)."""
        from kafkalite.client.admin_types import NewTopic

        result = self.admin.create_topics([NewTopic(name, partitions, configs=dict(configs or {}))])[name]
        if result.error is not None:
            raise result.error

    def produce(self, topic: str, values: Sequence[Any], *, key: Any = None, partition: int | None = None,
                headers: Headers | None = None, timeout: float = 30.0) -> list[RecordMetadata]:
        """Write ``values`` in order (acks=all, idempotent) and return where each one landed."""
        if self._producer is None:
            from kafkalite.client.sync import Producer

            self._producer = Producer({"bootstrap.servers": self.bootstrap_servers, "client.id": "kafkalite-testing",
                                       "linger.ms": 0})
        futures = [self._producer.send(topic, value, key, partition, headers) for value in values]
        self._producer.flush(timeout)
        return [future.result(timeout) for future in futures]

    def consume(self, topic: str, count: int | None = None, *, partition: int | None = None,
                isolation_level: str = "read_uncommitted", timeout: float = 30.0) -> list[ConsumerRecord]:
        """The records of ``topic`` (or of one ``partition``) from the beginning, in each partition's order.

        Without ``count``: everything up to the end of each partition as it is now (with read_committed,
        up to the last stable offset). With ``count``: wait until that many records arrived, for at most
        ``timeout`` seconds (then ``TimeoutError`` says how many came). No group, nothing committed.
        """
        from kafkalite.client.metadata import TopicPartition
        from kafkalite.client.sync import Consumer

        consumer = Consumer({"bootstrap.servers": self.bootstrap_servers, "client.id": "kafkalite-testing",
                             "isolation.level": isolation_level, "enable.auto.commit": False,
                             "allow.auto.create.topics": False})
        try:
            partitions = ([partition] if partition is not None
                          else sorted(consumer.partitions_for(topic, timeout * 1000)))
            if not partitions:
                raise ValueError(f"topic {topic!r} does not exist")
            assigned = [TopicPartition(topic, index) for index in partitions]
            consumer.assign(assigned)
            consumer.seek_to_beginning(*assigned)
            ends = consumer.end_offsets(assigned, timeout * 1000) if count is None else {}
            records: list[ConsumerRecord] = []
            deadline = time.monotonic() + timeout
            while True:
                if count is not None and len(records) >= count:
                    return records
                if count is None and all(consumer.position(tp, timeout * 1000) >= ends[tp] for tp in assigned):
                    return records
                left = deadline - time.monotonic()
                if left <= 0:
                    wanted = f"{count} records" if count is not None else "the end of every partition"
                    raise TimeoutError(f"{topic}: read {len(records)} records in {timeout} s, waiting for {wanted}")
                records += consumer.poll(timeout_ms=min(left, 0.2) * 1000,
                                         max_records=None if count is None else count - len(records))
        finally:
            consumer.close()

    def _close_clients(self) -> None:
        producer, self._producer = self._producer, None
        admin, self._admin = self._admin, None
        if producer is not None:
            producer.close(5.0)
        if admin is not None:
            admin.close()
