"""The ``kafkalite`` command run as a user runs it: a subprocess against a broker over TCP.

What the commands did is checked with other clients (confluent-kafka reads the records back and the
committed offsets; it also makes the groups), not with the command's own output alone. The last
tests run the command against librdkafka's mock cluster: a Kafka nobody here wrote.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_MS = (int(time.time()) - 3600) * 1000  # timestamps of the records a test writes (recent: kept by retention)
TIMEOUT_S = 60.0
WaitUntil = Callable[..., Any]


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def kafkalite(*arguments: str, input: str | None = None, python_flags: tuple[str, ...] = ()) -> Run:
    """``python -m kafkalite ARGUMENTS`` with this checkout's code and no KAFKALITE_* settings of the caller."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("KAFKALITE_")}
    environment["PYTHONPATH"] = str(REPO_ROOT)
    completed = subprocess.run([sys.executable, *python_flags, "-m", "kafkalite", *arguments], input=input,
                               capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO_ROOT, env=environment,
                               check=False)
    return Run(completed.returncode, completed.stdout, completed.stderr)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def one_error_line(run: Run) -> str:
    """A failure as users must see it: exit status 1, nothing on stdout, one ``Error:`` line on stderr."""
    assert run.code == 1, run
    assert "Traceback" not in run.stderr and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), run.stderr
    return lines[0]


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        answers = consumer.committed([TopicPartition(topic, index) for index in range(partitions)], timeout=TIMEOUT_S)
        return {answer.partition: answer.offset for answer in answers if answer.offset >= 0}
    finally:
        consumer.close()


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets for a group without joining it (as an admin tool or a stopped application leaves them)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, index, offset) for index, offset in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, partitions: int, count: int, wait_until: WaitUntil) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, index, OFFSET_BEGINNING) for index in range(partitions)])
    records: list[Any] = []

    def all_read() -> bool:
        for message in consumer.consume(1000, timeout=0.2):
            assert message.error() is None, message.error()
            records.append(message)
        return len(records) >= count

    try:
        wait_until(all_read, TIMEOUT_S, f"{count} records of {topic} were not read back")
    finally:
        consumer.close()
    return records


# --- check -----------------------------------------------------------------------------------------


