"""Dynamic broker configs and client-metrics subscriptions through the config handlers: Kafka's
checks and answers, DescribeConfigs sources, and their file in the data directory across a restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig, ConfigSource
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.core.dynamic_configs import DYNAMIC_CONFIGS_FILE
from kafkalite.broker.handlers.registry import HANDLERS, RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkalite.protocol.messages.alter_configs_request import AlterableConfig as LegacyConfig
from kafkalite.protocol.messages.alter_configs_request import AlterConfigsResource as LegacyResource
from kafkalite.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkalite.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource

NODE = 1
TOPIC, BROKER, CLIENT_METRICS = 2, 4, 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def open_cluster(data_dir: Path | None) -> Cluster:
    settings = {"log.storage": "memory"} if data_dir is None else {"log.dirs": str(data_dir)}
    cluster = Cluster(BrokerConfig({**settings, "node.id": str(NODE)}))
    cluster.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.open()
    return cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    cluster = open_cluster(None)
    yield cluster
    cluster.close()


def call(cluster: Cluster, request: Message, version: int) -> Any:
    handler = HANDLERS[request.API_KEY]
    decoded = handler.request_type.decode(request.encode(version), version)
    response = handler.handle(RequestContext(cluster, request.API_KEY, version, 7, "test", "127.0.0.1:1"), decoded)
    return handler.response_type.decode(response.encode(version), version)  # type: ignore[union-attr]


def incremental(cluster: Cluster, resource_type: int, name: str, *ops: tuple[str, int, str | None],
                version: int = 1, validate_only: bool = False) -> Any:
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[AlterableConfig(name=key, config_operation=op, value=value) for key, op, value in ops])],
        validate_only=validate_only)
    return call(cluster, request, version).responses[0]


def legacy(cluster: Cluster, resource_type: int, name: str, configs: dict[str, str], version: int = 2) -> Any:
    request = AlterConfigsRequest(resources=[LegacyResource(
        resource_type=resource_type, resource_name=name,
        configs=[LegacyConfig(name=key, value=value) for key, value in configs.items()])])
    return call(cluster, request, version).responses[0]


def describe(cluster: Cluster, resource_type: int, name: str, keys: list[str] | None = None,
             version: int = 4) -> Any:
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)], include_synonyms=version >= 1)
    return call(cluster, request, version).results[0]


def entries(result: Any) -> dict[str, Any]:
    return {entry.name: entry for entry in result.configs}


# BROKER resources ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
def test_a_per_broker_key_kafka_defines_is_accepted_for_this_broker(cluster: Cluster, version: int) -> None:
    result = incremental(cluster, BROKER, str(NODE), ("sasl.kerberos.min.time.before.relogin", SET, "58000"),
                         version=version)
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    entry = entries(describe(cluster, BROKER, str(NODE), ["sasl.kerberos.min.time.before.relogin"]))[
        "sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.config_source, entry.read_only) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    refused = incremental(cluster, BROKER, "", ("sasl.kerberos.min.time.before.relogin", SET, "58000"),
                          version=version)
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id must be "
                                   "specified: Set(sasl.kerberos.min.time.before.relogin)")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_alter_configs_on_the_cluster_default(cluster: Cluster, version: int) -> None:
    assert legacy(cluster, BROKER, "", {"log.retention.ms": "7200000", "background.threads": "4"},
                  version).error_code == ErrorCode.NONE
    result = describe(cluster, BROKER, "")
    assert {name: (entry.value, entry.config_source) for name, entry in entries(result).items()} == {
        "log.retention.ms": ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        "background.threads": ("4", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)}
    assert cluster.config.topic_config("retention.ms") == 7_200_000
    assert legacy(cluster, BROKER, "", {"background.threads": "5"}, version).error_code == ErrorCode.NONE
    assert set(entries(describe(cluster, BROKER, ""))) == {"background.threads"}  # the legacy form replaces all


def test_read_only_type_and_listener_errors_are_kafkas(cluster: Cluster) -> None:
    read_only = incremental(cluster, BROKER, str(NODE), ("log.dirs", SET, "/x"))
    assert (read_only.error_code, read_only.error_message) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)")
    bad_type = legacy(cluster, BROKER, str(NODE), {"message.max.bytes": "big"})
    assert (bad_type.error_code, bad_type.error_message) == (
        ErrorCode.INVALID_REQUEST, "Invalid value big for configuration message.max.bytes: Not a number of type INT")
    unprefixed = incremental(cluster, BROKER, str(NODE), ("ssl.truststore.location", SET, "/t"))
    assert unprefixed.error_code == ErrorCode.INVALID_REQUEST
    assert unprefixed.error_message.startswith("These security configs can be dynamically updated only per-listener")
    not_a_list = incremental(cluster, BROKER, str(NODE), ("message.max.bytes", APPEND, "1"))
    assert (not_a_list.error_code, not_a_list.error_message) == (
        ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: message.max.bytes")


def test_unknown_keys_are_kept_and_described_as_kafka_describes_them(cluster: Cluster) -> None:
    assert incremental(cluster, BROKER, str(NODE), ("my.plugin.setting", SET, "on")).error_code == ErrorCode.NONE
    entry = entries(describe(cluster, BROKER, str(NODE), ["my.plugin.setting"]))["my.plugin.setting"]
    assert (entry.value, entry.is_sensitive, entry.config_type, entry.config_source) == (
        None, True, 0, ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert incremental(cluster, BROKER, str(NODE), ("my.plugin.setting", DELETE, None)).error_code == ErrorCode.NONE
    assert entries(describe(cluster, BROKER, str(NODE), ["my.plugin.setting"])) == {}


def test_append_on_a_broker_list_starts_from_the_keys_default(cluster: Cluster) -> None:
    assert incremental(cluster, BROKER, str(NODE), ("log.cleanup.policy", APPEND, "compact")).error_code == 0
    assert cluster.config.dynamic_configs() == {"log.cleanup.policy": "delete,compact"}
    assert cluster.config.topic_config("cleanup.policy") == ["delete", "compact"]
    assert incremental(cluster, BROKER, str(NODE), ("log.cleanup.policy", SUBTRACT, "delete")).error_code == 0
    assert cluster.config.dynamic_configs() == {"log.cleanup.policy": "compact"}


def test_a_dynamic_default_reaches_topics_and_partitions(cluster: Cluster) -> None:
    topic = cluster.topics.create("events", 2)
    assert incremental(cluster, BROKER, "", ("log.retention.bytes", SET, "4096"),
                       ("log.message.timestamp.type", SET, "LogAppendTime")).error_code == ErrorCode.NONE
    assert {partition.log.config.retention_bytes for partition in topic.partitions} == {4096}
    assert topic.partitions[0].settings.message_timestamp_type == "LogAppendTime"


def test_transaction_partition_verification_can_be_turned_off(cluster: Cluster) -> None:
    assert cluster.verify_transactions is True
    incremental(cluster, BROKER, "", ("transaction.partition.verification.enable", SET, "false"))
    assert cluster.verify_transactions is False


# CLIENT_METRICS resources -------------------------------------------------------------------------

def test_client_metrics_subscriptions_are_created_described_and_deleted(cluster: Cluster) -> None:
    result = incremental(cluster, CLIENT_METRICS, "producers", ("metrics", SET, "org.apache.kafka.producer."),
                         ("interval.ms", SET, "1000"), ("match", SET, "client_software_name=kafka-python"))
    assert result.error_code == ErrorCode.NONE
    assert incremental(cluster, CLIENT_METRICS, "producers", ("metrics", APPEND, "org.apache.kafka.consumer.")
                       ).error_code == ErrorCode.NONE
    assert cluster.dynamic_configs.client_metrics_names() == ["producers"]
    described = entries(describe(cluster, CLIENT_METRICS, "producers"))
    assert {name: (entry.value, entry.config_source) for name, entry in described.items()} == {
        "metrics": ("org.apache.kafka.producer.,org.apache.kafka.consumer.", ConfigSource.CLIENT_METRICS_CONFIG),
        "interval.ms": ("1000", ConfigSource.CLIENT_METRICS_CONFIG),
        "match": ("client_software_name=kafka-python", ConfigSource.CLIENT_METRICS_CONFIG)}
    assert entries(describe(cluster, CLIENT_METRICS, "nobody")) == {}
    incremental(cluster, CLIENT_METRICS, "producers", ("metrics", DELETE, None), ("interval.ms", DELETE, None),
                ("match", DELETE, None))
    assert cluster.dynamic_configs.client_metrics_names() == []


@pytest.mark.parametrize(("ops", "code", "message"), [
    ([("colour", SET, "blue")], ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: colour"),
    ([("interval.ms", SET, "10")], ErrorCode.INVALID_REQUEST,
     "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ([("interval.ms", SET, "often")], ErrorCode.INVALID_CONFIG,
     "Invalid value often for configuration interval.ms: Not a number of type INT"),
    ([("match", SET, "client_colour=blue")], ErrorCode.INVALID_CONFIG,
     "Illegal client matching pattern: client_colour=blue"),
    ([("interval.ms", APPEND, "5")], ErrorCode.INVALID_CONFIG,
     "Can't APPEND to key interval.ms because its type is not LIST."),
])
def test_client_metrics_errors_are_kafkas(cluster: Cluster, ops: list[tuple[str, int, str | None]], code: ErrorCode,
                                          message: str) -> None:
    result = incremental(cluster, CLIENT_METRICS, "subscription", *ops)
    assert (result.error_code, result.error_message) == (code, message)
    assert cluster.dynamic_configs.client_metrics_names() == []


# persistence -------------------------------------------------------------------------------------

def test_dynamic_configs_survive_a_restart(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path)
    try:
        incremental(cluster, BROKER, str(NODE), ("sasl.kerberos.min.time.before.relogin", SET, "58000"),
                    ("log.retention.ms", SET, "3600000"), ("my.plugin.setting", SET, "on"))
        incremental(cluster, BROKER, "", ("log.segment.bytes", SET, "1048576"))
        incremental(cluster, CLIENT_METRICS, "all", ("metrics", SET, "*"))
        incremental(cluster, BROKER, str(NODE), ("num.io.threads", SET, "2"), validate_only=True)
        cluster.topics.create("events", 1)
    finally:
        cluster.close()
    stored = json.loads((tmp_path / DYNAMIC_CONFIGS_FILE).read_text(encoding="utf-8"))
    assert stored["broker"][str(NODE)] == {"sasl.kerberos.min.time.before.relogin": "58000",
                                           "log.retention.ms": "3600000", "my.plugin.setting": "on"}
    reopened = open_cluster(tmp_path)
    try:
        node = entries(describe(reopened, BROKER, str(NODE), ["sasl.kerberos.min.time.before.relogin",
                                                               "log.segment.bytes", "num.io.threads"]))
        assert node["sasl.kerberos.min.time.before.relogin"].config_source == ConfigSource.DYNAMIC_BROKER_CONFIG
        assert (node["log.segment.bytes"].value, node["log.segment.bytes"].config_source) == (
            "1048576", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        assert node["num.io.threads"].config_source == ConfigSource.DEFAULT_CONFIG
        topic = reopened.topics.get("events")
        assert topic is not None and topic.partitions[0].log.config.retention_ms == 3_600_000
        assert reopened.dynamic_configs.client_metrics("all") == {"metrics": "*"}
    finally:
        reopened.close()


def test_memory_storage_keeps_dynamic_configs_in_memory_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             cluster: Cluster) -> None:
    monkeypatch.chdir(tmp_path)
    incremental(cluster, BROKER, str(NODE), ("log.retention.ms", SET, "1000"))
    assert cluster.config.topic_config("retention.ms") == 1000
    assert list(tmp_path.iterdir()) == []


def test_a_change_the_disk_refuses_is_a_storage_error_and_is_not_made(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkalite.broker.core.dynamic_configs as module

    cluster = open_cluster(tmp_path)
    try:
        assert incremental(cluster, BROKER, str(NODE), ("log.retention.bytes", SET, "4096")).error_code == 0
        written = (tmp_path / DYNAMIC_CONFIGS_FILE).read_bytes()

        def full_disk(path: Path, data: bytes) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(module, "_write_atomically", full_disk)
        refused = incremental(cluster, BROKER, str(NODE), ("log.retention.bytes", SET, "8192"),
                              ("log.retention.ms", SET, "60000"))
        assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        values = entries(describe(cluster, BROKER, str(NODE), ["log.retention.bytes", "log.retention.ms"]))
        assert values["log.retention.bytes"].value == "4096"  # as before: nothing of the change applies
        assert values["log.retention.ms"].config_source != ConfigSource.DYNAMIC_BROKER_CONFIG
        group = incremental(cluster, 32, "g", ("share.record.lock.duration.ms", SET, "20000"))
        assert group.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert cluster.dynamic_configs.group_configs("g") == {}
        assert (tmp_path / DYNAMIC_CONFIGS_FILE).read_bytes() == written
    finally:
        cluster.close()
