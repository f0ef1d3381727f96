"""kafkajs (the Node.js client) against a real broker: each test runs one scenario of
``kafkajs/scenarios.js`` with ``node`` and checks the JSON it prints.

kafkajs only speaks non-flexible versions, and these scenarios use (recorded from its debug log):
Produce v7, Fetch v11, ListOffsets v3, Metadata v6, OffsetCommit v5, OffsetFetch v4,
FindCoordinator v2, JoinGroup v5, Heartbeat v3, LeaveGroup v3, SyncGroup v3, DescribeGroups v2,
ListGroups v2, ApiVersions v2, CreateTopics v3, DeleteTopics v1, DeleteRecords v1,
InitProducerId v1, AddPartitionsToTxn v1, AddOffsetsToTxn v1, EndTxn v1, TxnOffsetCommit v1,
DescribeConfigs v2, AlterConfigs v1, CreatePartitions v1, DeleteGroups v1.

kafkajs is pinned in ``kafkajs/package.json`` / ``package-lock.json`` and installed with
``npm ci --prefix tests/integration/kafkajs``; without ``node`` or that install these tests are
skipped with the reason. kafkajs itself only has the gzip codec (snappy, lz4 and zstd need
third-party codec packages), so the scenarios compress with gzip only.

Each scenario process gets a deadline and is killed by its PID if it overruns; the scenario itself
bounds every wait (``SCENARIO_DEADLINE_MS``).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kafkalite.protocol.murmur2 import default_partition
from kafkalite.protocol.records import Compression, TimestampType, iter_batches

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

KAFKAJS_DIR = Path(__file__).resolve().parent / "kafkajs"
SCRIPT = KAFKAJS_DIR / "scenarios.js"
NODE = shutil.which("node")
GROUP_ARGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
SCENARIO_TIMEOUT_S = 40.0


def _pinned_version() -> str:
    return json.loads((KAFKAJS_DIR / "package.json").read_text())["dependencies"]["kafkajs"]


def _installed_version() -> str | None:
    manifest = KAFKAJS_DIR / "node_modules" / "kafkajs" / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.exists() else None


if NODE is None:
    pytestmark = pytest.mark.skip(reason="node is not installed: the kafkajs scenarios need Node.js >= 14")
elif _installed_version() is None:
    pytestmark = pytest.mark.skip(reason="kafkajs is not installed: run `npm ci --prefix tests/integration/kafkajs`")


@pytest.fixture(scope="module", autouse=True)
def kafkajs_version() -> str:
    """The installed kafkajs must be the pinned one (a stale node_modules would test something else)."""
    installed, pinned = _installed_version(), _pinned_version()
    assert installed == pinned, (f"tests/integration/kafkajs has kafkajs {installed} installed but {pinned} pinned: "
                                 "run `npm ci --prefix tests/integration/kafkajs`")
    return installed


@pytest.fixture
def process(fresh_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    """A broker of the test's own: quick group joins, and a data dir whose batches we can inspect."""
    return fresh_broker(*GROUP_ARGS)


def run_scenario(bootstrap: str, name: str, tmp_path: Path,
                 on_checkpoint: Callable[[dict[str, Any]], None] | None = None,
                 timeout: float = SCENARIO_TIMEOUT_S) -> dict[str, Any]:
    """Run ``node scenarios.js <bootstrap> <name>`` and return its JSON result.

    A scenario may print ``{"checkpoint": ...}`` lines and wait for a line on stdin: ``on_checkpoint``
    is called for each, then the scenario is told to go on. kafkajs's log (stderr) goes to a file that
    is shown when the scenario fails.
    """
    assert NODE is not None
    log_path = tmp_path / f"kafkajs-{name}.log"
    env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1",
           "SCENARIO_DEADLINE_MS": str(int((timeout - 10) * 1000))}
    suffix = uuid.uuid4().hex[:8]
    with open(log_path, "wb") as log_file:
        node = subprocess.Popen([NODE, str(SCRIPT), bootstrap, name, suffix], cwd=KAFKAJS_DIR, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert node.stdout is not None
        for line in node.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    result: dict[str, Any] | None = None
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"kafkajs scenario {name} did not finish in {timeout} s\n{_tail(log_path)}")
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                break
            message = json.loads(line)
            if "checkpoint" in message:
                if on_checkpoint is not None:
                    on_checkpoint(message)
                assert node.stdin is not None
                node.stdin.write("go\n")
                node.stdin.flush()
            else:
                result = message
        status = node.wait(max(0.1, deadline - time.monotonic()))
    finally:
        if node.poll() is None:
            node.kill()
            node.wait(10)
        reader.join(10)
    assert result is not None, f"kafkajs scenario {name} printed no result (exit {node.returncode})\n{_tail(log_path)}"
    assert status == 0 and "error" not in result, \
        f"kafkajs scenario {name} failed: {result.get('error')}\n{_tail(log_path)}"
    return result


