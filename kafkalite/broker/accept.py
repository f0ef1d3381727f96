"""Accepting client connections, and saying so when the process has no descriptor left for one.

The event loop's own servers accept in a loop the broker cannot see into: when ``accept()`` fails
with EMFILE (the process's open-file limit) or ENFILE (the system's), libuv closes a spare
descriptor, accepts the waiting connection and closes it, without a word. So the broker accepts
itself: an ``Acceptor`` watches one listening socket with ``add_reader``, accepts what is waiting
(non-blocking, at most ``BACKLOG`` connections per wake-up so other connections are served between
bursts) and hands each socket to ``loop.connect_accepted_socket`` with the connection's protocol.

When ``accept()`` runs out of descriptors, the connections waiting in the backlog are refused the
same way: the ``SpareDescriptor`` every acceptor shares is closed, which makes room to accept each
waiting connection and close it at once (the client sees the connection closed and retries), then
it is opened again. Connections already open are not touched and keep being served. Should the
spare be gone too (something else took the freed slot), the acceptor stops watching its socket for
``RETRY_S`` and tries again, rather than spinning on a socket that stays readable. Refusals are
reported by ``RefusalReport``: one ERROR line at the first, then at most one line per
``REPORT_INTERVAL_S`` with how many connections were refused meanwhile; no traceback.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Acceptor", "RefusalReport", "SpareDescriptor"]

log = logging.getLogger("kafkalite.server")

BACKLOG = 128  # connections accepted per wake-up at most
RETRY_S = 1.0  # without a spare descriptor: how long an acceptor waits before trying again
REPORT_INTERVAL_S = 10.0  # at most one line per this long about refused connections
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class SpareDescriptor:
    """One descriptor held in reserve, given up for a moment to accept (and close) a connection."""

    def __init__(self) -> None:
        self._fd = -1
        self.take()

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def take(self) -> bool:
        """Hold the spare again if it is not held; whether it is held now."""
        if self._fd < 0:
            try:
                self._fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return False
        return True

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    close = release


class RefusalReport:
    """Connections refused for want of resources, said in one line now and then, never once per attempt."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval_s: float = REPORT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._loop = loop
        self._interval_s = interval_s
        self._clock = clock
        self._next_line_at = float("-inf")
        self._unsaid: dict[str, tuple[int, str]] = {}  # listener -> (refused since the last line, why)
        self._timer: asyncio.TimerHandle | None = None
        self.refused = 0  # in all, since the start

    def refused_connections(self, listener: str, count: int, reason: OSError) -> None:
        self.refused += count
        previous, _ = self._unsaid.get(listener, (0, ""))
        self._unsaid[listener] = (previous + count, _describe(reason))
        now = self._clock()
        if now >= self._next_line_at:
            self._say(now)
        elif self._timer is None:
            self._timer = self._loop.call_later(self._next_line_at - now, self._say_later)

    def _say_later(self) -> None:
        self._timer = None
        if self._unsaid:
            self._say(self._clock())

    def _say(self, now: float) -> None:
        for listener, (count, why) in self._unsaid.items():
            what = (f"refused {count} connection{'' if count == 1 else 's'}" if count
                    else "new connections wait until a descriptor is free")
            log.error("cannot accept connections on %s: %s; %s (connections already open are still served; "
                      "at most one such line per %g s)", listener, why, what, self._interval_s)
        self._unsaid.clear()
        self._next_line_at = now + self._interval_s

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _describe(reason: OSError) -> str:
    if reason.errno == errno.EMFILE:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
        return f"the process has no file descriptor left (open-file limit {limit})"
    if reason.errno == errno.ENFILE:
        return "the system has no file descriptor left"
    return reason.strerror or str(reason)


class Acceptor:
    """Accepts the connections of one listening socket for ``protocol_factory``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, listener: str,
                 protocol_factory: Callable[[], asyncio.BaseProtocol], spare: SpareDescriptor,
                 report: RefusalReport, ssl_context: ssl.SSLContext | None = None) -> None:
        self._loop = loop
        # a TLS listener's: the loop does the handshake before the protocol sees bytes (replaced when a
        # dynamic key store change makes a new one: only later connections use it)
        self.ssl_context = ssl_context
        self._socket = sock
        self._listener = listener
        self._protocol_factory = protocol_factory
        self._spare = spare
        self._report = report
        self._handshakes: set[asyncio.Future[Any]] = set()  # sockets being handed to the loop
        self._watching = False
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    def start(self) -> None:
        self._socket.setblocking(False)
        self._watch()

    def _watch(self) -> None:
        self._retry = None
        if not self._closed and not self._watching:
            self._loop.add_reader(self._socket.fileno(), self._accept_waiting)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching:
            self._loop.remove_reader(self._socket.fileno())
            self._watching = False

    def _accept_waiting(self) -> None:
        for accepted in range(BACKLOG):
            try:
                connection, _ = self._socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:  # the client gave up before we got to it
                continue
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    # accept() fails so before it looks at the backlog: after the connection that took
                    # the last descriptor, nothing may be waiting at all.
                    return self._refuse_waiting(exc, woken_for_it=accepted == 0)
                log.error("cannot accept a connection on %s: %s", self._listener, exc)
                return self._pause()
            self._hand_over(connection)

    def _hand_over(self, connection: socket.socket) -> None:
        connection.setblocking(False)
        handshake = self._loop.create_task(self._loop.connect_accepted_socket(self._protocol_factory, connection,
                                                                              ssl=self.ssl_context))
        self._handshakes.add(handshake)
        handshake.add_done_callback(self._handed_over)

    def _handed_over(self, handshake: asyncio.Future[Any]) -> None:
        self._handshakes.discard(handshake)
        if handshake.cancelled():
            return
        exc = handshake.exception()
        if isinstance(exc, (ssl.SSLError, ConnectionError, TimeoutError)):  # the client's side of a TLS handshake
            log.info("a connection accepted on %s failed its TLS handshake: %s", self._listener, exc)
        elif exc is not None:
            log.error("cannot serve a connection accepted on %s: %s", self._listener, exc)

    def _refuse_waiting(self, reason: OSError, woken_for_it: bool) -> None:
        """No descriptor for a new connection: accept and close what waits, with the spare's slot."""
        if not self._spare.held:
            self._spare.take()
        if not self._spare.held:
            if woken_for_it:  # a connection waits, and cannot even be refused
                self._report.refused_connections(self._listener, 0, reason)
            return self._pause()
        self._spare.release()
        refused = 0
        try:
            for _ in range(BACKLOG):
                try:
                    connection, _ = self._socket.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except ConnectionAbortedError:
                    continue
                except OSError:
                    break
                connection.close()
                refused += 1
        finally:
            self._spare.take()
        if refused:
            self._report.refused_connections(self._listener, refused, reason)
        if not self._spare.held:
            self._pause()

    def _pause(self) -> None:
        """Stop watching the socket for ``RETRY_S``: it stays readable while nothing can be done."""
        self._unwatch()
        if self._retry is None and not self._closed:
            self._retry = self._loop.call_later(RETRY_S, self._watch)

    def close(self) -> None:
        """Stop accepting and close the listening socket (connections already made stay open)."""
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        if self._retry is not None:
            self._retry.cancel()
        self._socket.close()

    async def wait_closed(self) -> None:
        """Until the connections accepted before ``close`` have been handed to their protocols."""
        if self._handshakes:
            await asyncio.wait(list(self._handshakes))
