"""The ``kafkalite`` command's helpers and argument handling, without a broker.

Parsing of arguments and input lines, the tables and JSON it prints, the reset-offsets plan, and
click's answers to bad arguments (usage line, exit status 2). Runs against a cluster are in
``tests/integration/test_cli.py``.
"""

from __future__ import annotations

import datetime
import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalite.cli import runs_the_broker
from kafkalite.cli.app import cli
from kafkalite.cli.common import ClientSettings
from kafkalite.cli.groups import GroupReport, offset_rows
from kafkalite.cli.output import cell, kafka_uuid, rate, render_json, render_table
from kafkalite.cli.parsing import (
    LineSplitter,
    parse_datetime_ms,
    parse_pair,
    parse_properties,
    parse_topic_partitions,
    split_key,
    unescape,
)
from kafkalite.cli.reset import PartitionOffsets, ResetKind, ResetStrategy, new_offset, plan
from kafkalite.cli.topics import non_default_configs
from kafkalite.client.admin_types import ConfigEntry, GroupDescription, MemberDescription
from kafkalite.client.metadata import TopicPartition

# --- which arguments run the broker ----------------------------------------------------------------


@pytest.mark.parametrize(("arguments", "serve"), [
    ([], True), (["serve", "--port", "0"], True), (["--config", "x.properties"], True), (["num.partitions=3"], True),
    (["--memory"], True), (["topics", "list"], False), (["--help"], False), (["-h"], False), (["--version"], False),
    (["ping"], False), (["topicz"], False),
])
def test_serve_is_the_default_command(arguments: list[str], serve: bool) -> None:
    assert runs_the_broker(arguments) is serve


# --- parsing ---------------------------------------------------------------------------------------


def test_pairs_keep_the_value_as_given() -> None:
    assert parse_pair("retention.ms=60000") == ("retention.ms", "60000")
    assert parse_pair(" key =a=b ") == ("key", "a=b ")
    assert parse_pair("empty=") == ("empty", "")
    for bad in ("novalue", "=value", ""):
        with pytest.raises(ValueError, match="expected key=value"):
            parse_pair(bad)


def test_properties_files_as_java_reads_the_simple_ones() -> None:
    text = "# a comment\n! another\n\nbootstrap.servers=localhost:9092\nclient.id : tools\nlinger.ms = 5\n"
    assert parse_properties(text) == {"bootstrap.servers": "localhost:9092", "client.id": "tools", "linger.ms": "5"}
    with pytest.raises(ValueError, match="line 1"):
        parse_properties("just words")


def test_topic_partition_specs() -> None:
    assert parse_topic_partitions("orders") == ("orders", None)
    assert parse_topic_partitions("orders:2,0,2") == ("orders", (0, 2))
    assert parse_topic_partitions("a.b_c-1:7") == ("a.b_c-1", (7,))
    for bad in ("orders:", "orders:x", "orders:-1", "bad topic", ":1"):
        with pytest.raises(ValueError):
            parse_topic_partitions(bad)


def test_datetimes_with_and_without_a_zone() -> None:
    assert parse_datetime_ms("2024-05-01T12:00:00Z") == 1714564800000
    assert parse_datetime_ms("2024-05-01T12:00:00.250+02:00") == 1714557600250
    two_hours_east = datetime.timezone(datetime.timedelta(hours=2))
    assert parse_datetime_ms("2024-05-01T12:00:00.000", two_hours_east) == 1714557600000
    assert parse_datetime_ms("2024-05-01", datetime.UTC) == 1714521600000
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_datetime_ms("yesterday")


def test_separators_take_kcat_escapes() -> None:
    assert unescape(":") == b":"
    assert unescape(r"\t") == b"\t"
    assert unescape(r"\x1f|") == b"\x1f|"
    assert unescape(r"\\") == b"\\"
    assert unescape("→") == "→".encode()
    assert unescape(r"\q") == b"\\q"
    with pytest.raises(ValueError, match="empty"):
        unescape("")


def test_a_line_is_cut_at_the_first_separator() -> None:
    assert split_key(b"user-1:a:b", b":", 1) == (b"user-1", b"a:b")
    assert split_key(b":value", b":", 1) == (b"", b"value")
    with pytest.raises(ValueError, match="line 7 has no key separator ':'"):
        split_key(b"no separator", b":", 7)


