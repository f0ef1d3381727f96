"""What the client commands share: their common options, how they run, and how failures read.

* Options every client command takes (:func:`client_options`): ``-b/--bootstrap-server`` (default
  ``localhost:9092``, or ``KAFKALITE_BOOTSTRAP_SERVER``), ``-X/--command-config`` (a client config
  ``key=value``, or a properties file of them, as kafka-topics' ``--command-config`` takes) and
  ``--timeout`` (how long to wait for the cluster). They become a :class:`ClientSettings`.
* ``--json`` (:func:`json_option`) on every command that lists or describes.
* :func:`run_async` runs a command's client calls (the bundled asyncio client) on one event loop.
* :data:`EXPECTED_ERRORS` are the failures reported as one line (see :mod:`.app`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from kafkalite.cli import parsing
from kafkalite.client.config import ConfigError as ClientConfigError
from kafkalite.protocol.errors import KafkaError

__all__ = ["EXPECTED_ERRORS", "ClientSettings", "client_options", "json_option", "one_line", "pair_options",
           "run_async"]

DEFAULT_BOOTSTRAP_SERVER = "localhost:9092"
CLIENT_ID = "kafkalite-cli"
_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Where the cluster is, the client configs given with ``-X``, and how long to wait for it."""

    bootstrap_servers: str
    configs: Mapping[str, str]
    timeout_s: float

    @property
    def timeout_ms(self) -> int:
        return max(1, round(self.timeout_s * 1000))

    def admin_config(self) -> dict[str, Any]:
        timeout_ms = self.timeout_ms
        return {"bootstrap.servers": self.bootstrap_servers, "client.id": CLIENT_ID,
                "default.api.timeout.ms": timeout_ms, "request.timeout.ms": timeout_ms,
                "socket.connection.setup.timeout.ms": timeout_ms, **self.configs}

    def producer_config(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """The producer's config: defaults, then ``-X``, then the command's own flags (``None``: not given)."""
        given = {key: value for key, value in flags.items() if value is not None}
        return {"bootstrap.servers": self.bootstrap_servers, "client.id": CLIENT_ID,
                "max.block.ms": self.timeout_ms, **self.configs, **given}


def _command_configs(context: click.Context, parameter: click.Parameter, values: Sequence[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for value in values:
        try:
            if "=" not in value and Path(value).is_file():
                configs.update(parsing.parse_properties(Path(value).read_text(encoding="utf-8")))
            else:
                key, text = parsing.parse_pair(value)
                configs[key] = text
        except (ValueError, OSError) as exc:
            raise click.BadParameter(str(exc), context, parameter) from None
    return configs


def client_options(timeout_s: float = 10.0) -> Callable[[_F], _F]:
    """The options of every command that talks to a cluster; the command receives ``settings``."""
    def decorate(function: _F) -> _F:
        @click.option("-b", "--bootstrap-server", "bootstrap_server", envvar="KAFKALITE_BOOTSTRAP_SERVER",
                      default=DEFAULT_BOOTSTRAP_SERVER, show_default=True, metavar="HOST:PORT[,...]",
                      help="Where the cluster is (env: KAFKALITE_BOOTSTRAP_SERVER).")
        @click.option("-X", "--command-config", "command_configs", multiple=True, callback=_command_configs,
                      metavar="KEY=VALUE|FILE", help="A client config (Kafka's key names), or a properties file "
                      "of them. Repeatable.")
        @click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.001), default=timeout_s,
                      show_default=True, metavar="SECONDS", help="How long to wait for the cluster.")
        @functools.wraps(function)
        def with_settings(*args: Any, bootstrap_server: str, command_configs: dict[str, str], timeout_s: float,
                          **kwargs: Any) -> Any:
            settings = ClientSettings(bootstrap_server, command_configs, timeout_s)
            return function(*args, settings=settings, **kwargs)

        return with_settings  # type: ignore[return-value]

    return decorate


def json_option(function: _F) -> _F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")(function)


def pair_options(context: click.Context, parameter: click.Parameter, values: Sequence[str]) -> dict[str, str]:
    """A repeatable ``KEY=VALUE`` option as a dict (the last value of a key wins)."""
    pairs: dict[str, str] = {}
    for value in values:
        try:
            key, text = parsing.parse_pair(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), context, parameter) from None
        pairs[key] = text
    return pairs


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return None
    return uvloop.new_event_loop


def run_async(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a command's client calls on an event loop of their own."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(coroutine)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        text = f"{exc.filename}: {exc.strerror}"
    return text


# A failure of the cluster, of the connection or of the client's config: one line, exit status 1.
EXPECTED_ERRORS = (KafkaError, ClientConfigError, OSError, TimeoutError)
