"""The pytest plugin and the brokers behind it, used as a project's own test suite would use them.

``pytester`` runs fresh test files that rely only on the installed plugin, in a pytest process of their
own: the session broker (in that process and as a subprocess), its configuration from the ini file and
from markers, the per-test factory with a restart on the same data, the broker log in a failing test's
report, pytest-xdist, pytest-asyncio and anyio. The context managers are tested directly. Start-up
times are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

import kafkalite
from kafkalite.testing import BrokerProcess, EmbeddedBroker

pytest_plugins = ["pytester"]

REPO_ROOT = Path(kafkalite.__file__).resolve().parents[1]
TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 120.0  # one pytester run of a project's suite, in its own process


def _roundtrip(bootstrap: str, topic: str, count: int = 5) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for index in range(count):
        producer.send(topic, f"record-{index}".encode())
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=int(TIMEOUT_S * 1000))
    values = []
    for record in consumer:
        values.append(record.value)
        if len(values) == count:
            break
    consumer.close()
    return values


def _plugin_installed() -> bool:
    return any(point.value == "kafkalite.testing.plugin" for point in importlib.metadata.entry_points(group="pytest11"))


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    """A project directory whose pytest loads the plugin as an installed package would.

    Its pytest runs in a process of its own (``runpytest_subprocess``), as another project's would. Run
    in this process, it would share the broker's module-level state with the tests around it: pytester
    puts ``sys.modules`` back as it found it after the run, dropping the modules the run imported, while
    the handler registry (``kafkalite.broker.handlers.registry.HANDLERS``, imported before when any
    collected test file imports the broker) keeps the handlers that the run's broker imported in its
    warm-up. A later broker in this process then imports the dropped modules again, and its handlers
    would be the earlier copies: SaslAuthenticate's compares the connection's ``SaslState`` with the
    other copy's and refuses every SASL login ("Unexpected SaslAuthenticate request"). After the test,
    every handler the registry holds must still be its module's in ``sys.modules``."""
    from kafkalite.broker.handlers.registry import HANDLERS

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    if not _plugin_installed():  # a source tree not installed as a package: load the plugin by name
        pytester.makeini("[pytest]\naddopts = -p kafkalite.testing.plugin\n")
    yield pytester
    handlers = [HANDLERS[key].handle for key in sorted(HANDLERS.loaded())]
    stale = [f"{handler.__module__}.{handler.__name__}" for handler in handlers
             if getattr(sys.modules.get(handler.__module__), "__dict__", None) is not handler.__globals__]
    assert not stale, (f"the run left {len(stale)} handlers of modules no longer imported in this process, "
                       f"such as {stale[:3]}")


def _ini(suite: pytest.Pytester, lines: str) -> None:
    addopts = "" if _plugin_installed() else "addopts = -p kafkalite.testing.plugin\n"
    suite.makeini("[pytest]\n" + addopts + textwrap.dedent(lines))


# the context managers ----------------------------------------------------------------------------
def test_embedded_broker_serves_real_clients() -> None:
    with EmbeddedBroker({"num.partitions": 2}) as broker:
        topic = f"embedded-{uuid.uuid4().hex[:8]}"
        assert sorted(_roundtrip(broker.bootstrap_servers, topic)) == [f"record-{i}".encode() for i in range(5)]
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        assert len(admin.describe_topics([topic])[0]["partitions"]) == 2
        admin.close()
        first = broker.started_in_s
    with EmbeddedBroker() as again:
        print(f"\nembedded broker accepting after {first * 1000:.1f} ms (imports included), "
              f"the next after {again.started_in_s * 1000:.1f} ms")
    assert not broker.running and not again.running


def test_brokers_make_topics_and_records_for_a_test(tmp_path: Path) -> None:
    for broker in (EmbeddedBroker(), BrokerProcess(tmp_path / "data", memory=True)):
        with broker:
            broker.create_topic("helpers", partitions=3, configs={"retention.ms": "60000"})
            assert broker.admin.list_topics()["helpers"] == 3
            landed = broker.produce("helpers", [b"a", b"b", b"c"], key=b"same", headers={"source": b"test"})
            assert len({record.partition for record in landed}) == 1
            assert [record.offset for record in landed] == [0, 1, 2]
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=10_000)
            consumer.assign([TopicPartition("helpers", landed[0].partition)])
            consumer.seek_to_beginning()
            records = [record for _, record in zip(range(3), consumer, strict=False)]
            consumer.close()
            assert [(r.key, r.value, r.headers) for r in records] == [(b"same", v, [("source", b"test")])
                                                                       for v in (b"a", b"b", b"c")]
            with pytest.raises(Exception, match="exists"):
                broker.create_topic("helpers")
            broker.produce("helpers", [b"d"], partition=(landed[0].partition + 1) % 3)
            everything = broker.consume("helpers")  # up to the end of each partition, read by the helper
            assert sorted(record.value for record in everything) == [b"a", b"b", b"c", b"d"]
            assert [r.value for r in broker.consume("helpers", partition=landed[0].partition)] == [b"a", b"b", b"c"]
            assert len(broker.consume("helpers", 2)) == 2
            with pytest.raises(TimeoutError, match="read 4 records"):
                broker.consume("helpers", 5, timeout=0.5)


