"""The admin endpoint: see inside a running broker, and break it on purpose.

Off unless ``admin.listener`` is set (``127.0.0.1:9644``); then ``BrokerServer`` serves, on its own
event loop, an HTTP endpoint (``http``, on aiohttp: the ``admin`` extra; ``endpoint``: its socket,
bound before the broker listens, and its start once it does, the libraries imported in a thread) with

* a JSON API under ``/v1/`` (``views``: topics and partitions, groups with their lag, producers,
  transactions, connections, the recent-request log; ``records``: message browsing), described by the
  OpenAPI document ``openapi.json``, served at ``/v1/openapi.json``;
* fault injection, ``/v1/faults`` (``faults``: the registry; ``fault_responses``: answers built with
  an injected error; ``observer``: where the faults are applied);
* ``/metrics`` in Prometheus' text format (``metrics``, on prometheus_client);
* the web console at ``/`` (``console/``: plain HTML, CSS and JavaScript, no build step).

Requests reach it through one hook: ``KafkaConnection.observer`` (``observer.RequestObserver``),
which counts, times and logs each request (``stats``) and applies faults. The observer needs no
extra package, so a test broker can inject faults without the HTTP endpoint.

Rooms: this package reads ``broker.core`` and the handler registry, and is given the connections
by ``broker.server``; nothing below the server imports it.
"""

from __future__ import annotations

__all__ = ["parse_address"]


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9644`` for IPv6) as a host and a port; ValueError when it is not one."""
    from kafkalite.broker.config import ConfigError

    host, separator, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not separator or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"admin.listener must be host:port (e.g. 127.0.0.1:9644), got {text!r}")
    return host, int(port)