def test_check_answers_with_the_cluster_and_fails_in_one_line_on_a_closed_port(broker: Any) -> None:
    answered = kafkalite("check", "-b", broker.bootstrap)
    assert answered.code == 0, answered
    lines = answered.stdout.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(rf"cluster \S+ answered: 1 broker \(1 at 127\.0\.0\.1:{broker.port}\), "
                                            r"controller 1", lines[0]), lines
    described = kafkalite("ping", "-b", broker.bootstrap, "--json").json
    assert described["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}]

    with socket.socket() as probe:  # a port nothing listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    refused = kafkalite("check", "-b", f"127.0.0.1:{closed_port}", "--timeout", "1")
    assert "Connection refused" in one_error_line(refused)


# --- topics ----------------------------------------------------------------------------------------


def test_topics_create_list_describe_alter_delete(broker: Any) -> None:
    name = unique("cli-topic")
    bootstrap = ("-b", broker.bootstrap)
    created = kafkalite("topics", "create", *bootstrap, "-t", name, "--partitions", "3",
                        "--config", "retention.ms=60000", "--config", "cleanup.policy=compact")
    assert (created.code, created.stdout) == (0, f"Created topic {name}.\n"), created
    assert "TOPIC_ALREADY_EXISTS" in one_error_line(kafkalite("topics", "create", *bootstrap, "-t", name))
    assert kafkalite("topics", "create", *bootstrap, "-t", name, "--if-not-exists").code == 0

    listed = kafkalite("topics", "list", *bootstrap)
    assert listed.code == 0 and table(listed.stdout)[0] == ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR"]
    assert [name, "3", "1"] in table(listed.stdout)
    assert {"topic": name, "partitions": 3, "replication_factor": 1, "internal": False} in kafkalite(
        "topics", "list", *bootstrap, "--json").json

    described = kafkalite("topics", "describe", *bootstrap, "-t", name)
    assert described.code == 0, described
    header, configs, *rows = described.stdout.strip().splitlines()
    assert re.fullmatch(rf"Topic: {name}  TopicId: [\w-]{{22}}  PartitionCount: 3  ReplicationFactor: 1", header)
    assert configs == "Configs: cleanup.policy=compact, retention.ms=60000"
    assert table("\n".join(rows)) == [["PARTITION", "LEADER", "REPLICAS", "ISR"],
                                      ["0", "1", "1", "1"], ["1", "1", "1", "1"], ["2", "1", "1", "1"]]

    altered = kafkalite("topics", "alter", *bootstrap, "-t", name, "--partitions", "5",
                        "--config", "retention.ms=1000000", "--delete-config", "cleanup.policy")
    assert altered.code == 0, altered
    [document] = kafkalite("topics", "describe", *bootstrap, "-t", name, "--json").json
    assert document["partition_count"] == 5 and document["configs"] == {"retention.ms": "1000000"}
    assert [(item["partition"], item["leader"], item["replicas"], item["isr"]) for item in document["partitions"]] == [
        (index, 1, [1], [1]) for index in range(5)]
    assert "INVALID_PARTITIONS" in one_error_line(kafkalite("topics", "alter", *bootstrap, "-t", name,
                                                            "--partitions", "2"))

    deleted = kafkalite("topics", "delete", *bootstrap, "-t", name)
    assert (deleted.code, deleted.stdout) == (0, f"Deleted topic {name}.\n"), deleted
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_error_line(kafkalite("topics", "describe", *bootstrap, "-t", name))
    assert kafkalite("topics", "delete", *bootstrap, "-t", name, "--if-exists").code == 0


# --- produce ---------------------------------------------------------------------------------------


def test_produce_a_file_with_keys_and_headers_then_read_it_back(broker: Any, tmp_path: Path,
                                                                 wait_until: WaitUntil) -> None:
    name = unique("cli-produce")
    assert kafkalite("topics", "create", "-b", broker.bootstrap, "-t", name, "--partitions", "3").code == 0
    count = 3000
    records = tmp_path / "records.txt"
    records.write_text("".join(f"user-{index % 7}\tvalue {index}: with a colon\n" for index in range(count)),
                       encoding="utf-8")
    produced = kafkalite("produce", "-b", broker.bootstrap, "-t", name, "--file", str(records), "-K", r"\t",
                         "-H", "source=cli", "-H", "trace=a=b", "--compression", "lz4")
    assert produced.code == 0, produced
    last_line = produced.stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"Produced {count} records to {name} in \d+\.\d\d s \([\d,]+ records/s\)\.", last_line)
    print(last_line)

    messages = read_all(broker.bootstrap, name, 3, count, wait_until)
    assert len(messages) == count
    partitions_of_key: dict[bytes, set[int]] = {}
    for message in messages:
        partitions_of_key.setdefault(message.key(), set()).add(message.partition())
        assert message.headers() == [("source", b"cli"), ("trace", b"a=b")]
    assert sorted(partitions_of_key) == [f"user-{index}".encode() for index in range(7)]
    assert all(len(partitions) == 1 for partitions in partitions_of_key.values())  # a key keeps its partition
    assert len(set().union(*partitions_of_key.values())) > 1
    by_value = {message.value().decode(): message.key() for message in messages}
    assert by_value["value 10: with a colon"] == b"user-3"

    stdin_name = unique("cli-stdin")
    assert kafkalite("topics", "create", "-b", broker.bootstrap, "-t", stdin_name, "--partitions", "3").code == 0
    piped = kafkalite("produce", "-b", broker.bootstrap, "-t", stdin_name, "--partition", "2", "--acks", "1",
                      input="first\n\nthird")
    assert piped.code == 0 and "Produced 3 records" in piped.stderr, piped
    back = read_all(broker.bootstrap, stdin_name, 3, 3, wait_until)
    assert [(message.partition(), message.key(), message.value()) for message in back] == [
        (2, None, b"first"), (2, None, b""), (2, None, b"third")]