def test_embedded_broker_from_async_code() -> None:
    async def scenario() -> list[bytes]:
        async with EmbeddedBroker() as broker:
            return await asyncio.to_thread(_roundtrip, broker.bootstrap_servers, "from-async", 3)

    assert asyncio.run(scenario()) == [b"record-0", b"record-1", b"record-2"]


def test_embedded_broker_restarts_on_its_data(tmp_path: Path) -> None:
    broker = EmbeddedBroker(data_dir=tmp_path / "data").start()
    try:
        _roundtrip(broker.bootstrap_servers, "kept", 4)
        port = broker.port
        broker.restart()
        assert broker.port == port
        consumer = KafkaConsumer("kept", bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                 consumer_timeout_ms=int(TIMEOUT_S * 1000))
        values = [record.value for _, record in zip(range(4), consumer, strict=False)]
        consumer.close()
        assert values == [b"record-0", b"record-1", b"record-2", b"record-3"]
        assert (tmp_path / "data" / "kept-0").is_dir()
    finally:
        broker.close()


def test_a_bad_config_fails_the_start() -> None:
    with pytest.raises(Exception, match="log.segment.bytes"):
        EmbeddedBroker({"log.segment.bytes": "lots"}).start()


def test_broker_process_context_manager(tmp_path: Path) -> None:
    began = time.perf_counter()
    with BrokerProcess(tmp_path / "data", {"num.partitions": 1}, memory=True) as broker:
        listening = broker.started_in_s
        assert _roundtrip(broker.bootstrap_servers, "in-a-process", 2) == [b"record-0", b"record-1"]
        print(f"\nsubprocess broker listening after {listening * 1000:.0f} ms, "
              f"first round trip done after {(time.perf_counter() - began) * 1000:.0f} ms")
    assert not broker.running


def test_importing_the_plugin_loads_no_broker() -> None:
    code = ("import sys, kafkalite.testing.plugin; "
            "print(sorted(m for m in sys.modules if m.startswith('kafkalite.broker') or m == 'kafkalite.client'))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}).stdout.strip()
    assert output == "[]"


# the plugin, as another project uses it ---------------------------------------------------------
ROUNDTRIP = '''
from kafka import KafkaConsumer, KafkaProducer, KafkaAdminClient

def roundtrip(bootstrap, topic, count=3):
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for index in range(count):
        producer.send(topic, str(index).encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=30000)
    values = [record.value for _, record in zip(range(count), consumer)]
    consumer.close()
    return values

def partition_count(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return len(admin.describe_topics([topic])[0]["partitions"])
    finally:
        admin.close()
'''


def test_plugin_gives_a_session_broker_configured_by_ini_and_markers(suite: pytest.Pytester) -> None:
    _ini(suite, "kafka_broker_config =\n    num.partitions=2\n")
    suite.makeconftest(ROUNDTRIP)
    suite.makepyfile(test_app='''
        import pytest
        from conftest import partition_count, roundtrip

        SEEN = set()

        def test_default(kafka_broker):
            assert sorted(roundtrip(kafka_broker.bootstrap_servers, "t-default")) == [b"0", b"1", b"2"]
            assert partition_count(kafka_broker.bootstrap_servers, "t-default") == 2
            SEEN.add(kafka_broker.bootstrap_servers)

        def test_shares_the_default(kafka_broker):
            assert kafka_broker.bootstrap_servers in SEEN

        @pytest.mark.kafka_broker_config(num_partitions=3)
        def test_marked(kafka_broker):
            assert kafka_broker.bootstrap_servers not in SEEN
            roundtrip(kafka_broker.bootstrap_servers, "t-marked")
            assert partition_count(kafka_broker.bootstrap_servers, "t-marked") == 3

        @pytest.fixture(scope="session")
        def session_client(kafka_broker):
            return kafka_broker.bootstrap_servers

        def test_session_fixtures_can_use_it(session_client, kafka_broker):
            assert session_client == kafka_broker.bootstrap_servers

        def test_helpers(kafka_broker):
            kafka_broker.create_topic("t-helpers", partitions=4)
            assert kafka_broker.admin.list_topics()["t-helpers"] == 4
            assert [r.offset for r in kafka_broker.produce("t-helpers", [b"x", b"y"], partition=1)] == [0, 1]
            assert [r.value for r in kafka_broker.consume("t-helpers")] == [b"x", b"y"]
    ''')
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=RUN_TIMEOUT_S)
    result.assert_outcomes(passed=5)