def _tail(path: Path, size: int = 6000) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "--- kafkajs log (tail) ---\n" + text[-size:]


def stored_batches(broker: BrokerProcess, topic: str, partition: int) -> list[Any]:
    directory = Path(broker.data_dir) / f"{topic}-{partition}"
    return [batch for segment in sorted(directory.glob("*.log")) for batch in iter_batches(segment.read_bytes())]


def by_partition(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for record in sorted(records, key=lambda r: (r["partition"], r["offset"])):
        out.setdefault(record["partition"], []).append(record)
    return out


# ---------------------------------------------------------------------------------------------- tests
def test_admin(process: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(process.bootstrap, "admin", tmp_path)
    assert result["cluster"]["brokers"] == [{"nodeId": 1, "host": "127.0.0.1", "port": process.port}]
    assert result["cluster"]["controller"] == 1
    assert result["created"] is True and result["createdAgain"] is False  # TOPIC_ALREADY_EXISTS
    assert result["validateOnly"] is True and result["validatedTopicListed"] is False
    assert result["listedAfterCreate"] is True
    [metadata] = result["metadata"]
    assert metadata["partitions"] == [{"partitionId": p, "leader": 1, "replicas": [1], "isr": [1]} for p in range(3)]
    [configs] = result["topicConfigs"]
    assert configs["errorCode"] == 0 and configs["resourceType"] == 2
    assert configs["entries"] == {
        "retention.ms": {"value": "123456", "isDefault": False, "readOnly": False},
        "cleanup.policy": {"value": "compact", "isDefault": False, "readOnly": False},
        "segment.bytes": {"value": str(1024 ** 3), "isDefault": True, "readOnly": False},
    }
    assert result["brokerConfigError"] == 0 and result["brokerConfigCount"] > 20
    assert result["retentionAfterAlter"] == "654321"
    assert result["partitionsAfterCreatePartitions"] == 5
    assert result["offsets"] == [{"partition": p, "offset": "0", "high": "0", "low": "0"} for p in range(5)]
    assert result["listedAfterDelete"] is False
    assert result["deleteAgainError"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_keyed_gzip_records_with_headers(process: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(process.bootstrap, "produce", tmp_path)
    assert all(entry["errorCode"] == 0 for entry in result["sendResults"])
    records = result["records"]
    assert len(records) == 62
    keyed = {int(r["headers"]["index"]): r for r in records if "index" in r["headers"]}
    assert sorted(keyed) == list(range(60))
    for index, record in keyed.items():
        assert record["key"] == f"key-{index % 12}"
        assert record["value"] == f"value-{index}-" + "x" * (index * 20)
        assert record["headers"] == {"index": str(index), "trace-id": f"trace-{index}", "multi": ["a", "b"]}
        # kafkajs's default partitioner is Java's: murmur2 of the key
        assert record["partition"] == default_partition(record["key"].encode(), 3), index
    others = {(r["key"], r["value"]) for r in records if "index" not in r["headers"]}
    assert others == {(None, "no-key"), ("key-null-value", None)}
    now_ms = time.time() * 1000
    assert all(now_ms - 60_000 < r["timestamp"] <= now_ms for r in records)

    partitions = by_partition(records)
    for _partition, mine in partitions.items():
        assert [r["offset"] for r in mine] == list(range(len(mine)))
    assert {int(e["partition"]): int(e["high"]) for e in result["endOffsets"]} \
        == {p: len(mine) for p, mine in partitions.items()}
    # the two gzip sends are stored as gzip batches, the last send uncompressed
    codecs = Counter(batch.compression for p in range(3) for batch in stored_batches(process, result["topic"], p))
    assert codecs[Compression.GZIP] == 6 and set(codecs) <= {Compression.GZIP, Compression.NONE}


def test_group_of_two_commits_and_a_new_consumer_resumes(process: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(process.bootstrap, "group", tmp_path)
    phase1 = result["phase1"]
    shares = [set(a["partitions"]) for a in phase1["assignments"]]
    assert len(shares) == 2 and all(shares) and not shares[0] & shares[1] and shares[0] | shares[1] == {0, 1, 2}
    assert sum(a["isLeader"] for a in phase1["assignments"]) == 1
    assert sorted(phase1["values"]) == sorted(f"first-{i}" for i in range(30))  # each exactly once
    for record in phase1["records"]:  # ... by the member that owns its partition
        assert record["partition"] in shares[record["member"]], record
    stable = result["describeWhileStable"]
    assert (stable["state"], stable["protocolType"], stable["protocol"]) == ("Stable", "consumer", "RoundRobinAssigner")
    described = {m["memberId"]: m for m in stable["members"]}
    assert set(described) == {a["memberId"] for a in phase1["assignments"]}
    for assignment in phase1["assignments"]:
        member = described[assignment["memberId"]]
        assert member["clientId"] == "kafkalite-compat-group" and member["subscription"] == [result["topic"]]
        assert {topic: sorted(partitions) for topic, partitions in member["assignment"].items()} \
            == {result["topic"]: assignment["partitions"]}
    committed1 = {e["partition"]: int(e["offset"]) for e in result["committedAfterPhase1"]}
    assert sum(committed1.values()) == 30
    assert result["describeAfterPhase1"] == [{"groupId": result["groupId"], "state": "Empty",
                                              "protocolType": "consumer", "members": 0}]
    assert result["listGroups"] == [{"groupId": result["groupId"], "protocolType": "consumer"}]
    assert sorted(result["phase2"]["values"]) == sorted(f"second-{i}" for i in range(10))
    committed2 = {e["partition"]: int(e["offset"]) for e in result["committedAfterPhase2"]}
    assert sum(committed2.values()) == 40 and all(committed2[p] >= committed1[p] for p in range(3))
    # kafkajs resetOffsets(earliest) commits the sentinel -2 itself; Kafka stores it as given
    assert [e["offset"] for e in result["committedAfterReset"]] == ["-2", "-2", "-2"]
    assert result["listGroupsAfterDelete"] == []


def test_idempotent_producer(process: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(process.bootstrap, "idempotent", tmp_path)
    assert all(entry["errorCode"] == 0 for entry in result["sendResults"])
    assert sorted(result["values"]) == sorted(f"r{r}-m{m}" for r in range(5) for m in range(20))
    for partition, mine in by_partition(result["records"]).items():
        assert [r["offset"] for r in mine] == list(range(len(mine)))
        rounds = [int(r["value"].split("-")[0][1:]) for r in mine]
        assert rounds == sorted(rounds), f"partition {partition} out of send order"
    producers = set()
    for partition in range(3):
        sequence = 0
        for batch in stored_batches(process, result["topic"], partition):
            producers.add((batch.producer_id, batch.producer_epoch))
            assert batch.base_sequence == sequence and batch.compression == Compression.GZIP
            sequence += batch.records_count
    [(producer_id, _epoch)] = producers
    assert producer_id >= 0


def test_transactions_commit_abort_send_offsets_and_read_committed(process: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(process.bootstrap, "transactions", tmp_path)
    committed = [f"committed-{i}" for i in range(6)] + [f"with-offsets-{i}" for i in range(3)]
    assert sorted(result["readCommitted"]) == sorted(committed)
    assert sorted(result["readUncommitted"]) == sorted(committed + [f"aborted-{i}" for i in range(6)])
    assert {e["partition"]: e["offset"] for e in result["txnOffsets"]} == {0: "2", 1: "1", 2: "-1"}
    # aborted 0-3, plain 4, aborted 5-6, ABORT marker 7, committed 8-9, COMMIT marker 10: one batch
    # per fetch, so the aborted transaction is listed in responses that start inside it
    assert [(r["offset"], r["value"][:10]) for r in result["bigReadCommittedSmallFetches"]] \
        == [(4, "big-plain"), (8, "big-commit"), (9, "big-commit")]
    assert result["bigEndOffsets"][0]["high"] == "11"


def test_fetch_edge_cases(process: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(process.bootstrap, "fetch", tmp_path)
    assert result["sendAcks0"] == []  # acks=0: no response, so no metadata
    assert result["autoCreateSend"] == [{"partition": 0, "errorCode": 0, "baseOffset": "0"}]
    assert result["autoTopicListed"] is True
    assert result["endOffsets"] == [{"partition": 0, "offset": "12", "high": "12", "low": "0"}]
    by_time = {name: entries[0]["offset"] for name, entries in result["offsetsByTimestamp"].items()}
    assert by_time == {"beforeAll": "0", "atFifth": "5", "afterAll": "12"}
    small = result["smallFetch"]
    assert [r["offset"] for r in small] == list(range(12))
    assert [r["key"] for r in small] == [f"k{i}" for i in range(12)]
    assert [r["length"] for r in small] == [64 * 1024 + 2 if i % 3 == 0 else len(f"{i}:small") for i in range(12)]
    assert [r["timestamp"] - small[0]["timestamp"] for r in small] == [i * 1000 for i in range(12)]
    assert result["afterSeek"] == [9, 10, 11]
    assert result["offsetsAfterDeleteRecords"] == [{"partition": 0, "offset": "12", "high": "12", "low": "4"}]
    assert result["afterDeleteRecords"] == list(range(4, 12))


def test_read_committed_stops_at_an_open_transaction(process: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(process.bootstrap, "openTransaction", tmp_path)
    assert result["offsetsWhileOpen"][0]["high"] == "2"  # read_committed ListOffsets: the LSO
    assert result["receivedWhileOpen"] == ["before-0", "before-1"]
    assert result["offsetsAfterCommit"][0]["high"] == "6"
    assert [(r["offset"], r["value"], r["afterCommitStarted"]) for r in result["received"]] == [
        (0, "before-0", False), (1, "before-1", False),
        (2, "txn-0", True), (3, "txn-1", True), (4, "after-open", True)]


def test_exactly_once_consume_transform_produce(process: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(process.bootstrap, "exactlyOnce", tmp_path)
    first, second = result["runs"]
    assert sorted(first) == sorted(f"a{i}" for i in range(15))
    assert sorted(second) == sorted(f"b{i}" for i in range(5))
    assert sum(int(e["offset"]) for e in result["committedAfterFirst"]) == 15
    assert [e["offset"] for e in result["committedAfterSecond"]] == [e["high"] for e in result["inputEndOffsets"]]
    assert sorted(result["output"]) == sorted([f"first:a{i}" for i in range(15)] + [f"second:b{i}" for i in range(5)])


def test_broker_rewrites_batches_for_topic_configs(process: BrokerProcess, tmp_path: Path) -> None:
    """compression.type=gzip and message.timestamp.type=LogAppendTime make the broker rewrite the
    batches kafkajs sends (idempotent and transactional ones too); kafkajs reads them back intact."""
    result = run_scenario(process.bootstrap, "topicConfigs", tmp_path)
    labels = ["idem-a", "idem-b", "txn-commit", "idem-gzip"]
    # 12: the COMMIT marker, 13-16: the aborted transaction, 17: its ABORT marker
    offsets = list(range(12)) + list(range(18, 22))
    expected = [(offset, None if i == 3 else f"k{i}", None if i == 2 else f"{label}-{i}",
                 {"h": f"{label}-{i}", "empty": ""})
                for offset, (label, i) in zip(offsets, [(label, i) for label in labels for i in range(4)], strict=True)]
    for name in ("gzip", "appendTime"):
        assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in result[name]] == expected, name
    assert {r["timestamp"] for r in result["gzip"]} == {result["oldTimestamp"]}  # CreateTime kept
    assert all(result["oldTimestamp"] + 3_000_000 < r["timestamp"] <= result["sentAfter"] for r in result["appendTime"])

    gzip_batches = stored_batches(process, result["gzipTopic"], 0)
    data_batches = [b for b in gzip_batches if not b.is_control]
    assert {b.compression for b in data_batches} == {Compression.GZIP}
    # control batches (the COMMIT and ABORT markers) stay uncompressed, as Kafka writes them
    assert [b.compression for b in gzip_batches if b.is_control] == [Compression.NONE] * 2
    assert len(data_batches) == 5 and all(b.producer_id >= 0 for b in data_batches)
    assert [b.is_transactional for b in data_batches] == [False, False, True, True, False]
    append_batches = stored_batches(process, result["appendTimeTopic"], 0)
    assert {b.timestamp_type for b in append_batches if not b.is_control} == {TimestampType.LOG_APPEND_TIME}


def test_clients_carry_on_across_a_broker_restart(process: BrokerProcess, tmp_path: Path) -> None:
    """A group member, an idempotent and a transactional producer stay up while the broker restarts."""
    restarts: list[int] = []

    def restart(_: dict[str, Any]) -> None:
        port = process.port
        process.restart()
        assert process.port == port, "the broker came back on another port"
        restarts.append(port)

    result = run_scenario(process.bootstrap, "brokerRestart", tmp_path, on_checkpoint=restart)
    assert restarts == [process.port]
    values = {r["value"] for r in result["received"]}
    assert values == ({f"before-{i}" for i in range(12)} | {f"after-{i}" for i in range(12)}
                      | {f"txn-before-{i}" for i in range(3)} | {f"txn-after-{i}" for i in range(3)})
    # every record once per offset: redelivery after the restart repeats the same offsets
    seen: dict[tuple[int, int], str] = {}
    for record in result["received"]:
        assert seen.setdefault((record["partition"], record["offset"]), record["value"]) == record["value"]
    # 2 x 12 plain records, 2 x 3 transactional ones and a commit marker per partition per transaction
    assert sum(int(e["high"]) for e in result["endOffsets"]) == 24 + 6 + _markers(result)


def _markers(result: dict[str, Any]) -> int:
    """Commit markers: one per partition each transaction wrote to."""
    written: dict[str, set[int]] = {"txn-before": set(), "txn-after": set()}
    for record in result["received"]:
        for label in written:
            if record["value"].startswith(label + "-"):
                written[label].add(record["partition"])
    return sum(len(partitions) for partitions in written.values())
