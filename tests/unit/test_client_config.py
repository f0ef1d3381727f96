"""Client config: Kafka's key names, keywords with underscores, typed values, unknown keys named."""

from __future__ import annotations

import pytest

from kafkalite.client import ConfigError, Producer
from kafkalite.client.config import AdminConfig, ProducerConfig, config_keys, parse_config


def test_kafka_names_and_keywords_give_the_same_config() -> None:
    from_dict = parse_config(ProducerConfig, {"bootstrap.servers": "a:1,b:2", "linger.ms": 7, "acks": "all"})
    from_keywords = parse_config(ProducerConfig, bootstrap_servers="a:1,b:2", linger_ms=7, acks=-1)
    assert from_dict == from_keywords
    assert from_dict.bootstrap_addresses == [("a", 1), ("b", 2)]
    assert from_dict.linger_ms == 7 and from_dict.acks == -1


def test_strings_from_a_properties_file_are_converted() -> None:
    config = parse_config(ProducerConfig, {"batch.size": "1000", "enable.idempotence": "false", "acks": "1",
                                           "compression.type": "lz4", "bootstrap.servers": ["h:9092"]})
    assert config.batch_size == 1000 and config.enable_idempotence is False and config.acks == 1
    assert config.bootstrap_addresses == [("h", 9092)]


@pytest.mark.parametrize(("config", "named"), [
    ({"linger.msec": 5}, "linger.msec"),
    ({"group.id": "g"}, "group.id"),  # a consumer key is not a producer key
])
def test_unknown_keys_are_refused_by_name(config: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_config(ProducerConfig, config)


def test_unknown_keyword_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="lingr_ms"):
        Producer(lingr_ms=5)


@pytest.mark.parametrize("config", [
    {"linger.ms": "soon"}, {"linger.ms": -1}, {"acks": 2}, {"compression.type": "brotli"},
    {"enable.idempotence": "maybe"}, {"bootstrap.servers": "no-port"}, {"bootstrap.servers": ""},
    {"security.protocol": "KERBEROS"}, {"key.serializer": 5}, {"batch.size": True},
])
def test_bad_values_are_refused(config: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        parse_config(ProducerConfig, config)


def test_idempotence_rules_follow_the_java_client() -> None:
    assert Producer(acks=1).idempotent is False  # the default gives way to acks=1
    assert Producer().idempotent is True
    with pytest.raises(ConfigError, match="acks=all"):
        Producer({"enable.idempotence": True, "acks": 1})
    with pytest.raises(ConfigError):
        Producer({"transactional.id": "t", "enable.idempotence": False})


def test_admin_has_its_own_keys() -> None:
    assert "default.api.timeout.ms" in config_keys(AdminConfig)
    with pytest.raises(ConfigError, match="linger.ms"):
        parse_config(AdminConfig, {"linger.ms": 1})


def test_partitioner_names() -> None:
    assert parse_config(ProducerConfig, partitioner_class="org.apache.kafka.clients.producer.RoundRobinPartitioner"
                        ).partitioner_class == "round_robin"
    assert parse_config(ProducerConfig, {"partitioner.class": "murmur2_random"}).partitioner_class == "sticky"
    with pytest.raises(ConfigError, match="partitioner"):
        parse_config(ProducerConfig, {"partitioner.class": "random-ish"})


def test_reconnect_backoff_grows_exponentially_with_jitter() -> None:
    from kafkalite.client.network import NetworkClient

    client = NetworkClient(parse_config(ProducerConfig, reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000))
    for failures, base in [(0, 50), (1, 100), (3, 400), (10, 1000)]:
        delays = [client._backoff_ms(failures) for _ in range(200)]
        assert all(0.8 * base <= delay <= 1.2 * base for delay in delays)
        assert len(set(delays)) > 1  # jitter: clients do not retry in step
