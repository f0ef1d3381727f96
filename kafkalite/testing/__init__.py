"""Real Kafka brokers for tests: in this process (``EmbeddedBroker``) or in a subprocess (``BrokerProcess``).

The pytest plugin (``kafkalite.testing.plugin``, loaded by installing kafkalite) offers them as the
``kafka_broker`` and ``kafka_broker_factory`` fixtures; outside pytest (unittest, scripts) use them as
context managers::

    from kafkalite.testing import EmbeddedBroker

    with EmbeddedBroker({"num.partitions": 3}) as broker:
        run_my_app(bootstrap_servers=broker.bootstrap_servers)
"""

from kafkalite.testing.embedded import EmbeddedBroker, broker_configs
from kafkalite.testing.process import BrokerProcess, wait_for

__all__ = ["BrokerProcess", "EmbeddedBroker", "broker_configs", "wait_for"]
