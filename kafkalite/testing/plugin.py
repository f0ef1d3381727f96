"""The pytest plugin: a real Kafka broker as a fixture. Installing kafkalite is enough (``pytest11`` entry point).

Fixtures:

* ``kafka_broker`` (session scope): a broker shared by the tests that ask for the same configuration,
  in this process (the default: in-memory storage, ready in milliseconds) or, with
  ``kafka_broker_mode = subprocess``, a ``kafkalite serve`` process for clients in other processes or
  languages. It offers ``bootstrap_servers``, a ready ``admin`` client, ``create_topic`` and
  ``produce`` (``kafkalite.testing.helpers``), and ``faults`` to inject faults into its request path
  (``with kafka_broker.faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3): ...``,
  ``kafkalite.testing.faults``).
* ``kafka_broker_factory``: brokers private to one test, ``kafka_broker_factory(configs=None, *,
  data_dir=None, subprocess=False, security=None)``, stopped after the test. With a ``data_dir`` they keep Kafka's
  on-disk layout and ``restart()`` on the same data (a consumer surviving a broker restart).

Configuration, with Kafka's key names, lowest precedence first: the ``kafka_broker_config`` ini option
(one ``key=value`` per line), then ``@pytest.mark.kafka_broker_config(num_partitions=3)`` on a test, a
class or a module. Tests with the same configuration share one broker for the session; a marked test
gets the broker of its configuration. The marker's ``mode="subprocess"`` picks the subprocess broker
for those tests, and ``security="SASL_SSL:SCRAM-SHA-256"`` (or ``SSL``, ``SASL_PLAINTEXT``...) a secured
listener with ready-made users and client configs (``broker.confluent_config("alice")``,
``broker.kafka_python_config("bob")``, ``broker.client_config()``; see ``kafkalite.testing.security``).

When a test that used a broker fails, the broker's log is attached to its report. Under pytest-xdist
each worker has its own brokers. The broker runs on its own thread (or process), so blocking tests,
pytest-asyncio and anyio tests reach it alike.

This module imports nothing of the broker until a test asks for one, so loading the plugin costs
nothing to a test run that does not use it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kafkalite.testing.embedded import EmbeddedBroker
    from kafkalite.testing.process import BrokerProcess

    Broker = EmbeddedBroker | BrokerProcess

__all__ = ["kafka_broker", "kafka_broker_factory"]

MARKER = "kafka_broker_config"
MODES = ("inprocess", "subprocess")
_USED_KEY = pytest.StashKey[list["Broker"]]()  # on a test: the brokers it used
_STARTED_KEY = pytest.StashKey[list["Broker"]]()  # on the config: every broker this plugin started


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(MARKER, type="linelist", default=[],
                  help="broker configs (key=value, Kafka's key names) for the kafka_broker fixture")
    parser.addini("kafka_broker_mode", default="inprocess",
                  help="where kafka_broker runs: inprocess (default) or subprocess")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(mode=None, **configs): Kafka broker configs (Kafka's key names, "
                                       "dots or underscores) for the kafka_broker fixture")


def _ini_configs(config: pytest.Config) -> dict[str, str]:
    configs: dict[str, str] = {}
    for line in config.getini(MARKER):
        key, separator, value = line.partition("=")
        if not separator or not key.strip():
            raise pytest.UsageError(f"{MARKER} ini option: expected key=value, got {line!r}")
        configs[key.strip()] = value.strip()
    return configs


def _marked_configs(node: pytest.Item | pytest.Function) -> dict[str, Any] | None:
    """The merged ``kafka_broker_config`` markers of a test (module, then class, then the test), or None."""
    marks = list(node.iter_markers(MARKER))
    if not marks:
        return None
    merged: dict[str, Any] = {}
    for mark in reversed(marks):  # iter_markers yields the closest first
        if mark.args:
            raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only, got {mark.args!r}")
        merged.update(mark.kwargs)
    return merged


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A marked test gets the session broker of its configuration (an indirect, session-scoped parameter)."""
    if "kafka_broker" not in metafunc.fixturenames:
        return
    marked = _marked_configs(metafunc.definition)
    if marked is None:
        return
    key = tuple(sorted((name, str(value)) for name, value in marked.items()))
    label = ",".join(f"{name}={value}" for name, value in key)
    metafunc.parametrize("kafka_broker", [key], indirect=True, scope="session", ids=[f"kafka_broker[{label}]"])