def test_produce_fails_in_one_line(broker: Any) -> None:
    name = unique("cli-produce-errors")
    assert kafkalite("topics", "create", "-b", broker.bootstrap, "-t", name, "--partitions", "2").code == 0
    out_of_range = kafkalite("produce", "-b", broker.bootstrap, "-t", name, "-p", "7", input="x\n")
    assert "partition 7 is not in the range [0, 2)" in one_error_line(out_of_range)
    no_separator = kafkalite("produce", "-b", broker.bootstrap, "-t", name, "-K", ":", input="k:v\nno key\n")
    assert "line 2 has no key separator ':'" in one_error_line(no_separator)
    unknown_config = kafkalite("produce", "-b", broker.bootstrap, "-t", name, "-X", "no.such.key=1", input="x\n")
    assert "no.such.key" in one_error_line(unknown_config)


# --- consume ---------------------------------------------------------------------------------------


def _produced(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None, list[Any]]],
              base_ms: int) -> None:
    """Each record's timestamp is ``base_ms`` plus its value's length."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, key, value, headers in records:
        producer.produce(topic, value, key, partition=partition, headers=headers, timestamp=base_ms + len(value or b""))
    assert producer.flush(TIMEOUT_S) == 0


def test_consume_with_a_format_json_offsets_and_timestamps(broker: Any) -> None:
    name = unique("cli-consume")
    bootstrap = ("-b", broker.bootstrap, "-t", name)
    assert kafkalite("topics", "create", "-b", broker.bootstrap, "-t", name, "--partitions", "2").code == 0
    _produced(broker.bootstrap, name, [(0, b"k0", b"first", [("h", b"1")]), (0, None, b"second!", []),
                                       (1, b"k1", b"\xff\x00binary", [("a", b"x"), ("b", None)]),
                                       (1, b"k2", None, [])], BASE_MS)
    template = r"%t|%p|%o|%k|%v|%T|%h|%K|%S|%%\n"
    formatted = kafkalite("consume", *bootstrap, "-p", "0", "--from-beginning", "-e", "-f", template)
    assert formatted.code == 0, formatted
    assert formatted.stderr.strip().splitlines()[-1] == "Processed a total of 2 messages"
    assert formatted.stdout.splitlines() == [f"{name}|0|0|k0|first|{BASE_MS + 5}|h=1|2|5|%",
                                             f"{name}|0|1||second!|{BASE_MS + 7}||-1|7|%"]
    null_value = kafkalite("consume", *bootstrap, "-p", "1", "-o", "1", "-e", "-f", template)
    assert null_value.stdout == f"{name}|1|1|k2||{BASE_MS}||2|-1|%\n", null_value

    as_json = kafkalite("consume", *bootstrap, "-p", "1", "-o", "earliest", "-e", "--json")
    items = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(item["offset"], item["key"], item["value"]) for item in items] == [(0, "k1", None), (1, "k2", None)]
    assert items[0]["value_base64"] == "/wBiaW5hcnk=" and "value_base64" not in items[1]
    assert items[0]["headers"] == [{"key": "a", "value": "x"}, {"key": "b", "value": None}]

    last = kafkalite("consume", *bootstrap, "-o", "-1", "-e", "-f", r"%p:%o\n")
    assert sorted(last.stdout.split()) == ["0:1", "1:1"], last
    by_time = kafkalite("consume", *bootstrap, "-o", f"@{BASE_MS + 6}", "-e", "-f", r"%p:%o\n")
    assert sorted(by_time.stdout.split()) == ["0:1", "1:0", "1:1"], by_time  # from the first at or after it
    two = kafkalite("consume", *bootstrap, "-p", "0", "--from-beginning", "-n", "1")
    assert (two.code, two.stdout) == (0, "first\n"), two


def test_consume_with_a_group_commits_what_it_printed(broker: Any) -> None:
    topic = _topic_with_records(broker.bootstrap, {0: 6, 1: 6, 2: 6})
    group = unique("cli-consume-group")
    first = kafkalite("consume", "-b", broker.bootstrap, "-t", topic, "-g", group, "--from-beginning", "-n", "5")
    assert first.code == 0 and len(first.stdout.splitlines()) == 5, first
    assert sum(committed_offsets(broker.bootstrap, group, topic, 3).values()) == 5
    rest = kafkalite("consume", "-b", broker.bootstrap, "-t", topic, "-g", group, "-e")
    assert rest.code == 0, rest
    assert sorted(first.stdout.split() + rest.stdout.split()) == sorted(f"r{index}" for index in range(6)
                                                                         for _ in range(3))
    assert committed_offsets(broker.bootstrap, group, topic, 3) == {0: 6, 1: 6, 2: 6}


def test_consume_read_committed_skips_aborted_transactions(broker: Any) -> None:
    name = unique("cli-consume-txn")
    assert kafkalite("topics", "create", "-b", broker.bootstrap, "-t", name).code == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("cli-txn")})
    producer.init_transactions(TIMEOUT_S)
    for value, commit_it in ((b"kept", True), (b"aborted", False), (b"kept too", True)):
        producer.begin_transaction()
        producer.produce(name, value)
        producer.flush(TIMEOUT_S)
        (producer.commit_transaction if commit_it else producer.abort_transaction)(TIMEOUT_S)
    committed = kafkalite("consume", "-b", broker.bootstrap, "-t", name, "--from-beginning", "-e",
                          "--isolation-level", "read_committed")
    assert committed.stdout.splitlines() == ["kept", "kept too"], committed
    everything = kafkalite("consume", "-b", broker.bootstrap, "-t", name, "--from-beginning", "-e")
    assert everything.stdout.splitlines() == ["kept", "aborted", "kept too"], everything


def test_consume_fails_in_one_line(broker: Any) -> None:
    name = unique("cli-consume-errors")
    assert kafkalite("topics", "create", "-b", broker.bootstrap, "-t", name, "--partitions", "2").code == 0
    assert "has no partition 7" in one_error_line(kafkalite("consume", "-b", broker.bootstrap, "-t", name, "-p", "7"))
    bad_format = kafkalite("consume", "-b", broker.bootstrap, "-t", name, "-f", "%x")
    assert bad_format.code == 2 and "unknown format code %x" in bad_format.stderr
    group_offset = kafkalite("consume", "-b", broker.bootstrap, "-t", name, "-g", "g", "-o", "5")
    assert group_offset.code == 2 and "with --group, --offset is earliest or latest" in group_offset.stderr
    nothing = kafkalite("consume", "-b", broker.bootstrap)
    assert nothing.code == 2 and "name a topic" in nothing.stderr


# --- groups ----------------------------------------------------------------------------------------


def _topic_with_records(bootstrap: str, per_partition: dict[int, int]) -> str:
    name = unique("cli-group-topic")
    assert kafkalite("topics", "create", "-b", bootstrap, "-t", name, "--partitions", str(len(per_partition))).code == 0
    for partition, count in per_partition.items():
        run = kafkalite("produce", "-b", bootstrap, "-t", name, "-p", str(partition),
                        input="".join(f"r{index}\n" for index in range(count)))
        assert run.code == 0, run
    return name


def test_groups_list_and_describe_with_lag(broker: Any, wait_until: WaitUntil) -> None:
    topic = _topic_with_records(broker.bootstrap, {0: 10, 1: 4})
    idle_group, active_group = unique("cli-idle"), unique("cli-active")
    commit(broker.bootstrap, idle_group, topic, {0: 6, 1: 4})

    described = kafkalite("groups", "describe", "-b", broker.bootstrap, "-g", idle_group)
    assert described.code == 0, described
    note, *rows = described.stdout.strip().splitlines()
    assert note == f"Consumer group '{idle_group}' has no active members."
    assert table("\n".join(rows)) == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
        [idle_group, topic, "0", "6", "10", "4", "-", "-", "-"],
        [idle_group, topic, "1", "4", "4", "0", "-", "-", "-"]]

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": active_group, "client.id": "cli-test",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(0.1) is not None and len(consumer.assignment()) == 2, TIMEOUT_S,
                   "the consumer got no assignment")
        consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        [group] = kafkalite("groups", "describe", "-b", broker.bootstrap, "-g", active_group, "--json").json
        assert group["state"] == "Stable" and group["protocol_type"] == "consumer"
        [member] = group["members"]
        assert member["client_id"] == "cli-test"
        assert member["assignment"] == [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]
        assert [(row["partition"], row["current_offset"], row["log_end_offset"], row["lag"], row["member_id"])
                for row in group["offsets"]] == [(0, 3, 10, 7, member["member_id"]), (1, None, 4, None,
                                                                                     member["member_id"])]
        people = kafkalite("groups", "describe", "-b", broker.bootstrap, "-g", active_group)
        assert [active_group, topic, "0", "3", "10", "7", member["member_id"]] == table(people.stdout)[1][:7]
        members = kafkalite("groups", "describe", "-b", broker.bootstrap, "-g", active_group, "--members")
        assert table(members.stdout)[1][-2:] == ["2", f"{topic}(0,1)"]

        listed = kafkalite("groups", "list", "-b", broker.bootstrap, "--json").json
        states = {item["group"]: item["state"] for item in listed}
        assert states[idle_group] == "Empty" and states[active_group] == "Stable"
        assert [idle_group, "classic"] == next(row[:2] for row in table(
            kafkalite("groups", "list", "-b", broker.bootstrap).stdout) if row[0] == idle_group)

        refused = kafkalite("groups", "reset-offsets", "-b", broker.bootstrap, "-g", active_group, "--topic", topic,
                            "--to-earliest", "--execute")
        assert "its state is Stable" in one_error_line(refused)
        assert committed_offsets(broker.bootstrap, active_group, topic, 2) == {0: 3}
    finally:
        consumer.close()

    assert "does not exist" in one_error_line(kafkalite("groups", "describe", "-b", broker.bootstrap,
                                                        "-g", unique("no-such-group")))


def test_reset_offsets_dry_run_then_execute(broker: Any) -> None:
    topic = _topic_with_records(broker.bootstrap, {0: 10, 1: 10})
    group = unique("cli-reset")
    commit(broker.bootstrap, group, topic, {0: 8, 1: 5})
    base = ("groups", "reset-offsets", "-b", broker.bootstrap, "-g", group)

    dry = kafkalite(*base, "--topic", topic, "--to-earliest")
    assert dry.code == 0, dry
    assert table(dry.stdout) == [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                                 [group, topic, "0", "8", "0"], [group, topic, "1", "5", "0"]]
    assert "Dry run: nothing changed" in dry.stderr
    assert committed_offsets(broker.bootstrap, group, topic, 2) == {0: 8, 1: 5}

    shifted = kafkalite(*base, "--all-topics", "--shift-by", "-3", "--execute")
    assert shifted.code == 0 and "were reset" in shifted.stderr, shifted
    assert committed_offsets(broker.bootstrap, group, topic, 2) == {0: 5, 1: 2}

    one_partition = kafkalite(*base, "--topic", f"{topic}:1", "--to-offset", "100", "--execute", "--json")
    assert one_partition.json["offsets"] == [{"topic": topic, "partition": 1, "current_offset": 2,
                                              "new_offset": 10}]  # clamped to the log end offset
    assert committed_offsets(broker.bootstrap, group, topic, 2) == {0: 5, 1: 10}

    future = kafkalite(*base, "--topic", topic, "--to-datetime", "2999-01-01T00:00:00Z", "--execute")
    assert future.code == 0, future
    assert committed_offsets(broker.bootstrap, group, topic, 2) == {0: 10, 1: 10}
    past = kafkalite(*base, "--topic", topic, "--to-datetime", "2000-01-01T00:00:00.000", "--execute")
    assert past.code == 0, past
    assert committed_offsets(broker.bootstrap, group, topic, 2) == {0: 0, 1: 0}

    missing = kafkalite(*base, "--topic", f"{topic}:5", "--to-earliest")
    assert "has no partition 5" in one_error_line(missing)

    deleted = kafkalite("groups", "delete", "-b", broker.bootstrap, "-g", group)
    assert (deleted.code, deleted.stdout) == (0, f"Deleted group {group}.\n"), deleted
    assert "GROUP_ID_NOT_FOUND" in one_error_line(kafkalite("groups", "delete", "-b", broker.bootstrap, "-g", group))


# --- arguments, help and start-up ------------------------------------------------------------------


def test_bad_arguments_exit_2_with_the_usage_line() -> None:
    missing = kafkalite("topics", "create")
    assert missing.code == 2 and missing.stdout == ""
    assert missing.stderr.startswith("Usage: kafkalite topics create [OPTIONS]")
    assert "Error: Missing option '--topic'" in missing.stderr and "Traceback" not in missing.stderr
    typo = kafkalite("topicz", "list")
    assert typo.code == 2 and "No such command 'topicz'" in typo.stderr


def test_help_lists_every_command() -> None:
    top = kafkalite("--help")
    assert top.code == 0
    commands = re.findall(r"^  (\w[\w-]*) ", top.stdout.split("Commands:")[1], re.MULTILINE)
    assert commands == ["check", "consume", "faults", "groups", "produce", "serve", "topics"]
    serve = kafkalite("serve", "--help")
    assert serve.code == 0 and "--advertised-listeners" in serve.stdout and "--memory" in serve.stdout


def test_serve_imports_neither_click_nor_the_client() -> None:
    run = kafkalite("serve", "--help", python_flags=("-X", "importtime"))
    assert run.code == 0
    imported = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "kafkalite.cli.serve" in imported
    unwanted = ("click", "kafkalite.client", "kafkalite.cli.app")
    assert not {name for name in imported if name in unwanted or name.startswith(unwanted[1] + ".")}


# --- any Kafka cluster -----------------------------------------------------------------------------


def test_against_librdkafka_mock_cluster(mock_cluster: Any, wait_until: WaitUntil) -> None:
    cluster = mock_cluster(3)
    checked = kafkalite("check", "-b", cluster.bootstrap)
    assert checked.code == 0 and "3 brokers" in checked.stdout, checked
    produced = kafkalite("produce", "-b", cluster.bootstrap, "-t", "mock-cli", "-K", ":",
                         input="".join(f"k{index}:v{index}\n" for index in range(100)))
    assert produced.code == 0 and "Produced 100 records" in produced.stderr, produced
    [topic] = kafkalite("topics", "describe", "-b", cluster.bootstrap, "-t", "mock-cli", "--json").json
    assert topic["partition_count"] == 4 and topic["configs"] is None  # the mock has no DescribeConfigs
    assert all(item["leader"] in (1, 2, 3) for item in topic["partitions"])
    assert len(read_all(cluster.bootstrap, "mock-cli", 4, 100, wait_until)) == 100
    consumed = kafkalite("consume", "-b", cluster.bootstrap, "-t", "mock-cli", "--from-beginning", "-e", "-K", ":")
    assert consumed.code == 0, consumed
    assert sorted(consumed.stdout.splitlines()) == sorted(f"k{index}:v{index}" for index in range(100))
