"""The admin endpoint's socket and its start, which never holds back the broker's first Kafka answer.

``BrokerServer.start`` makes an ``AdminEndpoint`` before it logs "listening on": ``check_installed``
looks for the admin extra's packages without importing them (``importlib.util.find_spec``), and the
constructor binds the endpoint's listening socket, so a missing extra, a bad address or a taken port
still fail the start, with no Kafka listener left open. The request observer is in place by then.

What takes time is the HTTP libraries: importing aiohttp and prometheus_client costs about 0.3 s of
CPU on a small VM (``aiohttp.connector`` alone builds two SSL contexts at import), which the broker
once paid before it listened. ``serve``, which the server calls ``WARM_UP_DELAY_S`` after it listens
(when a client that connected during the start has its first answers), imports them in a thread of
its own while the loop answers Kafka requests, then builds the application on the loop
(``kafkalite.broker.admin.http``), serves it on the socket bound at start (aiohttp's ``SockSite``)
and logs "admin endpoint on http://host:port/" once it answers. An HTTP client that connects sooner
waits in the socket's accept queue, as a Kafka client does for a starting broker. The server's own
warm-up imports wait until the thread's are over (``after_import``).

Why a thread (measured with ``benchmarks/startup.py --admin``, see the README): on the loop, the
import stops it for 0.3 s, before the first answer (as it did) or in the middle of a client's first
requests (after the first answers); in a thread it shares the interpreter's lock, which the loop gets
back within one switch interval (5 ms) when it has work (the certificate loading of the SSL contexts
releases it). The thread imports only third-party packages and ``importlib.resources``, which nothing
else of the broker imports, so the loop does not wait on an import lock the thread holds (they share
standard library modules at most, a few milliseconds each); the endpoint's own modules are imported
on the loop afterwards. An import that fails for want of a file descriptor (a flood of connections
just after the start) is tried again ``RETRY_S`` later, as the log cleaner's is; any other failure
is logged, and ``kafkalite serve`` then stops, exit status 1.

``serving`` waits until the endpoint answers (or raises why it could not start): the in-process test
broker waits for it before its ``start`` returns.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from kafkalite.broker.config import ConfigError

if TYPE_CHECKING:
    from kafkalite.broker.admin.observer import RequestObserver
    from kafkalite.broker.core.cluster import Cluster
    from kafkalite.broker.net import KafkaConnection

__all__ = ["HTTP_PACKAGES", "AdminEndpoint", "check_installed"]

log = logging.getLogger("kafkalite.server")

HTTP_PACKAGES = ("aiohttp", "prometheus_client")  # the admin extra
# what kafkalite.broker.admin.http and metrics import that nothing else of the broker does, imported off the loop
_HTTP_MODULES = ("aiohttp.web", "prometheus_client", "prometheus_client.core", "importlib.resources")
RETRY_S = 5.0  # how long until another try when the endpoint could not start for want of a descriptor


def check_installed() -> None:
    """ConfigError unless the admin extra's packages can be imported (found, not imported: cheap)."""
    for name in HTTP_PACKAGES:
        if importlib.util.find_spec(name) is None:
            raise ConfigError(f"admin.listener needs the admin extra (pip install 'kafkalite[admin]'): "
                              f"No module named {name!r}")


def _import_http_libraries() -> None:
    for name in _HTTP_MODULES:
        importlib.import_module(name)


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


class AdminEndpoint:
    """The admin endpoint's listening socket (bound at once) and the HTTP server ``serve`` starts on it."""

    def __init__(self, host: str, port: int, cluster: Cluster, observer: RequestObserver,
                 connections: Iterable[KafkaConnection]) -> None:
        """Bind ``host:port`` (0: a free port); OSError when it cannot be bound."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self._socket: socket.socket | None = socket.create_server((host, port), family=family)
        except OSError as exc:  # said as the admin endpoint's: the Kafka listeners bound fine
            shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise OSError(exc.errno, f"the admin endpoint (admin.listener) cannot listen on {shown}: "
                                     f"{exc.strerror or exc}") from exc
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        self.cluster, self.observer, self.connections = cluster, observer, connections
        self._stop_http: Callable[[], Awaitable[None]] | None = None  # once it serves
        self._task: asyncio.Task[None] | None = None
        self._served: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # what serving() waits for
        self._served.add_done_callback(_retrieve)  # a failure is logged; whoever waits for it sees it
        self._stopped = False
        self._imported = False  # the thread's first import of the HTTP libraries is over
        self._after_import: list[Callable[[], None]] = []

    @property
    def url(self) -> str:
        """``http://host:port/`` (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve(self) -> None:
        """Start serving in the background (on the running loop); ``serving`` waits for it."""
        if self._task is None and not self._stopped:
            self._task = asyncio.get_running_loop().create_task(self._serve(), name="kafkalite-admin-start")
            self._task.add_done_callback(_retrieve)

    def after_import(self, then: Callable[[], None]) -> None:
        """Call ``then`` on the loop once the thread's first import of the HTTP libraries is over (done or
        failed), or at once when it already is or the endpoint was stopped."""
        if self._imported or self._stopped:
            then()
        else:
            self._after_import.append(then)

    async def serving(self) -> None:
        """Return once the endpoint answers HTTP requests (``serve`` started it); raise what kept it from
        starting (CancelledError when it was stopped first)."""
        await asyncio.shield(self._served)

    async def _serve(self) -> None:
        try:
            await self._start_http()
        except asyncio.CancelledError:
            self._served.cancel()
            raise
        except Exception as exc:
            self._served.set_exception(exc)
            raise
        self._served.set_result(None)
        log.info("admin endpoint on %s", self.url)

    async def _start_http(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                try:
                    await loop.run_in_executor(None, _import_http_libraries)
                finally:
                    self._import_over()
                from kafkalite.broker.admin.http import build_app, start_server

                sock = self._socket
                assert sock is not None  # closed only by stop(), which cancels this first
                app = build_app(self.cluster, self.observer, self.connections)
                self._stop_http = await start_server(app, sock)
                break
            except OSError as exc:  # no descriptor left to open a module, most likely: try again later
                log.warning("the admin endpoint could not start yet, trying again in %g s: %s", RETRY_S, exc)
            except Exception as exc:
                log.error("cannot start the admin endpoint (%s): %s", self.url, exc)
                raise
            await asyncio.sleep(RETRY_S)

    def _import_over(self) -> None:
        self._imported = True
        waiting, self._after_import = self._after_import, []
        for then in waiting:
            then()

    async def stop(self) -> None:
        """Stop serving (or starting) and close the socket."""
        self._stopped = True
        self._after_import.clear()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # cancelled, or it failed: either way it is over
                pass
        if self._stop_http is not None:
            stop_http, self._stop_http = self._stop_http, None
            await stop_http()
        if not self._served.done():
            self._served.cancel()
        if self._socket is not None:
            sock, self._socket = self._socket, None
            sock.close()