def test_lines_are_cut_across_chunks() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"one\ntw") == [b"one"]
    assert splitter.feed(b"o\r\n") == [b"two"]
    assert splitter.feed(b"\n") == [b""]  # an empty line is an empty record, as kafka-console-producer sends it
    assert splitter.feed(b"thr") == []
    assert splitter.feed(b"ee") == []
    assert splitter.finish() == [b"three"]
    assert splitter.finish() == []
    whole = LineSplitter()
    assert whole.feed(b"a\nb\n") == [b"a", b"b"] and whole.finish() == []


# --- output ----------------------------------------------------------------------------------------


def test_tables_are_aligned_without_trailing_blanks() -> None:
    table = render_table(["TOPIC", "PARTITION", "LAG"], [("orders", 0, None), ("a", 10, 5)])
    assert table.splitlines() == [
        "TOPIC   PARTITION  LAG",
        "orders  0          -",
        "a       10         5",
    ]
    assert render_table(["A", "B"], [], indent="  ") == "  A  B"
    assert cell((1, 2, 3)) == "1,2,3" and cell(None) == "-" and cell("x") == "x"


def test_topic_ids_print_as_kafka_prints_them() -> None:
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert kafka_uuid(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's Uuid.ONE_UUID
    assert kafka_uuid(uuid.UUID(bytes=b"\xff" * 16)) == "_____________________w"  # URL-safe, unpadded
    assert kafka_uuid(None) is None


def test_rates_and_json() -> None:
    assert rate(1000, 0.5) == "2,000/s"
    assert rate(5, 0) == "-/s"
    assert json.loads(render_json({"topic": "é", "lag": None})) == {"topic": "é", "lag": None}


def test_non_default_configs_are_what_kafka_topics_prints() -> None:
    entries = {
        "retention.ms": ConfigEntry("retention.ms", "60000", source=1),
        "segment.bytes": ConfigEntry("segment.bytes", "1073741824", source=4),  # set in server.properties
        "cleanup.policy": ConfigEntry("cleanup.policy", "delete", source=5),
        "old.v0.default": ConfigEntry("old.v0.default", "x", is_default=True),
        "password": ConfigEntry("password", None, source=1, is_sensitive=True),
    }
    assert non_default_configs(entries) == {"password": None, "retention.ms": "60000", "segment.bytes": "1073741824"}


def test_group_rows_as_kafka_consumer_groups_prints_them() -> None:
    first, second = TopicPartition("orders", 0), TopicPartition("orders", 1)
    member = MemberDescription("consumer-1-abc", None, "consumer-1", "/127.0.0.1", (second,))
    idle = MemberDescription("consumer-2-def", None, "consumer-2", "/127.0.0.1", ())
    report = GroupReport(GroupDescription("g", None, "Stable", "consumer", "range", (member, idle)),
                         committed={first: 4}, log_end={first: 10, second: 3})
    assert offset_rows(report) == [
        {"topic": "orders", "partition": 0, "current_offset": 4, "log_end_offset": 10, "lag": 6,
         "member_id": None, "host": None, "client_id": None},
        {"topic": "orders", "partition": 1, "current_offset": None, "log_end_offset": 3, "lag": None,
         "member_id": "consumer-1-abc", "host": "/127.0.0.1", "client_id": "consumer-1"},
        {"topic": None, "partition": None, "current_offset": None, "log_end_offset": None, "lag": None,
         "member_id": "consumer-2-def", "host": "/127.0.0.1", "client_id": "consumer-2"},
    ]
    assert report.exists
    assert not GroupReport(GroupDescription("gone", None, "Dead")).exists
    assert GroupReport(GroupDescription("offsets-only", None, "Dead"), committed={first: 1}).exists


# --- reset-offsets plan ----------------------------------------------------------------------------


def test_reset_strategies_stay_within_the_log() -> None:
    offsets = PartitionOffsets(earliest=10, latest=100, committed=50, by_time=70)
    assert new_offset(ResetStrategy(ResetKind.EARLIEST), offsets, "t-0") == 10
    assert new_offset(ResetStrategy(ResetKind.LATEST), offsets, "t-0") == 100
    assert new_offset(ResetStrategy(ResetKind.OFFSET, 42), offsets, "t-0") == 42
    assert new_offset(ResetStrategy(ResetKind.OFFSET, 5), offsets, "t-0") == 10
    assert new_offset(ResetStrategy(ResetKind.OFFSET, 500), offsets, "t-0") == 100
    assert new_offset(ResetStrategy(ResetKind.SHIFT, -20), offsets, "t-0") == 30
    assert new_offset(ResetStrategy(ResetKind.SHIFT, -45), offsets, "t-0") == 10
    assert new_offset(ResetStrategy(ResetKind.SHIFT, 80), offsets, "t-0") == 100
    assert new_offset(ResetStrategy(ResetKind.DATETIME, 1), offsets, "t-0") == 70
    no_recent_record = PartitionOffsets(earliest=10, latest=100, by_time=-1)
    assert new_offset(ResetStrategy(ResetKind.DATETIME, 1), no_recent_record, "t-0") == 100


def test_shifting_needs_a_committed_offset() -> None:
    with pytest.raises(ValueError, match="partition t-1 has no committed offset"):
        plan(ResetStrategy(ResetKind.SHIFT, 1), {"t-0": PartitionOffsets(0, 5, 2), "t-1": PartitionOffsets(0, 5)})
    assert plan(ResetStrategy(ResetKind.EARLIEST), {"b": PartitionOffsets(3, 5), "a": PartitionOffsets(1, 5)}) == {
        "b": 3, "a": 1}


# --- client settings -------------------------------------------------------------------------------


def test_command_configs_come_between_the_defaults_and_the_flags() -> None:
    settings = ClientSettings("broker:9092", {"client.id": "mine", "acks": "1", "linger.ms": "20"}, 2.5)
    admin = settings.admin_config()
    assert admin["bootstrap.servers"] == "broker:9092" and admin["client.id"] == "mine"
    assert admin["default.api.timeout.ms"] == 2500 and admin["request.timeout.ms"] == 2500
    producer = settings.producer_config({"acks": "all", "compression.type": None})
    assert producer["acks"] == "all" and producer["linger.ms"] == "20" and producer["max.block.ms"] == 2500
    assert "compression.type" not in producer


# --- arguments click refuses -----------------------------------------------------------------------


@pytest.mark.parametrize("arguments", [
    ["topics", "create"],
    ["topics", "create", "-t", "x", "--partitions", "0"],
    ["topics", "create", "-t", "x", "--config", "retention.ms"],
    ["topics", "alter", "-t", "x"],
    ["topicz"],
    ["produce", "-t", "x", "--acks", "2"],
    ["produce", "-t", "x", "-H", "novalue"],
    ["groups", "describe"],
    ["groups", "reset-offsets", "-g", "g", "--topic", "t"],
    ["groups", "reset-offsets", "-g", "g", "--topic", "t", "--to-earliest", "--to-latest"],
    ["groups", "reset-offsets", "-g", "g", "--to-earliest"],
    ["groups", "reset-offsets", "-g", "g", "--topic", "t:x", "--to-earliest"],
    ["groups", "reset-offsets", "-g", "g", "--all-topics", "--to-datetime", "soon"],
    ["groups", "reset-offsets", "-g", "g", "--all-topics", "--to-latest", "--execute", "--dry-run"],
    ["check", "-X", "nonsense"],
    ["check", "--timeout", "0"],
])
def test_bad_arguments_exit_2_with_the_usage_line(arguments: list[str]) -> None:
    result = CliRunner().invoke(cli, arguments, prog_name="kafkalite")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Usage: kafkalite")
    assert "Error:" in result.output and "Traceback" not in result.output


def test_every_command_has_help() -> None:
    runner = CliRunner()
    top = runner.invoke(cli, ["--help"], prog_name="kafkalite")
    assert top.exit_code == 0
    for name in ("check", "groups", "produce", "serve", "topics"):
        assert f"\n  {name} " in top.output
    for arguments in (["check"], ["ping"], ["topics", "list"], ["topics", "create"], ["topics", "describe"],
                      ["topics", "alter"], ["topics", "delete"], ["produce"], ["groups", "list"],
                      ["groups", "describe"], ["groups", "reset-offsets"], ["groups", "delete"]):
        result = runner.invoke(cli, [*arguments, "--help"], prog_name="kafkalite")
        assert result.exit_code == 0 and "Usage: kafkalite" in result.output, arguments


def test_a_command_config_file(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("request.timeout.ms=1234\n", encoding="utf-8")
    seen: dict[str, ClientSettings] = {}

    import click

    from kafkalite.cli.common import client_options

    @click.command()
    @client_options()
    def show(settings: ClientSettings) -> None:
        seen["settings"] = settings

    result = CliRunner().invoke(show, ["-X", str(properties), "-X", "client.id=x"],
                                env={"KAFKALITE_BOOTSTRAP_SERVER": "elsewhere:19092"})
    assert result.exit_code == 0, result.output
    assert seen["settings"] == ClientSettings("elsewhere:19092", {"request.timeout.ms": "1234", "client.id": "x"}, 10.0)
