"""A broker in a subprocess: ``kafkalite serve`` on 127.0.0.1, for clients in other processes or languages.

    broker = BrokerProcess(tmp_path / "data", {"num.partitions": 3}).start()
    ...  # broker.bootstrap_servers, broker.pid, broker.log_text()
    broker.restart()            # same data dir, same port when it is still free
    broker.kill()               # SIGKILL: no clean shutdown
    broker.close()

The process listens on port 0 (the broker picks a free one; its "listening on" log line says which),
and, when the ``admin`` extra is installed, serves its admin endpoint on another free loopback port
(``admin_url``, which waits for the broker's "admin endpoint on" line: the endpoint starts answering
a moment after the Kafka listeners; ``faults`` injects faults through it, see ``kafkalite.testing.faults``). It
writes its log to ``<data dir>.broker.log`` beside the data directory, and is started from the
interpreter running the caller, so it serves the kafkalite the caller imports. Every wait has a
deadline; ``close`` (and the pytest plugin at the end of a session) ends the process by its PID.
``KAFKALITE_*`` environment variables are not passed on: a test's broker is what the test says.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from kafkalite.testing.embedded import broker_configs
from kafkalite.testing.faults import Faults, HttpFaultBackend
from kafkalite.testing.helpers import BrokerHelpers

__all__ = ["BrokerProcess", "wait_for"]

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 20.0
_LISTENING = re.compile(r"listening on \w+://(?:\[[^\]]*\]|[^:\s]+):(\d+)")
_ADMIN = re.compile(r"admin endpoint on (http://\S+?)/?$", re.MULTILINE)
_T = TypeVar("_T")

_live: set[BrokerProcess] = set()


def wait_for(condition: Callable[[], _T], timeout: float, message: str, interval: float = 0.005) -> _T:
    """Poll ``condition`` until it returns something truthy; raise TimeoutError with ``message`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{message} (waited {timeout:.1f} s)")
        time.sleep(interval)


class BrokerProcess(BrokerHelpers):
    """A broker subprocess on 127.0.0.1 with its own data directory and log file.

    ``admin``, ``create_topic`` and ``produce`` (``kafkalite.testing.helpers``) talk to it with the
    bundled client."""

    def __init__(self, data_dir: str | Path, configs: Mapping[str, object] | None = None,
                 extra_args: Sequence[str] = (), *, memory: bool = False, nofile: int | None = None,
                 fsize: int | None = None, admin: bool = True, security: str | None = None) -> None:
        """``nofile``: run the broker under this hard and soft open-file limit (``RLIMIT_NOFILE``).
        ``fsize``: under this soft file-size limit (``RLIMIT_FSIZE``; the hard limit stays): a write
        past it fails with EFBIG, as on a full disk, and ``set_file_size_limit`` makes room again.
        ``admin``: serve the admin endpoint on a free loopback port (when the admin extra is installed).
        ``security``: a secured listener, as ``EmbeddedBroker``'s (``kafkalite.testing.security``); with
        SCRAM the broker keeps its data on disk, where the users' credentials are written before it starts."""
        self.data_dir = Path(data_dir)
        self.nofile = nofile
        self.fsize = fsize
        self.configs = broker_configs(configs)
        if admin and "admin.listener" not in self.configs and _admin_extra_installed():
            self.configs["admin.listener"] = "127.0.0.1:0"
        self.extra_args = list(extra_args)
        self.memory = memory
        if security is not None:
            from kafkalite.testing.security import TestSecurity

            self.security = TestSecurity.parse(security)
            self.memory = memory and not self.security.scram
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.broker.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._admin_url: str | None = None  # http://127.0.0.1:PORT of its admin endpoint, once it answers
        self.started_in_s = 0.0  # how long the last start took, until the broker logged "listening on"
        self._log_offset = 0
        self._spawned_at = 0.0

    # lifecycle -------------------------------------------------------------------------------
    def command(self, port: int = 0) -> list[str]:
        secured = {} if self.security is None else self.security.broker_configs("127.0.0.1", port)
        listeners = secured.pop("listeners", f"PLAINTEXT://127.0.0.1:{port}")
        command = [sys.executable, "-m", "kafkalite", "serve", "--port", str(port), "--listeners", listeners]
        command += ["--memory"] if self.memory else ["--data-dir", str(self.data_dir)]
        for key, value in {**secured, **self.configs}.items():  # as options: extra_args may end with key=value pairs
            command += ["--override", f"{key}={value}"]
        return command + self.extra_args

    def spawn(self, port: int = 0) -> None:
        """Start the process and return at once (``wait_until_listening`` waits for it)."""
        if self.running:
            raise RuntimeError(f"broker pid {self.pid} is already running")
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if self.security is not None and self.security.scram and not self.memory:
            from kafkalite.broker.security.scram import ScramCredentials

            credentials = ScramCredentials(self.data_dir)
            credentials.load()
            self.security.store_scram_credentials(credentials)
        environment = {name: value for name, value in os.environ.items() if not name.startswith("KAFKALITE_")}
        environment["PYTHONUNBUFFERED"] = "1"
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._admin_url = None
        self._spawned_at = time.perf_counter()
        with open(self.log_path, "ab") as log_file:
            limited = self.nofile is not None or self.fsize is not None
            self.process = subprocess.Popen(self.command(port), stdout=log_file, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=environment,
                                            preexec_fn=self._set_limits if limited else None)
        _live.add(self)

    def _set_limits(self) -> None:
        """In the child, before exec: the open-file and file-size limits the broker must live with."""
        import resource

        if self.nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))
        if self.fsize is not None:
            _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.fsize, hard))

    def set_file_size_limit(self, limit: int | None) -> None:
        """Change the running broker's soft file-size limit (None: as high as the hard limit), Linux only."""
        import resource

        _, hard = resource.prlimit(self.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(self.pid, resource.RLIMIT_FSIZE, (hard if limit is None else limit, hard))

    def wait_until_listening(self, timeout: float = START_TIMEOUT_S) -> int:
        """Wait for this run's "listening on" line; return the port it names."""
        def listening() -> int:
            text = self.log_text(since=self._log_offset)
            match = _LISTENING.search(text)
            if match:
                return int(match.group(1))
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"broker exited with status {self.process.returncode} before listening:\n"
                                   f"{self.log_text(since=self._log_offset)}")
            return 0

        self.port = wait_for(listening, timeout, f"broker did not log 'listening on'; log: {self.log_path}")
        self.started_in_s = time.perf_counter() - self._spawned_at
        return self.port

    def start(self, port: int = 0) -> BrokerProcess:
        self.spawn(port)
        self.wait_until_listening()
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; the exit status. A broker that does not stop in time is killed (and it raises)."""
        process = self._require_process()
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise TimeoutError(f"broker pid {process.pid} ignored SIGTERM for {timeout} s") from None
        _live.discard(self)
        return process.returncode

    def kill(self) -> None:
        """SIGKILL: no clean shutdown."""
        process = self._require_process()
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)
        _live.discard(self)

    def restart(self, kill: bool = False) -> BrokerProcess:
        """Stop (or kill) and start again on the same data dir, on the same port if it is still free."""
        old_port = self.port
        if self.running:
            self.kill() if kill else self.stop()
        try:
            return self.start(old_port)
        except RuntimeError:  # the port was taken meanwhile
            return self.start(0)

    def close(self) -> None:
        """Close the helpers' clients and make sure the process is gone."""
        self._close_clients()
        if self.process is not None and self.process.poll() is None:
            self.kill()
        _live.discard(self)

    # facts -----------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def serves_admin(self) -> bool:
        """Whether the broker was told to serve its admin endpoint (``admin.listener``)."""
        return "admin.listener" in self.configs or any(
            argument.startswith("admin.listener=") or argument.startswith("--override=admin.listener=")
            for argument in self.extra_args)

    @property
    def admin_url(self) -> str | None:
        """``http://127.0.0.1:PORT`` of its admin endpoint, when it serves one. The broker starts it once
        it listens, so this waits (with a deadline) for its "admin endpoint on" line, logged once it answers."""
        if self._admin_url is None and self.serves_admin and self.process is not None:
            def logged() -> str | None:
                admin = _ADMIN.search(self.log_text(since=self._log_offset))
                if admin:
                    return admin.group(1)
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"broker exited with status {self.process.returncode} before its admin "
                                       f"endpoint answered:\n{self.log_text(since=self._log_offset)}")
                return None

            self._admin_url = wait_for(logged, START_TIMEOUT_S,
                                       f"broker did not log 'admin endpoint on'; log: {self.log_path}")
        return self._admin_url

    @property
    def faults(self) -> Faults:
        """Inject faults through the broker's admin HTTP API (``kafkalite.testing.faults``)."""
        if self.admin_url is None:
            raise RuntimeError("this broker serves no admin endpoint: faults need admin.listener and the admin "
                               "extra (pip install 'kafkalite[admin]')")
        return Faults(HttpFaultBackend(self.admin_url))

    @property
    def pid(self) -> int:
        return self._require_process().pid

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    bootstrap = bootstrap_servers

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def log_text(self, since: int = 0) -> str:
        """The broker's log output (from byte offset ``since``)."""
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as log_file:
            log_file.seek(since)
            return log_file.read().decode("utf-8", "replace")

    def log_mark(self) -> int:
        """An offset for ``log_text(since=...)``: what is logged from now on."""
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def descriptors(self) -> int:
        """How many file descriptors the broker process holds (Linux)."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_mib(self) -> float:
        """The broker process's resident memory (Linux)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        """User and system CPU time the broker process has used (Linux)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _require_process(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise RuntimeError("broker was never started")
        return self.process

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BrokerProcess(pid={self.process.pid if self.process else None}, bootstrap={self.bootstrap_servers})"


def close_all() -> None:
    """End every broker process this interpreter started that is still running."""
    for process in list(_live):
        process.close()


def _admin_extra_installed() -> bool:
    """Whether the broker can serve its admin endpoint here (aiohttp and prometheus_client importable)."""
    return all(importlib.util.find_spec(name) is not None for name in ("aiohttp", "prometheus_client"))
