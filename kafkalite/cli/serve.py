"""``kafkalite serve``: run the broker.

    kafkalite [serve] [--config server.properties] [--port N] [--listeners ...]
              [--advertised-listeners ...] [--data-dir DIR] [--memory] [--log-level LEVEL]
              [--security PROTOCOL[:MECHANISM]] [--override key=value]... [key=value ...]

``serve`` is the default command, so ``python -m kafkalite --config config/server.properties`` works.
Configuration precedence, lowest first: defaults, the ``--config`` file, ``KAFKALITE_*`` environment
variables, ``key=value`` pairs (positional or ``--override``), then the dedicated flags. Arguments are
read with argparse and the listening sockets are bound before the broker is imported, so that clients
can connect as early as possible; nothing of the other commands (or of their CLI library) is imported.
``--security SASL_SSL:SCRAM-SHA-256`` makes a secured development broker (``serve_security``).

Arguments in the plain forms (full option names, each value its own argument or after ``=``, the
``key=value`` pairs last) are read without argparse, whose import and first parse (gettext looks
up its locale) cost about 5 ms of a start; anything else (``--help``, an abbreviated or unknown
option, a bad value, pairs between options) goes to argparse, which gives its usual answer. A unit
test checks that both read every plain form alike.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

from kafkalite.broker.config import BrokerConfig, ConfigError, Listener, parse_listener
from kafkalite.broker.limits import raise_open_file_limit
from kafkalite.broker.listen import bind_listeners
from kafkalite.broker.logs import FORMATS, configure_logging

if TYPE_CHECKING:
    import argparse

    from kafkalite.broker.server import BrokerServer

__all__ = ["build_config", "main"]

_SUBCOMMANDS = ("serve",)
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The options of ``_parser`` that take a value, by name, and the attribute each sets.
_VALUE_OPTIONS = {"--config": "config", "--port": "port", "--listeners": "listeners",
                  "--advertised-listeners": "advertised_listeners", "--data-dir": "data_dir",
                  "--log-level": "log_level", "--log-format": "log_format", "--security": "security"}


def _parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(prog="kafkalite",
                                     description="A single-node broker that speaks the Kafka protocol.")
    subcommands = parser.add_subparsers(dest="command")
    serve = subcommands.add_parser("serve", help="run the broker (the default)",
                                   description="Run the broker until SIGTERM or SIGINT.")
    serve.add_argument("--config", metavar="PATH", help="a Kafka server.properties file")
    serve.add_argument("--port", type=int, help="port of the first listener (0 picks a free one)")
    serve.add_argument("--listeners", help="listeners, e.g. PLAINTEXT://127.0.0.1:9092")
    serve.add_argument("--advertised-listeners", help="what clients are told to connect to")
    serve.add_argument("--data-dir", metavar="DIR", help="data directory (sets log.dirs)")
    serve.add_argument("--memory", action="store_true", help="keep all data in memory (log.storage=memory)")
    serve.add_argument("--log-level", default="INFO", type=str.upper, choices=_LOG_LEVELS)
    serve.add_argument("--log-format", default="text", choices=FORMATS,
                       help="text for people (the default), json for one JSON object per line")
    serve.add_argument("--security", metavar="PROTOCOL[:MECHANISM]",
                       help="a secured development broker: SSL, SASL_PLAINTEXT or SASL_SSL, with PLAIN, "
                            "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (one listener on 127.0.0.1, users "
                            "admin, alice and bob, certificates made for TLS; prints the client configs)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="set any config key")
    serve.add_argument("pairs", nargs="*", metavar="KEY=VALUE", help="set any config key")
    return parser


def _parse_args(argv: Sequence[str]) -> argparse.Namespace | SimpleNamespace:
    argv = list(argv)
    if not argv or (argv[0] not in _SUBCOMMANDS and argv[0] not in ("-h", "--help")):
        argv.insert(0, "serve")
    plain = _parse_plain(argv[1:]) if argv[0] == "serve" else None
    return plain if plain is not None else _parser().parse_args(argv)


def _parse_plain(argv: Sequence[str]) -> SimpleNamespace | None:
    """What argparse makes of ``serve ARGV`` when ARGV has only the plain forms (see the module
    docstring); None for anything else, which argparse then reads."""
    values: dict[str, object] = {"command": "serve", "config": None, "port": None, "listeners": None,
                                 "advertised_listeners": None, "data_dir": None, "memory": False,
                                 "log_level": "INFO", "log_format": "text", "security": None,
                                 "override": [], "pairs": []}
    overrides: list[str] = []
    position = 0
    while position < len(argv) and argv[position].startswith("-"):
        name, equals, value = argv[position].partition("=")
        position += 1
        if name == "--memory" and not equals:
            values["memory"] = True
            continue
        if name != "--override" and name not in _VALUE_OPTIONS:
            return None
        if not equals:
            if position == len(argv) or argv[position].startswith("-"):
                return None
            value = argv[position]
            position += 1
        if name == "--override":
            overrides.append(value)
        elif name == "--port":
            try:
                values["port"] = int(value)
            except ValueError:
                return None
        elif name == "--log-level":
            if value.upper() not in _LOG_LEVELS:
                return None
            values["log_level"] = value.upper()
        elif name == "--log-format" and value not in FORMATS:
            return None
        else:
            values[_VALUE_OPTIONS[name]] = value
    pairs = list(argv[position:])
    if any(pair.startswith("-") or "=" not in pair for pair in pairs):
        return None
    values["override"], values["pairs"] = overrides, pairs
    return SimpleNamespace(**values)


def build_config(args: argparse.Namespace | SimpleNamespace) -> BrokerConfig:
    """The configuration the arguments describe (file, environment, pairs, then flags)."""
    overrides: dict[str, str] = {}
    for pair in [*args.override, *args.pairs]:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise ConfigError(f"expected key=value, got {pair!r}")
        overrides[key.strip()] = value
    if args.listeners is not None:
        overrides["listeners"] = args.listeners
    if args.advertised_listeners is not None:
        overrides["advertised.listeners"] = args.advertised_listeners
    if args.data_dir is not None:
        overrides["log.dirs"] = args.data_dir
    if args.memory:
        overrides["log.storage"] = "memory"
    config = BrokerConfig.load(args.config, overrides)
    if args.port is not None:
        moved = _with_port(config, args.port, rewrite_advertised=args.advertised_listeners is None)
        config = config.with_overrides(moved)
    return config


def _with_port(config: BrokerConfig, port: int, rewrite_advertised: bool) -> dict[str, str]:
    """Overrides that move the first served listener to ``port`` (and its explicit advertised twin)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a port number")
    first = config.listeners()[0]
    listeners = [parse_listener(text) for text in config.get_list("listeners")]
    changes = {"listeners": ",".join(str(Listener(item.name, item.host, port) if item == first else item)
                                     for item in listeners)}
    if rewrite_advertised and config.is_set("advertised.listeners"):
        advertised = config.advertised_listeners()
        changes["advertised.listeners"] = ",".join(
            str(Listener(item.name, item.host, port) if item.name == first.name else item) for item in advertised)
    return changes


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.log_level, args.log_format)
    secured = None
    try:
        config = build_config(args)
        if args.security:
            if args.listeners is not None or args.advertised_listeners is not None:
                raise ConfigError("--security makes its own listener: give --port, not --listeners")
            from kafkalite.cli.serve_security import SecuredServe

            secured = SecuredServe(args.security, config.data_dir())
            config = config.with_overrides(secured.broker_overrides(args.port))
    except (ConfigError, OSError, ValueError, RuntimeError) as exc:
        print(f"kafkalite: {exc}", file=sys.stderr)
        if secured is not None:
            secured.close()
        return 2
    try:
        return _serve(config, None if secured is None else secured.on_started)
    finally:
        if secured is not None:
            secured.close()


def _serve(config: BrokerConfig, on_started: Callable[[BrokerServer], None] | None) -> int:
    raise_open_file_limit()
    # Bind first: clients can connect while the rest of the broker loads and recovers.
    try:
        sockets = bind_listeners(config.listeners())
    except OSError as exc:
        logging.getLogger("kafkalite.server").error("cannot start: %s", exc)
        return 1
    from kafkalite.broker.server import run

    return run(config, sockets, on_started)
