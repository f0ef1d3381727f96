"""What a test does with a broker besides pointing its own code at it: make topics, write records, look.

Both brokers of ``kafkalite.testing`` (in this process and in a subprocess) have these, through the
bundled client's blocking classes (``kafkalite.client.sync``), created on first use and closed with
the broker::

    broker.create_topic("orders", partitions=3, configs={"retention.ms": "60000"})
    broker.produce("orders", [b"a", b"b"], key=b"customer-1")
    broker.admin.list_topics()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkalite.client.producer.accumulator import RecordMetadata
    from kafkalite.client.sync import Admin, Producer
    from kafkalite.testing.security import TestSecurity

__all__ = ["BrokerHelpers"]

Headers = Mapping[str, Any] | Sequence[tuple[str, Any]]


class BrokerHelpers:
    """Mixed into a broker: ``admin``, ``create_topic``, ``produce`` (``bootstrap_servers`` is the broker's)."""

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    _admin: Admin | None = None
    _producer: Producer | None = None
    security: TestSecurity | None = None  # a broker started with security="..." (kafkalite.testing.security)

    def client_config(self, user: str = "admin") -> dict[str, Any]:
        """The bundled client's config for this broker (with ``security``: TLS and SASL as ``user``)."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap_servers}
        return self.security.client_config(self.bootstrap_servers, user)

    def confluent_config(self, user: str = "admin") -> dict[str, Any]:
        """confluent-kafka's config for this broker (with ``security``: TLS and SASL as ``user``)."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap_servers}
        return self.security.confluent_config(self.bootstrap_servers, user)

    def kafka_python_config(self, user: str = "admin") -> dict[str, Any]:
        """kafka-python's keyword arguments for this broker (with ``security``: TLS and SASL as ``user``)."""
        if self.security is None:
            return {"bootstrap_servers": self.bootstrap_servers}
        return self.security.kafka_python_config(self.bootstrap_servers, user)

    @property
    def admin(self) -> Admin:
        """A blocking admin client connected to this broker (made on first use)."""
        if self._admin is None:
            from kafkalite.client.sync import Admin

            self._admin = Admin({**self.client_config(), "client.id": "kafkalite-testing"})
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

            self._producer = Producer({**self.client_config(), "client.id": "kafkalite-testing", "linger.ms": 0})
        futures = [self._producer.send(topic, value, key, partition, headers) for value in values]
        self._producer.flush(timeout)
        return [future.result(timeout) for future in futures]

    def _close_clients(self) -> None:
        if self.security is not None:
            self.security.close()
        producer, self._producer = self._producer, None
        admin, self._admin = self._admin, None
        if producer is not None:
            producer.close(5.0)
        if admin is not None:
            admin.close()
