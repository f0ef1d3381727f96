"""Binding the listening sockets, before the rest of the broker is imported.

The kernel completes TCP handshakes from ``listen()`` on, so binding first lets clients connect
while the broker loads its modules and recovers its logs; their requests wait in the socket
until the broker serves them. ``socket`` is all this module needs, so it costs nothing at start.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Protocol

__all__ = ["bind_listener", "bind_listeners"]

BACKLOG = 128


class _Listener(Protocol):
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...


def bind_listener(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` resolves to (all interfaces if empty).

    As ``loop.create_server`` would, but with one port for all of them when ``port`` is 0.
    """
    # (an ASCII host passed as bytes: as text, getaddrinfo would import the IDNA codec to encode it)
    name = (host.encode("ascii") if host.isascii() else host) if host else None
    infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def bind_listeners(listeners: Sequence[_Listener]) -> list[list[socket.socket]]:
    """The sockets of each listener, in order; on failure nothing stays bound."""
    bound: list[list[socket.socket]] = []
    try:
        for listener in listeners:
            bound.append(bind_listener(listener.host, listener.port))
    except OSError:
        for sockets in bound:
            for sock in sockets:
                sock.close()
        raise
    return bound
