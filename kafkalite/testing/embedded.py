"""A broker inside this process, on its own event loop thread: the fastest real Kafka endpoint a test can have.

    with EmbeddedBroker({"num.partitions": 3}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

    async with EmbeddedBroker() as broker:          # the same from async code
        ...

It is the same ``BrokerServer`` that ``kafkalite serve`` runs, configured from the same config table,
listening on 127.0.0.1 (a free port unless one is given). Storage is in memory unless a ``data_dir`` is
given; ``restart()`` stops and starts it again on the same data and, when it is still free, the same
port. Because the broker has a thread and a loop of its own, blocking clients and asyncio clients
(on the test's loop) alike can talk to it.

Configs use Kafka's key names; Python names work too (``num_partitions=3`` is ``num.partitions``).
``faults`` injects faults straight into the broker's request path (``kafkalite.testing.faults``);
with ``admin.listener`` set (``127.0.0.1:0`` for a free port), ``admin_url`` is its admin endpoint,
which answers by the time ``start`` returns.
``KAFKALITE_*`` environment variables do not apply: a test's broker is what the test says.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kafkalite.testing.faults import Faults, ObserverFaultBackend
from kafkalite.testing.helpers import BrokerHelpers

if TYPE_CHECKING:
    from kafkalite.broker.admin.observer import RequestObserver
    from kafkalite.broker.server import BrokerServer

__all__ = ["EmbeddedBroker", "broker_configs"]

START_TIMEOUT_S = 30.0
STOP_GRACE_S = 2.0
LOG_LINES_KEPT = 2000


def broker_configs(configs: Mapping[str, object] | None = None, **more: object) -> dict[str, str]:
    """Kafka config keys and their values as the properties file would hold them.

    ``num_partitions`` and ``num.partitions`` are the same key (a key with a dot is taken as it is, so
    ``listener.name.sasl_ssl...`` keeps its underscore); ``True`` is ``"true"``.
    """
    merged: dict[str, str] = {}
    for key, value in {**(configs or {}), **more}.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        merged[key if "." in key else key.replace("_", ".")] = text
    return merged


class _LogTail(logging.Handler):
    """The broker's recent log lines, for a failed test's report."""

    def __init__(self, thread_name: str) -> None:
        super().__init__(logging.DEBUG)
        self.thread_name = thread_name
        self.lines: collections.deque[str] = collections.deque(maxlen=LOG_LINES_KEPT)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.threadName == self.thread_name:
            self.lines.append(self.format(record))


class EmbeddedBroker(BrokerHelpers):
    """A broker on a background thread of this process. Start it, use ``bootstrap_servers``, stop it.

    ``admin``, ``create_topic`` and ``produce`` (``kafkalite.testing.helpers``) talk to it with the
    bundled client."""

    def __init__(self, configs: Mapping[str, object] | None = None, *, data_dir: str | Path | None = None,
                 port: int = 0, host: str = "127.0.0.1", security: str | None = None) -> None:
        """``security``: ``"SSL"``, ``"SASL_PLAINTEXT"``, ``"SASL_SSL:SCRAM-SHA-256"``... (see
        ``kafkalite.testing.security``); ``client_config``, ``confluent_config`` and
        ``kafka_python_config`` then give each client what it needs to connect."""
        self.configs = broker_configs(configs)
        if security is not None:
            from kafkalite.testing.security import TestSecurity

            self.security = TestSecurity.parse(security)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.host = host
        self.port = port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._log_tail: _LogTail | None = None
        self.server: BrokerServer | None = None
        self.started_in_s = 0.0  # how long the last start took, until the broker accepted connections

    # facts -------------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def log_text(self) -> str:
        """What the broker logged since it was created (the last lines)."""
        return "\n".join(self._log_tail.lines) if self._log_tail is not None else ""

    @property
    def admin_url(self) -> str | None:
        """``http://127.0.0.1:PORT`` of the admin endpoint, when ``admin.listener`` is set."""
        admin = self.server.admin if self.server is not None else None
        return f"http://{self.host}:{admin.port}" if admin is not None else None

    @property
    def faults(self) -> Faults:
        """Inject faults into this broker's request path (``kafkalite.testing.faults``)."""
        return Faults(ObserverFaultBackend(self._on_loop))

    def _on_loop(self, function: Callable[[RequestObserver], Any], timeout: float = 10.0) -> Any:
        """Run ``function(observer)`` on the broker's loop and return what it returns (or raise what it raises)."""
        loop, server = self._loop, self.server
        if loop is None or server is None or not self.running:
            raise RuntimeError(f"the broker on {self.bootstrap_servers} is not running")

        async def call() -> Any:
            return function(server.observe())

        return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout)

    # lifecycle ---------------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> EmbeddedBroker:
        """Start the broker and return once it accepts connections (raises if it cannot start)."""
        if self.running:
            raise RuntimeError(f"the broker on {self.bootstrap_servers} is already running")
        began = time.perf_counter()
        self._ready.clear()
        self._error = None
        name = f"kafkalite-broker-{id(self):x}"
        if self._log_tail is None:
            self._log_tail = _LogTail(name)
            broker_logger = logging.getLogger("kafkalite")
            if broker_logger.level == logging.NOTSET:  # the broker's INFO lines ("listening on ...") are wanted
                broker_logger.setLevel(logging.INFO)
            broker_logger.addHandler(self._log_tail)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the embedded broker did not start within {timeout} s")
        if self._error is not None:
            self._thread.join(timeout)
            self._thread = None
            raise self._error
        self.started_in_s = time.perf_counter() - began
        return self

    def stop(self, timeout: float = START_TIMEOUT_S) -> None:
        """Stop the broker cleanly (in-flight requests get a short grace) and wait for its thread."""
        thread, loop, stop_requested = self._thread, self._loop, self._stop_requested
        if thread is None:
            return
        if loop is not None and stop_requested is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop_requested.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"the embedded broker on {self.bootstrap_servers} did not stop within {timeout} s")
        self._thread = None

    def restart(self) -> EmbeddedBroker:
        """Stop and start again on the same data (lost with in-memory storage) and, if free, the same port."""
        self.stop()
        try:
            return self.start()
        except OSError:  # the port was taken meanwhile
            self.port = 0
            return self.start()

    def close(self) -> None:
        """Close the helpers' clients, stop the broker and detach its log handler."""
        security, self.security = self.security, None  # the certificates go once the broker stopped
        self._close_clients()
        self.stop()
        if security is not None:
            security.close()
        if self._log_tail is not None:
            logging.getLogger("kafkalite").removeHandler(self._log_tail)

    def _config(self) -> dict[str, str]:
        secured = {} if self.security is None else self.security.broker_configs(self.host, self.port)
        values = {**secured, **self.configs}
        values.setdefault("listeners", f"PLAINTEXT://{self.host}:{self.port}")
        if self.data_dir is not None:
            values.setdefault("log.dirs", str(self.data_dir))
            values.setdefault("log.storage", "disk")
        else:
            values.setdefault("log.storage", "memory")
        return values

    def _run(self) -> None:
        from kafkalite.broker.config import BrokerConfig
        from kafkalite.broker.server import BrokerServer

        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover - uvloop is a dependency; plain asyncio works too
            loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            server = BrokerServer(BrokerConfig(self._config()))
            self._stop_requested = asyncio.Event()
            loop.run_until_complete(server.start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        if server.admin is not None:  # start() returns once the admin endpoint answers too
            try:
                loop.run_until_complete(server.admin.serving())
            except BaseException as exc:
                loop.run_until_complete(server.stop(grace_s=0))
                self._error = exc
                self._ready.set()
                loop.close()
                return
        self.server = server
        self.port = server.bound[0].port
        if self.security is not None and self.security.scram and server.cluster is not None:
            self.security.store_scram_credentials(server.cluster.scram_credentials)
        self._ready.set()
        try:
            loop.run_until_complete(self._stop_requested.wait())
            loop.run_until_complete(server.stop(grace_s=STOP_GRACE_S))
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._loop = None

    # context managers --------------------------------------------------------------------------
    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> EmbeddedBroker:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await asyncio.to_thread(self.close)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedBroker({self.bootstrap_servers}, {state}, {self.data_dir or 'in memory'})"