def test_plugin_subprocess_mode(suite: pytest.Pytester) -> None:
    _ini(suite, "kafka_broker_mode = subprocess\n")
    suite.makeconftest(ROUNDTRIP)
    suite.makepyfile(test_app='''
        import os
        from conftest import roundtrip

        def test_in_another_process(kafka_broker):
            assert kafka_broker.pid != os.getpid()
            assert roundtrip(kafka_broker.bootstrap_servers, "t-sub") == [b"0", b"1", b"2"]
    ''')
    suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=RUN_TIMEOUT_S).assert_outcomes(passed=1)


def test_plugin_factory_restarts_on_the_same_data(suite: pytest.Pytester) -> None:
    _ini(suite, "")
    suite.makeconftest(ROUNDTRIP)
    suite.makepyfile(test_app='''
        import pytest
        from kafka import KafkaConsumer
        from conftest import roundtrip

        @pytest.mark.parametrize("subprocess", [False, True])
        def test_consumer_survives_a_restart(kafka_broker_factory, tmp_path, subprocess):
            broker = kafka_broker_factory({"num.partitions": 1}, data_dir=tmp_path / "data", subprocess=subprocess)
            roundtrip(broker.bootstrap_servers, "kept", 2)
            broker.restart()
            consumer = KafkaConsumer("kept", bootstrap_servers=broker.bootstrap_servers,
                                     auto_offset_reset="earliest", consumer_timeout_ms=30000)
            assert [record.value for _, record in zip(range(2), consumer)] == [b"0", b"1"]
            consumer.close()

        def test_private_brokers_are_private(kafka_broker_factory, kafka_broker):
            first, second = kafka_broker_factory(), kafka_broker_factory(auto_create_topics_enable=False)
            assert len({first.bootstrap_servers, second.bootstrap_servers, kafka_broker.bootstrap_servers}) == 3
    ''')
    suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=RUN_TIMEOUT_S).assert_outcomes(passed=3)


def test_a_failing_test_shows_the_broker_log(suite: pytest.Pytester) -> None:
    _ini(suite, "")
    suite.makepyfile(test_app='''
        def test_fails(kafka_broker):
            assert kafka_broker.bootstrap_servers == "nowhere"
    ''')
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=RUN_TIMEOUT_S)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*kafka broker log*", "*listening on PLAINTEXT://127.0.0.1:*"])


def test_plugin_under_xdist_and_async_test_frameworks(suite: pytest.Pytester) -> None:
    _ini(suite, "asyncio_mode = strict\n")
    suite.makeconftest(ROUNDTRIP)
    suite.makepyfile(test_app='''
        import asyncio
        import os
        import anyio
        import pytest
        from conftest import roundtrip

        def test_blocking(kafka_broker):
            assert roundtrip(kafka_broker.bootstrap_servers, "t-" + os.environ.get("PYTEST_XDIST_WORKER", "main"))

        @pytest.mark.asyncio
        async def test_with_pytest_asyncio(kafka_broker):
            values = await asyncio.to_thread(roundtrip, kafka_broker.bootstrap_servers, "t-asyncio")
            assert len(values) == 3

        @pytest.mark.anyio
        async def test_with_anyio(kafka_broker):
            values = await anyio.to_thread.run_sync(roundtrip, kafka_broker.bootstrap_servers, "t-anyio")
            assert len(values) == 3

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        def test_worker_has_its_own(kafka_broker):
            print("WORKER", os.environ.get("PYTEST_XDIST_WORKER"), kafka_broker.bootstrap_servers)
    ''')
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "-s", timeout=RUN_TIMEOUT_S)
    result.assert_outcomes(passed=4)


def test_the_package_registers_the_plugin() -> None:
    """``pip install kafkalite`` registers the plugin (a pytest11 entry point): there is nothing to copy."""
    import tomllib

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {"kafkalite": "kafkalite.testing.plugin"}
