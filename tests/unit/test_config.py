"""Broker configuration: sources and precedence, Kafka's key semantics, topic configs, the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.broker.config import (
    BROKER_KEYS,
    CONFIG_KEYS,
    LONG_MAX,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    Listener,
    TopicConfig,
    parse_listener,
    read_properties,
)
from kafkalite.broker.core.log.partition_log import LogConfig
from kafkalite.broker.core.topics import log_config
from kafkalite.cli.serve import _parse_args, build_config
from kafkalite.protocol.errors import ErrorCode

NO_ENV: dict[str, str] = {}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# sources and precedence -------------------------------------------------------------------------
def test_file_then_environment_then_overrides(tmp_path: Path) -> None:
    properties = write(tmp_path / "server.properties",
                       "num.partitions=2\nlog.retention.hours=10\nlog.segment.bytes=1000\n")
    environ = {"KAFKALITE_LOG_RETENTION_HOURS": "20", "KAFKALITE_LOG_SEGMENT_BYTES": "2000", "PATH": "/bin"}
    config = BrokerConfig.load(properties, {"log.segment.bytes": "3000"}, environ=environ)
    assert config.get_int("num.partitions") == 2  # file only
    assert config.get_int("log.retention.hours") == 20  # environment beats the file
    assert config.get_int("log.segment.bytes") == 3000  # overrides beat both
    assert config.get_int("default.replication.factor") == 1  # default


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig.load(None, {}, environ=NO_ENV)
    assert config.get_int("node.id") == 1
    assert config.get_list("listeners") == ["PLAINTEXT://localhost:9092"]
    assert config.get_bool("auto.create.topics.enable") is True
    assert config.get_int("log.segment.bytes") == 1024**3
    assert config.get_int("message.max.bytes") == 1_048_588
    assert config.get_int("socket.request.max.bytes") == 104_857_600
    assert config.get_int("log.message.timestamp.after.max.ms") == 3_600_000
    assert config.get_int("log.message.timestamp.before.max.ms") == LONG_MAX
    assert config.get_str("log.message.timestamp.type") == "CreateTime"
    assert config.get_bool("log.flush.on.ack") is False
    assert config.get("log.flush.interval.ms") is None
    assert config.data_dir() == Path("data")


def test_unknown_keys_are_kept_as_strings(tmp_path: Path) -> None:
    properties = write(tmp_path / "server.properties",
                       "zookeeper.connect=zk:2181\nmy.plugin.flags=a,b\nlisteners=PLAINTEXT://:9092\n")
    config = BrokerConfig.load(properties, {}, environ=NO_ENV)
    assert config.get("zookeeper.connect") == "zk:2181"
    assert config.get_list("my.plugin.flags") == ["a", "b"]
    with pytest.raises(KeyError):
        config.get("never.configured")


def test_every_kafka_4_broker_key_is_known_with_its_type() -> None:
    """A Kafka server.properties with thread pools, quorum settings, TLS and SASL loads, typed."""
    config = BrokerConfig({"num.network.threads": "3", "process.roles": "broker,controller",
                           "controller.quorum.voters": "1@localhost:9093", "ssl.keystore.password": "secret",
                           "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                           "remote.log.storage.system.enable": "false"})
    assert config.get("num.network.threads") == 3
    assert config.get_list("process.roles") == ["broker", "controller"]
    assert config.get_list("sasl.enabled.mechanisms") == ["PLAIN", "SCRAM-SHA-256"]
    assert BROKER_KEYS["ssl.keystore.password"].sensitive and BROKER_KEYS["delegation.token.secret.key"].inert
    assert len(BROKER_KEYS) >= 289
    modes = {key.update_mode for key in BROKER_KEYS.values()}
    assert modes == {"read-only", "per-broker", "cluster-wide"}
    assert BROKER_KEYS["sasl.kerberos.min.time.before.relogin"].update_mode == "per-broker"
    assert BROKER_KEYS["log.retention.ms"].update_mode == "cluster-wide"
    assert BROKER_KEYS["log.retention.hours"].update_mode == "read-only"  # only the ms keys are dynamic in Kafka


def test_bad_value_at_load_names_the_key() -> None:
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        BrokerConfig.load(None, {"log.segment.bytes": "lots"}, environ=NO_ENV)
    with pytest.raises(ConfigError, match="auto.create.topics.enable"):
        BrokerConfig.load(None, {"auto.create.topics.enable": "yes"}, environ=NO_ENV)
    with pytest.raises(ConfigError, match="log.storage"):
        BrokerConfig.load(None, {"log.storage": "tape"}, environ=NO_ENV)


def test_broker_id_is_an_alias_of_node_id() -> None:
    assert BrokerConfig({"broker.id": "7"}).get_int("node.id") == 7
    assert BrokerConfig({"node.id": "7"}).get_int("broker.id") == 7
    with pytest.raises(ConfigError, match="disagree"):
        BrokerConfig({"node.id": "1", "broker.id": "2"})


def test_data_dir_uses_the_first_log_dir_and_none_in_memory() -> None:
    assert BrokerConfig({"log.dirs": "/a, /b"}).data_dir() == Path("/a")
    assert BrokerConfig({"log.dir": "/c"}).data_dir() == Path("/c")
    assert BrokerConfig({"log.dirs": "/a", "log.storage": "memory"}).data_dir() is None


# retention and unit translation -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("settings", "expected_ms"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "2"}, 2 * 3_600_000),
        ({"log.retention.hours": "2", "log.retention.minutes": "3"}, 3 * 60_000),
        ({"log.retention.hours": "2", "log.retention.minutes": "3", "log.retention.ms": "4"}, 4),
        ({"log.retention.ms": "-1"}, -1),
    ],
)
def test_retention_ms_beats_minutes_beats_hours(settings: dict[str, str], expected_ms: int) -> None:
    assert BrokerConfig(settings).topic_config("retention.ms") == expected_ms


def test_topic_defaults_translate_broker_units() -> None:
    config = BrokerConfig({"log.roll.hours": "1", "log.flush.scheduler.interval.ms": "500"})
    assert config.topic_config("segment.ms") == 3_600_000
    assert config.topic_config("flush.ms") == 500  # log.flush.interval.ms unset: the scheduler interval
    assert BrokerConfig({"log.roll.ms": "5", "log.roll.hours": "1"}).topic_config("segment.ms") == 5
    assert config.topic_config("max.message.bytes") == 1_048_588
    assert config.topic_config_default("cleanup.policy") == "delete"
    assert config.topic_config_default("retention.ms") == "604800000"


def test_topic_override_beats_the_broker_default() -> None:
    config = BrokerConfig({"log.retention.hours": "1"})
    assert config.topic_config("retention.ms", {"retention.ms": "1234"}) == 1234
    assert config.effective_topic_config({"segment.bytes": "2048"})["segment.bytes"] == 2048


def test_log_config_merges_and_translates() -> None:
    config = BrokerConfig({"log.retention.minutes": "10", "log.segment.bytes": "4096"})
    storage = log_config(config.topic_settings({"cleanup.policy": "compact,delete", "segment.ms": "99"}))
    assert (storage.segment_bytes, storage.segment_ms, storage.retention_ms, storage.flush_messages, storage.flush_ms,
            storage.cleanup_policy) == (4096, 99, 600_000, None, None, "compact,delete")
    assert log_config(config.topic_settings({"flush.messages": "1"})).flush_messages == 1


def test_log_config_builds_the_storage_layers_log_config() -> None:
    storage = log_config(BrokerConfig({"log.retention.hours": "1"}).topic_settings({"segment.bytes": "1024"}))
    assert isinstance(storage, LogConfig)
    assert storage.retention_ms == 3_600_000
    assert storage.segment_bytes == 1024


def test_log_config_from_kafka_topic_keys() -> None:
    settings = BrokerConfig().topic_settings(
        {"retention.ms": "3600000", "segment.bytes": "1024", "flush.messages": str(2**63 - 1), "unknown.key": "x"})
    storage = log_config(settings)
    assert (storage.retention_ms, storage.segment_bytes, storage.flush_messages) == (3_600_000, 1024, None)
    assert settings.flush_ms == 2**63 - 1  # Kafka's "never", as DescribeConfigs shows it
    for key, bad in (("segment.bytes", "10"), ("retention.ms", "-2"), ("cleanup.policy", "shred"), ("segment.ms", "x")):
        with pytest.raises(ConfigError):
            BrokerConfig().validate_topic_config(key, bad)


def test_the_storage_defaults_are_the_config_tables() -> None:
    assert log_config(BrokerConfig().topic_settings()) == LogConfig()


def test_topic_settings_has_a_field_per_topic_key() -> None:
    names = {key.replace(".", "_") for key in TOPIC_KEYS}
    assert set(TopicConfig.__slots__) == set(TopicConfig.__annotations__) == names
    settings = BrokerConfig().topic_settings()
    with pytest.raises(AttributeError):
        settings.retention_ms = 0  # immutable: topics may share one
    with pytest.raises(TypeError, match="retention_ms"):
        TopicConfig(**{name: getattr(settings, name) for name in names - {"retention_ms"}})


# topic config validation ------------------------------------------------------------------------
def test_validate_topic_config_accepts_kafka_values() -> None:
    config = BrokerConfig()
    assert config.validate_topic_config("cleanup.policy", "compact,delete") == ["compact", "delete"]
    assert config.validate_topic_config("compression.type", "zstd") == "zstd"
    assert config.validate_topic_config("message.timestamp.type", "LogAppendTime") == "LogAppendTime"
    assert config.validate_topic_config("retention.ms", "-1") == -1
    assert config.validate_topic_config("min.cleanable.dirty.ratio", "0.25") == 0.25
    assert config.validate_topic_config("preallocate", "TRUE") is True
    assert config.validate_topic_config("retention.ms", None) is None  # a delete


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("no.such.config", "1", "Unknown topic config name: no.such.config"),
        ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("segment.bytes", "10", "Value must be at least 14"),
        ("segment.bytes", str(2**31), "Not a number of type INT"),
        ("cleanup.policy", "shred", "String must be one of: compact, delete"),
        ("cleanup.policy", "", "String must be one of"),
        ("compression.type", "brotli", "String must be one of"),
        ("message.timestamp.type", "createtime", "String must be one of"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("unclean.leader.election.enable", "maybe", "Expected value to be either true or false"),
    ],
)
def test_validate_topic_config_rejects(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")) as raised:
        BrokerConfig().validate_topic_config(key, value)
    assert raised.value.error_code == ErrorCode.INVALID_CONFIG


def test_every_topic_key_has_a_default_and_known_synonyms() -> None:
    config = BrokerConfig()
    for key, known in TOPIC_KEYS.items():
        assert config.topic_config(key) is not None, key
        for broker_key, _ in known.synonyms:
            assert broker_key in BROKER_KEYS, (key, broker_key)


# dynamic broker configs and DescribeConfigs ------------------------------------------------------
def test_dynamic_broker_config_overrides_static_and_can_be_deleted() -> None:
    config = BrokerConfig({"log.retention.hours": "5"})
    config.set_broker_config("log.retention.ms", "1000")
    assert config.topic_config("retention.ms") == 1000
    entry = next(entry for entry in config.describe(["log.retention.ms"]))
    assert (entry.value, entry.source, entry.read_only) == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    config.delete_broker_config("log.retention.ms")
    assert config.topic_config("retention.ms") == 5 * 3_600_000


def test_node_dynamic_value_beats_cluster_default() -> None:
    config = BrokerConfig()
    config.set_broker_config("message.max.bytes", "2000", cluster_default=True)
    assert config.get_int("message.max.bytes") == 2000
    config.set_broker_config("message.max.bytes", "3000")
    assert config.get_int("message.max.bytes") == 3000
    sources = [synonym.source for synonym in config.describe(["message.max.bytes"])[0].synonyms]
    assert sources == [ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                       ConfigSource.DEFAULT_CONFIG]


@pytest.mark.parametrize(("changes", "cluster_default", "message"), [
    ({"log.dirs": "/x", "num.partitions": "3"}, False,
     "Cannot update these configs dynamically: Set(log.dirs, num.partitions)"),
    ({"log.retention.hours": "1"}, True, "Cannot update these configs dynamically: Set(log.retention.hours)"),
    ({"ssl.keystore.location": "/k"}, False,
     "These security configs can be dynamically updated only per-listener using the listener prefix: "
     "Set(ssl.keystore.location)"),
    ({"log.segment.bytes": "-5"}, False, "Invalid value -5 for configuration log.segment.bytes: Value must be at "
                                         "least 14"),
    ({"log.retention.ms": "soon"}, True, "Invalid value soon for configuration log.retention.ms: Not a number of "
                                         "type LONG"),
    ({"listener.name.external.ssl.keystore.type": "PEM", "sasl.kerberos.min.time.before.relogin": "x"}, False,
     "Invalid value x for configuration sasl.kerberos.min.time.before.relogin: Not a number of type LONG"),
    ({"sasl.kerberos.min.time.before.relogin": "58000"}, True,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(sasl.kerberos.min.time.before.relogin)"),
    ({"listener.name.external.ssl.keystore.location": "/k"}, True,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(listener.name.external.ssl.keystore.location)"),
])
def test_dynamic_broker_configs_are_refused_as_kafka_refuses_them(changes: dict[str, str], cluster_default: bool,
                                                                   message: str) -> None:
    config = BrokerConfig()
    with pytest.raises(ConfigError) as raised:
        config.alter_dynamic(changes, cluster_default=cluster_default)
    assert (raised.value.error_code, raised.value.message) == (ErrorCode.INVALID_REQUEST, message)
    assert config.dynamic_configs(cluster_default) == {}


def test_dynamic_broker_configs_kafka_accepts() -> None:
    config = BrokerConfig()
    config.alter_dynamic({"sasl.kerberos.min.time.before.relogin": "58000", "my.custom.key": "x",
                          "listener.name.external.ssl.keystore.location": "/k",
                          "listener.name.external.max.connections": "5"})
    config.alter_dynamic({"background.threads": "4", "listener.name.external.max.connections": "7",
                          "another.custom.key": "y"}, cluster_default=True)
    assert config.get_int("sasl.kerberos.min.time.before.relogin") == 58000
    assert config.get_int("background.threads") == 4
    entries = {entry.name: entry for entry in config.describe()}
    custom = entries["my.custom.key"]
    assert (custom.value, custom.sensitive, custom.type, custom.source) == (
        None, True, ConfigType.UNKNOWN, ConfigSource.DYNAMIC_BROKER_CONFIG)
    prefixed = entries["listener.name.external.ssl.keystore.location"]
    assert (prefixed.value, prefixed.type, prefixed.sensitive) == ("/k", ConfigType.STRING, False)
    assert entries["another.custom.key"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    relogin = entries["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source, relogin.read_only) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert config.alter_dynamic({"my.custom.key": None}, validate_only=True) == {
        "sasl.kerberos.min.time.before.relogin": "58000", "listener.name.external.ssl.keystore.location": "/k",
        "listener.name.external.max.connections": "5"}
    assert "my.custom.key" in config.dynamic_configs()  # validate_only changed nothing


def test_stored_dynamic_values_that_no_longer_pass_are_dropped_at_load() -> None:
    config = BrokerConfig()
    config.load_dynamic({"log.retention.ms": "1000", "num.partitions": "3", "log.segment.bytes": "x", "custom": "1"})
    assert config.dynamic_configs() == {"log.retention.ms": "1000", "custom": "1"}
    assert config.topic_config("retention.ms") == 1000


def test_describe_reports_sources_types_and_read_only() -> None:
    config = BrokerConfig({"num.partitions": "3"})
    entries = {entry.name: entry for entry in config.describe()}
    assert set(entries) == set(BROKER_KEYS)
    assert (entries["num.partitions"].value, entries["num.partitions"].source) == \
        ("3", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["num.partitions"].read_only is True
    assert entries["log.retention.bytes"].is_default and entries["log.retention.bytes"].value == "-1"
    assert entries["log.cleanup.policy"].type is ConfigType.LIST
    assert entries["log.retention.ms"].value is None  # unset, no default


def test_describe_topic_shows_override_and_synonyms() -> None:
    config = BrokerConfig({"log.retention.minutes": "10"})
    overridden = {entry.name: entry for entry in config.describe_topic({"retention.ms": "5"})}
    entry = overridden["retention.ms"]
    assert (entry.value, entry.source) == ("5", ConfigSource.TOPIC_CONFIG)
    assert [(synonym.name, synonym.source) for synonym in entry.synonyms] == [
        ("retention.ms", ConfigSource.TOPIC_CONFIG),
        ("log.retention.minutes", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG),
    ]
    inherited = {entry.name: entry for entry in config.describe_topic({})}["retention.ms"]
    assert (inherited.value, inherited.source) == ("600000", ConfigSource.STATIC_BROKER_CONFIG)
    assert inherited.read_only is False


# listeners --------------------------------------------------------------------------------------
def test_parse_listener() -> None:
    assert parse_listener("PLAINTEXT://127.0.0.1:0") == Listener("PLAINTEXT", "127.0.0.1", 0)
    assert parse_listener("plaintext://:9092") == Listener("PLAINTEXT", "", 9092)
    assert parse_listener("PLAINTEXT://[::1]:9092") == Listener("PLAINTEXT", "::1", 9092)
    assert str(Listener("PLAINTEXT", "::1", 9092)) == "PLAINTEXT://[::1]:9092"
    for bad in ("localhost:9092", "PLAINTEXT://host", "PLAINTEXT://host:99999"):
        with pytest.raises(ConfigError):
            parse_listener(bad)


def test_advertised_listeners_default_to_listeners_with_a_real_host() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    (advertised,) = config.advertised_listeners()
    assert advertised.host not in ("", "0.0.0.0") and advertised.port == 9092
    explicit = BrokerConfig({"listeners": "PLAINTEXT://:0", "advertised.listeners": "PLAINTEXT://kafka:19092"})
    assert explicit.advertised_listeners() == [Listener("PLAINTEXT", "kafka", 19092)]
    with pytest.raises(ConfigError, match="wildcard"):
        BrokerConfig({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})


def test_controller_listeners_are_not_served_and_unknown_protocols_are_refused() -> None:
    kraft = BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                          "controller.listener.names": "CONTROLLER",
                          "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"})
    assert [listener.name for listener in kraft.listeners()] == ["PLAINTEXT"]
    secured = BrokerConfig({"listeners": "SSL://:9093,SASL_SSL://:9094,INTERNAL://:9095",
                            "listener.security.protocol.map": "SSL:SSL,SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT"})
    assert [listener.name for listener in secured.listeners()] == ["SSL", "SASL_SSL", "INTERNAL"]
    assert secured.listener_security_protocols()["INTERNAL"] == "SASL_PLAINTEXT"
    with pytest.raises(ConfigError, match="not one of"):
        BrokerConfig({"listeners": "X://:9093", "listener.security.protocol.map": "X:KERBEROS"})


# read_properties --------------------------------------------------------------------------------
def test_read_properties_follows_java_rules(tmp_path: Path) -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "   \n"
        "plain=value\n"
        "  spaced   =   padded value  \n"
        "colon:value2\n"
        "whitespace value3\n"
        "continued=one,\\\n"
        "          two,\\\n"
        "          three\n"
        "escaped\\=key=tab\\there\n"
        "unicode=caf\\u00e9\n"
        "empty=\n"
        "trailing=backslash\\\\\n"
        "plain=later wins\n"
    )
    values = read_properties(write(tmp_path / "x.properties", text))
    assert values == {
        "plain": "later wins",
        "spaced": "padded value  ",
        "colon": "value2",
        "whitespace": "value3",
        "continued": "one,two,three",
        "escaped=key": "tab\there",
        "unicode": "café",
        "empty": "",
        "trailing": "backslash\\",
    }


def test_shipped_server_properties_loads() -> None:
    path = Path(__file__).resolve().parents[2] / "config" / "server.properties"
    config = BrokerConfig.load(path, {}, environ=NO_ENV)
    assert config.listeners() == [Listener("PLAINTEXT", "localhost", 9092)]
    assert config.data_dir() == Path("data")


# the command line -------------------------------------------------------------------------------
def test_cli_flags_and_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKALITE_LOG_DIRS", raising=False)
    args = _parse_args(["serve", "--port", "19092", "--data-dir", "./scratch-data", "num.partitions=3",
                        "--override", "log.retention.hours=1"])
    config = build_config(args)
    assert config.listeners() == [Listener("PLAINTEXT", "localhost", 19092)]
    assert config.data_dir() == Path("scratch-data")
    assert config.get_int("num.partitions") == 3
    assert config.get_int("log.retention.hours") == 1


def test_cli_serve_is_the_default_and_port_moves_the_advertised_twin() -> None:
    args = _parse_args(["--listeners", "PLAINTEXT://127.0.0.1:9092", "--memory", "--port", "0",
                        "advertised.listeners=PLAINTEXT://example:9092"])
    assert args.command == "serve"
    config = build_config(args)
    assert config.listeners() == [Listener("PLAINTEXT", "127.0.0.1", 0)]
    assert config.advertised_listeners() == [Listener("PLAINTEXT", "example", 0)]
    assert config.data_dir() is None


def test_cli_rejects_a_pair_without_equals() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        build_config(_parse_args(["serve", "num.partitions"]))


def test_every_key_is_honoured_or_says_why_not() -> None:
    """A key the code never reads must say so in the table (``inert``), so nothing is dropped in silence.

    A broker key counts as read when the code names it, or it is the broker-level default of a topic
    config the code reads, or a settings dataclass field mirrors it; a topic config, when the code
    reads its ``TopicConfig`` attribute or names it."""
    import re

    import kafkalite.broker.config as config_module

    root = Path(__file__).resolve().parents[2]
    config_package = Path(config_module.__file__).parent
    sources = [path for path in (root / "kafkalite").rglob("*.py")
               if "messages" not in path.parts and config_package not in path.parents]
    code = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    table = "\n".join(path.read_text(encoding="utf-8") for path in config_package.glob("*.py"))
    read_topic_keys = {key for key in TOPIC_KEYS
                       if re.search(rf"\b{key.replace('.', '_')}\b", code) or f'"{key}"' in code}
    topic_defaults = {broker_key for key in read_topic_keys for broker_key, _ in TOPIC_KEYS[key].synonyms}
    silent = []
    for key in CONFIG_KEYS:
        if key.inert is not None:
            continue
        if key.per_topic:
            honoured = key.name in read_topic_keys
        else:
            honoured = (f'"{key.name}"' in code or key.name in topic_defaults or key.alias_of is not None
                        or table.count(f'"{key.name}"') > 1)  # read by BrokerConfig itself (listeners, log.dir...)
        if not honoured:
            silent.append(key.name)
    assert silent == []


def test_an_unknown_key_warns_once_with_the_nearest_known_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="kafkalite.config"):
        BrokerConfig({"log.retention.hourz": "5"})
        BrokerConfig({"log.retention.hourz": "5"})
        BrokerConfig({"listener.name.internal.ssl.keystore.location": "/keys"})  # a per-listener key
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == ["unknown config key log.retention.hourz, kept without effect; did you mean "
                        "log.retention.hours?"]


def test_a_bad_value_names_key_value_and_reason() -> None:
    with pytest.raises(ConfigError) as raised:
        BrokerConfig({"num.partitions": "zero"})
    assert str(raised.value) == "Invalid value zero for configuration num.partitions: Not a number of type INT"


def test_the_clis_and_the_generators_variables_are_not_broker_configs() -> None:
    config = BrokerConfig.load(None, {}, environ={"KAFKALITE_BOOTSTRAP_SERVER": "elsewhere:9092",
                                                 "KAFKALITE_SCHEMAS": "/schemas", "KAFKALITE_NUM_PARTITIONS": "4"})
    assert config.get_int("num.partitions") == 4
    with pytest.raises(KeyError):
        config.get("bootstrap.server")