def _start(config: pytest.Config, configs: Mapping[str, object], mode: str, data_dir: Path | None,
           work_dir: Path, security: str | None = None) -> Broker:
    from kafkalite.testing.embedded import EmbeddedBroker, broker_configs
    from kafkalite.testing.process import BrokerProcess

    if mode not in MODES:
        raise pytest.UsageError(f"kafka_broker mode must be one of {', '.join(MODES)}, got {mode!r}")
    broker: Broker
    if mode == "inprocess":
        broker = EmbeddedBroker(configs, data_dir=data_dir, security=security)
    else:
        broker = BrokerProcess(data_dir or work_dir / "data", broker_configs(configs), memory=data_dir is None,
                               security=security)
    config.stash.setdefault(_STARTED_KEY, []).append(broker)
    return broker.start()


def _close(broker: Broker) -> None:
    broker.close()


def _record_use(request: pytest.FixtureRequest, broker: Broker) -> None:
    node = request.node
    if isinstance(node, pytest.Item):
        node.stash.setdefault(_USED_KEY, []).append(broker)


@pytest.fixture(scope="session")
def _kafka_broker_session(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Broker]]:
    """The session's brokers, one per (configuration, mode)."""
    brokers: dict[tuple[Any, ...], Broker] = {}

    def get(configs: Mapping[str, object], mode: str, security: str | None = None) -> Broker:
        key = (tuple(sorted((name, str(value)) for name, value in configs.items())), mode, security)
        broker = brokers.get(key)
        if broker is None:
            broker = brokers[key] = _start(request.config, configs, mode, None,
                                           tmp_path_factory.mktemp("kafka-broker"), security)
        return broker

    try:
        yield get
    finally:
        for broker in brokers.values():
            _close(broker)


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest, _kafka_broker_session: Callable[..., Broker]) -> Broker:
    """A broker for the session (per configuration): ``bootstrap_servers`` is where clients connect."""
    configs: dict[str, object] = dict(_ini_configs(request.config))
    mode = str(request.config.getini("kafka_broker_mode") or "inprocess")
    security: str | None = None
    marked = getattr(request, "param", None)
    if marked is not None:
        for name, value in marked:
            if name == "mode":
                mode = value
            elif name == "security":
                security = value
            else:
                configs[name] = value
    return _kafka_broker_session(configs, mode, security)


@pytest.fixture(autouse=True)
def _kafka_broker_report(request: pytest.FixtureRequest) -> None:
    """Remember the session broker a test used, for its failure report."""
    if "kafka_broker" in request.fixturenames:
        _record_use(request, request.getfixturevalue("kafka_broker"))


@pytest.fixture
def kafka_broker_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """Brokers of this test alone: ``kafka_broker_factory(configs=None, *, data_dir=None, subprocess=False)``."""
    made: list[Broker] = []

    def make(configs: Mapping[str, object] | None = None, *, data_dir: str | Path | None = None,
             subprocess: bool = False, security: str | None = None, **more: object) -> Broker:
        merged: dict[str, object] = {**_ini_configs(request.config), **(configs or {}), **more}
        broker = _start(request.config, merged, "subprocess" if subprocess else "inprocess",
                        Path(data_dir) if data_dir is not None else None, tmp_path / f"broker-{len(made)}", security)
        made.append(broker)
        _record_use(request, broker)
        return broker

    try:
        yield make
    finally:
        for broker in made:
            _close(broker)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        used: list[Broker] = item.stash.get(_USED_KEY, [])
        for index, broker in enumerate(used):
            text = broker.log_text()
            if text:
                label = "kafka broker log" + (f" ({index + 1})" if index else "")
                report.sections.append((f"{label}: {broker.bootstrap_servers}", text[-20_000:]))
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Last resort: no broker this plugin started outlives the session (fixtures normally stop them)."""
    for broker in session.config.stash.get(_STARTED_KEY, []):
        broker.close()
