"""The broker process: open the cluster state, bind the listeners, run timers, stop cleanly.

``BrokerServer.start`` opens the ``Cluster`` (recovering the data directory), binds every listener
(port 0 picks a free port) and accepts on them (``kafkalite.broker.accept``: with no descriptor left,
a new connection is refused with one rate-limited line while open ones are served), tells the cluster
its advertised endpoints with the ports actually bound, logs one "listening on ..." line and starts
the periodic timer (``Cluster.periodic``, every second or as the retention settings ask) that drives
time-based rolls and flushes, group and transaction timers, and retention on Kafka's schedule. The
log room's blocking file work (fsyncs, checkpoints, producer state snapshots, removing deleted
partitions) runs on one I/O thread, in order, and comes back to the loop to change state. ``stop``
stops accepting, gives in-flight requests a bounded time to finish, closes the connections, waits
for the file work in flight and closes the cluster cleanly (which writes the clean-shutdown marker).
``run`` is the CLI's entry: the event loop (uvloop), SIGTERM/SIGINT for a clean stop, exit status.

With ``admin.listener`` set, ``start`` also binds the admin endpoint's socket and puts its request
observer (``observe``, given to every connection) in place before it listens, so a missing admin
extra, a bad address or a taken port still fail the start; the endpoint's HTTP server
(``kafkalite.broker.admin.endpoint``) starts once the broker listens, its libraries imported off the
loop, and logs "admin endpoint on http://host:port/" once it answers, after "listening on ...".
``admin.port`` is known when ``start`` returns; ``await admin.serving()`` waits until it answers.
A test broker can ask for the observer without the HTTP endpoint, to inject faults. Without either,
nothing of ``kafkalite.broker.admin`` is imported; with only PLAINTEXT listeners and no authorizer,
nothing of ``kafkalite.broker.security``.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING

from kafkalite.broker.accept import Acceptor, RefusalReport, SpareDescriptor
from kafkalite.broker.config import BrokerConfig, ConfigError, Listener
from kafkalite.broker.handlers.delayed import after_dispatch
from kafkalite.broker.handlers.registry import HANDLERS, SERVED, ApiHandler
from kafkalite.broker.listen import bind_listeners
from kafkalite.broker.net import KafkaConnection, ReceiveScratch
from kafkalite.broker.quotas import ConnectionQuotas, RequestBudget

if TYPE_CHECKING:
    from ssl import SSLContext

    from kafkalite.broker.admin.endpoint import AdminEndpoint
    from kafkalite.broker.admin.observer import RequestObserver
    from kafkalite.broker.core.cluster import Cluster
    from kafkalite.broker.security.setup import BrokerSecurity

__all__ = ["BrokerServer", "run"]

log = logging.getLogger("kafkalite.server")

STOP_GRACE_S = 5.0  # how long in-flight requests may take to finish at shutdown
# From listening to importing the handlers no request has needed yet. Not 0: a client that connected
# while the broker started is waiting in the listen queue, and the loop runs due timers before it
# looks at sockets, so each pass would import a module before that client's first answer.
WARM_UP_DELAY_S = 0.1
# the APIs a client's first requests use, imported ahead first (then every other in key order)
WARM_UP_FIRST = (3, 0, 1, 2, 10, 22, 9, 11, 14, 12, 8, 13, 19, 32, 60)
# what the cluster imports when it builds a room on first use (besides the handlers)
WARM_UP_MODULES = ("kafkalite.broker.core.group.coordinator", "kafkalite.broker.core.share.manager",
                   "kafkalite.broker.core.log.cleaner", "kafkalite.broker.core.txn.coordinator",
                   "kafkalite.broker.security.scram",
                   "kafkalite.broker.security.acls")
CLEANER_OFF_CHECK_S = 5.0  # while compaction is turned off, how often to look whether it was turned on


class BrokerServer:
    """One broker: its cluster state, its listening sockets and its client connections."""

    def __init__(self, config: BrokerConfig, sockets: list[list[socket.socket]] | None = None) -> None:
        self.config = config
        self._sockets = sockets  # already bound by the caller, one list per listener
        self.cluster: Cluster | None = None
        self.bound: list[Listener] = []  # the listeners with the ports actually bound
        self.connections: set[KafkaConnection] = set()
        self._scratch = ReceiveScratch()  # where every connection's reads land between frames
        self.quotas = ConnectionQuotas(self._connection_limits)
        self.budget = RequestBudget(config.get_int("queued.max.requests"), config.get_int("queued.max.request.bytes"))
        self._acceptors: list[Acceptor] = []
        self._acceptors_of: dict[str, list[Acceptor]] = {}  # by listener name
        self._spare: SpareDescriptor | None = None  # the descriptor refusing a connection needs (accept.py)
        self._refusals: RefusalReport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._cleaner_timer: asyncio.TimerHandle | None = None
        self._warm_up: asyncio.Handle | None = None  # the next step of importing what first requests will need
        self._admin_start: asyncio.TimerHandle | None = None  # the admin endpoint's start, once the broker listens
        self._stopped = False
        self._io: ThreadPoolExecutor | None = None  # the I/O thread of the log room's blocking file work
        self._io_jobs: set[asyncio.Future[None]] = set()
        self.observer: RequestObserver | None = None  # the admin endpoint's hook in dispatch (observe())
        self.admin: AdminEndpoint | None = None  # the admin HTTP endpoint, when admin.listener is set
        self.security: BrokerSecurity | None = None  # TLS, SASL and the authorizer of each listener
        self._handlers: Mapping[int, ApiHandler] = HANDLERS  # with the authorizer on: each wrapped in its ACL checks

    async def start(self) -> None:
        from kafkalite.broker.core.cluster import Cluster, Endpoint

        listeners = self.config.listeners()
        advertised = self.config.advertised_listeners()
        names = {listener.name for listener in listeners}
        for listener in advertised:
            if listener.name not in names:
                raise ConfigError(f"advertised listener {listener} has no listener of that name in listeners")
        cluster = Cluster(self.config)
        cluster.open()
        self.cluster = cluster
        loop = asyncio.get_running_loop()
        cluster.log_manager.background.runner = partial(self._run_in_io_thread, loop)
        group_commit = cluster.log_manager.group_commit
        group_commit.use_threads(loop)  # flush.on.ack rounds: a thread of their own
        group_commit.defer = after_dispatch  # handed over once the read that made a round is dispatched
        try:
            ssl_contexts: dict[str, SSLContext | None] = {}
            if _needs_security(self.config):
                from kafkalite.broker.security.setup import BrokerSecurity

                security = BrokerSecurity.build(self.config, cluster.scram_credentials, cluster.acls)
                self.security = security if security.needed else None
                ssl_contexts = {name: listener.ssl_context for name, listener in security.listeners.items()}
                authorizer = next(iter(security.listeners.values())).authorizer
                if authorizer is not None:
                    from kafkalite.broker.security.enforce import authorizing_handlers

                    self._handlers = authorizing_handlers(HANDLERS, authorizer)
            bound_sockets = self._sockets if self._sockets is not None else bind_listeners(listeners)
            self._sockets = None
            self._spare = SpareDescriptor()
            self._refusals = RefusalReport(loop)
            for listener, sockets in zip(listeners, bound_sockets, strict=True):
                for sock in sockets:
                    sockname = sock.getsockname()
                    acceptor = Acceptor(loop, sock, str(Listener(listener.name, sockname[0], sockname[1])),
                                        partial(self._new_connection, listener.name), self._spare, self._refusals,
                                        ssl_context=ssl_contexts.get(listener.name))
                    self._acceptors.append(acceptor)
                    self._acceptors_of.setdefault(listener.name, []).append(acceptor)
                    acceptor.start()
                sockname = sockets[0].getsockname()
                self.bound.append(Listener(listener.name, listener.host or sockname[0], sockname[1]))
            if self.security is not None:  # key stores that AlterConfigs changes reach new connections
                from kafkalite.broker.security.setup import KeyStoreReloader

                cluster.dynamic_configs.reconfigurables.append(
                    KeyStoreReloader(self.config, self.security, self._install_ssl_context))
            admin_listener = self.config.get_str("admin.listener") if self.config.is_set("admin.listener") else ""
            if admin_listener:
                self._bind_admin(admin_listener)
        except BaseException:
            self._close_acceptors()
            if self.admin is not None:
                await self.admin.stop()
                self.admin = None
            if self.observer is not None:
                self.observer.loop_lag.stop()
            cluster.close(clean=True)
            raise
        ports = {listener.name: listener.port for listener in self.bound}
        cluster.endpoints[:] = [Endpoint(item.name, item.host, item.port or ports[item.name]) for item in advertised]
        line = ", ".join(str(listener) for listener in self.bound)
        advertised_line = ", ".join(str(Listener(item.name, item.host, item.port)) for item in cluster.endpoints)
        if advertised_line != line:
            line += f" (advertised as {advertised_line})"
        log.info("listening on %s", line)
        self._schedule_periodic(loop, cluster.periodic_interval_ms() / 1000)
        self._schedule_cleaner(loop)
        if self.admin is None:
            self._schedule_warm_up(loop, WARM_UP_DELAY_S)
        else:
            # Its libraries are imported in a thread, from when the warm-up would start (a client that
            # connected during the start gets its first answers without sharing the interpreter's lock
            # with that thread), while the loop answers; the warm-up's own imports follow them rather
            # than share the lock with them too (startup.py --admin: see the README).
            self._admin_start = loop.call_later(WARM_UP_DELAY_S, self.admin.serve)
            self.admin.after_import(lambda: None if self._stopped else self._schedule_warm_up(loop, 0))

    def _run_in_io_thread(self, loop: asyncio.AbstractEventLoop, work: Callable[[], None],
                          then: Callable[[BaseException | None], None]) -> None:
        """The log room's blocking file work (fsyncs, checkpoints, snapshots, removing files) runs on one
        I/O thread, in the order it was submitted; what follows it runs back on the loop."""
        if self._io is None:
            self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafkalite-io")
        future = loop.run_in_executor(self._io, work)
        self._io_jobs.add(future)

        def done(finished: asyncio.Future[None]) -> None:
            self._io_jobs.discard(finished)
            try:
                then(None if finished.cancelled() else finished.exception())
            except Exception:
                log.exception("applying background file work failed")

        future.add_done_callback(done)

    def observe(self) -> RequestObserver:
        """The request observer (made on first use and given to every connection). On the loop only."""
        if self.observer is None:
            from kafkalite.broker.admin.observer import RequestObserver

            assert self.cluster is not None  # start() opened it
            observer = self.observer = RequestObserver(self.cluster)
            for connection in self.connections:
                connection.observer = observer
            observer.loop_lag.start(asyncio.get_running_loop())
        return self.observer

    def _bind_admin(self, address: str) -> None:
        """What can keep the admin endpoint from starting, checked before the broker listens: its
        address, its extra (found, not imported) and its port (bound). Its observer is in place from
        here on; its HTTP server starts once the broker listens (``AdminEndpoint.serve``)."""
        from kafkalite.broker.admin import parse_address
        from kafkalite.broker.admin.endpoint import AdminEndpoint, check_installed

        host, port = parse_address(address)
        check_installed()
        assert self.cluster is not None  # start() opened it
        self.admin = AdminEndpoint(host, port, self.cluster, self.observe(), self.connections)

    def _install_ssl_context(self, listener_name: str, context: SSLContext) -> None:
        for acceptor in self._acceptors_of.get(listener_name, ()):
            acceptor.ssl_context = context

    def _new_connection(self, listener_name: str) -> KafkaConnection:
        assert self.cluster is not None  # connections are accepted only once start() opened it
        config = self.config
        security = None if self.security is None else self.security.listeners[listener_name]
        connection: Callable[..., KafkaConnection] = KafkaConnection
        if security is not None and not security.plain:
            from kafkalite.broker.security.connection import SecureConnection

            connection = partial(SecureConnection, security=security)
        return connection(self.cluster, connections=self.connections, scratch=self._scratch, handlers=self._handlers,
                          listener_name=listener_name, observer=self.observer,
                          max_request_bytes=config.get_int("socket.request.max.bytes"),
                          idle_ms=config.get_int("connections.max.idle.ms"),
                          receive_timeout_ms=config.get_int("socket.request.receive.timeout.ms"),
                          quotas=self.quotas, budget=self.budget)

    def _connection_limits(self) -> tuple[int, int, str]:
        """max.connections, max.connections.per.ip and its overrides as they are now (they are dynamic)."""
        config = self.config
        return (config.get_int("max.connections"), config.get_int("max.connections.per.ip"),
                config.get_str("max.connections.per.ip.overrides"))

    def _schedule_periodic(self, loop: asyncio.AbstractEventLoop, interval: float) -> None:
        cluster = self.cluster
        assert cluster is not None  # start() opened it before arming the timer

        def tick() -> None:
            try:
                cluster.periodic(int(time.time() * 1000))
            except OSError as exc:  # a full disk, a file limit...: said once per tick, retried on the next
                log.error("periodic work failed, will retry: %s", exc)
            except Exception:
                log.exception("periodic work failed")
            if not self._stopped:
                self._timer = loop.call_later(interval, tick)

        self._timer = loop.call_later(interval, tick)

    def _schedule_cleaner(self, loop: asyncio.AbstractEventLoop) -> None:
        """Log compaction in slices of a few milliseconds: each slice is a timer callback, so the loop
        serves every ready connection between two of them."""
        cluster = self.cluster
        assert cluster is not None

        def clean() -> None:
            delay: float | None = CLEANER_OFF_CHECK_S
            try:
                cleaner = cluster.log_cleaner
            except (OSError, ImportError) as exc:  # its code cannot be imported (no descriptor left): try later
                log.warning("the log cleaner could not start, trying again in %g s: %s", CLEANER_OFF_CHECK_S, exc)
            else:
                try:
                    delay = cleaner.run_slice(int(time.time() * 1000))
                except Exception:
                    log.exception("log cleaning failed")
                    cleaner.stop()
            if not self._stopped:
                self._cleaner_timer = loop.call_later(CLEANER_OFF_CHECK_S if delay is None else delay, clean)

        # the first slice (which builds the cleaner) once the first answers are out, as the warm-up
        self._cleaner_timer = loop.call_later(WARM_UP_DELAY_S, clean)

    def _schedule_warm_up(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        """Import, ``delay`` from now (``WARM_UP_DELAY_S`` after the broker listens, or as soon as the
        admin endpoint's libraries are imported), the handlers (and the rooms built on first use) that
        no request has loaded yet, one module per pass of the loop so requests are served in between.
        A start thus answers its first requests without waiting for code they do not use (a client
        that connected during the start, none; a later one, one module's import at most), and holds
        every module a fraction of a second later, as a broker that imported them all up front did: an
        import needs a file descriptor, and a broker out of descriptors must still answer any API."""
        keys = [*WARM_UP_FIRST, *(key for key in sorted(SERVED) if key not in WARM_UP_FIRST)]
        pending = [f"kafkalite.broker.handlers.{SERVED[key].module}" for key in keys]
        pending += WARM_UP_MODULES

        def step() -> None:
            while pending:
                name = pending.pop(0)
                if name in sys.modules:
                    continue
                try:
                    importlib.import_module(name)
                except Exception as exc:  # the first request of that API imports it (or says why it cannot)
                    log.debug("importing %s ahead of use failed: %s", name, exc)
                break
            self._warm_up = loop.call_soon(step) if pending and not self._stopped else None

        self._warm_up = loop.call_later(delay, step)

    def _close_acceptors(self) -> None:
        for acceptor in self._acceptors:
            acceptor.close()
        if self._refusals is not None:
            self._refusals.close()
        if self._spare is not None:
            self._spare.close()

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop accepting, let in-flight requests finish (at most ``grace_s``), close everything."""
        if self._stopped:
            return
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self._cleaner_timer is not None:
            self._cleaner_timer.cancel()
        if self._warm_up is not None:
            self._warm_up.cancel()
        if self._admin_start is not None:
            self._admin_start.cancel()
        if self.cluster is not None:
            self.cluster.stop_log_cleaner()
        if self.admin is not None:
            await self.admin.stop()
        if self.observer is not None:
            self.observer.loop_lag.stop()
        for acceptor in self._acceptors:
            acceptor.close()
        connections = list(self.connections)
        drains = [connection.drain() for connection in connections]
        if drains:
            await asyncio.wait(drains, timeout=grace_s)
        for connection in connections:
            connection.close()
        for acceptor in self._acceptors:
            try:
                await asyncio.wait_for(acceptor.wait_closed(), timeout=1.0)
            except TimeoutError:
                pass
        self._close_acceptors()
        for connection in list(self.connections):
            connection.abort()
        while self._io_jobs:  # fsyncs and checkpoints in flight finish before the logs close
            await asyncio.wait(list(self._io_jobs))
        if self.cluster is not None:
            self.cluster.log_manager.background.runner = None
            self.cluster.close(clean=True)
        if self._io is not None:
            self._io.shutdown(wait=True)
        log.info("stopped")


def _needs_security(config: BrokerConfig) -> bool:
    """Whether a listener needs TLS or SASL, or an authorizer is named: else every connection is a plain
    ``KafkaConnection`` and nothing of ``kafkalite.broker.security`` is imported."""
    protocols = config.listener_security_protocols()
    # (is_set first: the authorizer's key is not a start key, and its default names none)
    return (config.is_set("authorizer.class.name") and bool(config.get("authorizer.class.name"))) or any(
        protocols[listener.name] != "PLAINTEXT" for listener in config.listeners())


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (glibc's malloc.h)
_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
_TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024


def _keep_freed_memory() -> None:
    """Ask glibc's malloc to serve blocks up to 32 MiB from its heap and to keep up to 64 MiB of freed
    heap, instead of mapping a fresh block for each large buffer and unmapping it when freed.

    The broker allocates and frees megabytes per request (a fetch's batches read from the log, a
    response's buffers); by default each such block is a fresh mapping whose every page the kernel
    faults in and zeroes, and the heap's free top is given back at 128 KiB. On the 2-core development
    VM, reading 8 x 1 MiB blocks with ``os.pread`` 300 times took 1.6-2.0 CPU seconds with the defaults
    and 0.25 with these thresholds. The cost: up to 64 MiB of freed memory stays resident after a
    burst. Other C libraries (no ``mallopt``) are left as they are. Only the standalone broker does
    this; one embedded in another process leaves its allocator alone.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES)


def run(config: BrokerConfig, sockets: list[list[socket.socket]] | None = None,
        on_started: Callable[[BrokerServer], None] | None = None) -> int:
    """Serve until SIGTERM or SIGINT, then stop cleanly. Returns the process exit status.

    ``sockets``: listening sockets bound before this module was imported (see ``kafkalite.broker.listen``);
    ``on_started``: called once the broker serves (``kafkalite serve --security`` stores its users then).
    """

    async def serve() -> int:
        loop = asyncio.get_running_loop()
        stop_requested = asyncio.Event()
        status = 0
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop_requested.set)
        server = BrokerServer(config, sockets)
        try:
            await server.start()
        except (OSError, ConfigError) as exc:
            log.error("cannot start: %s", exc)
            return 1
        if on_started is not None:
            on_started(server)
        # Everything loaded so far (modules, generated classes, recovered state) lives as long as the
        # process: keep it out of the cyclic collector's full passes, which would rescan it forever.
        # The command turns the collector off while it starts (kafkalite.cli); it is on from here, or,
        # with the admin endpoint, from when its HTTP libraries are imported (in a thread, meanwhile), so
        # that they are frozen too. (A broker embedded in someone else's process leaves their collector alone.)
        gc.freeze()
        if server.admin is None:
            gc.enable()
        else:
            def admin_started(serving: asyncio.Future[None]) -> None:
                nonlocal status
                gc.freeze()
                gc.enable()
                if not serving.cancelled() and serving.exception() is not None:  # (said by the endpoint)
                    status = 1
                    stop_requested.set()

            asyncio.ensure_future(server.admin.serving()).add_done_callback(admin_started)
        # (after the first answers: it loads ctypes, which no request needs)
        asyncio.get_running_loop().call_later(WARM_UP_DELAY_S, _keep_freed_memory)
        await stop_requested.wait()
        log.info("shutting down")
        await server.stop()
        return status

    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; plain asyncio still works
        return asyncio.run(serve())
    return uvloop.run(serve())
