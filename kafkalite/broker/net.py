"""The network glue: one ``KafkaConnection`` per client socket (``buffer_updated -> parse -> dispatch``).

Framing: an int32 size (checked against ``socket.request.max.bytes`` before anything is allocated),
then the frame. The connection is an ``asyncio.BufferedProtocol``: the loop receives straight into
the buffer ``get_buffer`` returns (no ``bytes`` per read). Between frames that is a ``ReceiveScratch``
of ``SCRATCH_BYTES`` that every connection of the server shares: the loop calls ``get_buffer``, reads
and calls ``buffer_updated`` for one connection at a time, and a connection leaves nothing in the
scratch when ``buffer_updated`` returns, so an idle connection holds no buffer at all. A frame
complete in the scratch is copied out, and the copy dispatched: handlers keep their request (async
ones) or views of it (Produce records, until the append) after the call. A frame not complete in the
scratch gets a bytearray of its own: the part already read is copied in, the rest is received
straight into it, and it is dispatched as a view. That buffer grows as the bytes arrive (from
``SCRATCH_BYTES``, doubling, up to the frame's size; a large bytearray grows in place), so a size
prefix that promises 100 MiB costs what was actually sent, not what was promised. Each byte is
copied at most once after the kernel, and most of a large Produce never. Once such a frame is handled
and nothing holds a view of it any more (a handler that keeps part of its request keeps the buffer),
its buffer becomes the scratch's ``spare`` (rounded up to a power of two, at most ``SPARE_BYTES``; one
per server): the next frame that fits is received straight into it, so a stream of 1 MiB Produce
requests allocates and zero-fills no buffer per request. A size prefix split across
reads (at most 3 bytes) is kept by the connection and put back at the front of the scratch for its
next read.

Dispatch: decode the header, find the handler in the registry, decode the body (Produce and Fetch
through the codec's hand-written decoders, ``framing.decode_request_body``), call the handler with a
``RequestContext``. It answers with a response, None (no response: Produce acks=0) or an awaitable
of either (run as a task, which writes the answer in the step it completes). Responses leave in
request order: a request that waits, or that arrives while an earlier one waits, takes a slot in
``_pending``, and slots are written from the front as they complete; a request with nothing ahead
of it that is answered at once (Produce with acks=0 or 1, a Fetch with data) is written without a
slot, so the common request costs no task, no future and no slot.

Bad input (size out of range, malformed header or body, unknown API key, unsupported version)
is logged once with the peer address and closes this connection only; ApiVersions at an unknown
version is instead answered in v0 format with UNSUPPORTED_VERSION and the key list, as Kafka does.
A handler that raises is logged with its traceback and closes the connection.

Back-pressure: a connection stops dispatching, keeps the rest of what it has read (at most one read,
``SCRATCH_BYTES``) and pauses reading while ``max_in_flight`` requests are unanswered, while its
write buffer is above its high-water mark (a client that does not read its responses), or while the
server's ``RequestBudget`` (``queued.max.requests``, ``queued.max.request.bytes``) has no room for a
new request; it goes on from the kept bytes once the cause is gone. So what a connection holds is
bounded whatever the client pipelines. ``ConnectionQuotas`` refuses connections over
``max.connections`` and ``max.connections.per.ip`` when they are made.

Timers: ``connections.max.idle.ms`` closes a connection with nothing received or sent for that long
and nothing in flight; ``socket.request.receive.timeout.ms`` closes one whose request frame started
arriving that long ago and is still incomplete (a client that sends part of a frame, or a bare size
prefix, and stops). One timer per connection serves both; it re-arms only when it fires (activity
just moves a timestamp) or when a frame starts arriving before it is due.

Observer: with the admin endpoint on, ``observer`` (``kafkalite.broker.admin.observer``) is called in
place of the handler, to count, time and log the request and to apply injected faults, and is told
the size of each response written. Without it (the default) the cost is one attribute check per
request and one per response.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import os
import socket
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, MutableSet, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, cast

from kafkalite.broker.core.log.region import FileRegion, RegionTruncated, read_pieces, send_now
from kafkalite.broker.handlers.api_versions import api_versions_response
from kafkalite.broker.handlers.delayed import DelayedAnswer, begin_dispatch, run_after_dispatch
from kafkalite.broker.handlers.registry import HANDLERS, ApiHandler, RequestContext
from kafkalite.broker.quotas import ConnectionQuotas, RequestBudget
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.framing import API_VERSIONS_KEY, decode_request_body, encode_response, parse_request
from kafkalite.protocol.message import Message

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster
    from kafkalite.broker.handlers.registry import HandlerResult

__all__ = ["DispatchObserver", "KafkaConnection", "MAX_IN_FLIGHT", "ReceiveScratch", "SCRATCH_BYTES"]

log = logging.getLogger("kafkalite.net")

MAX_IN_FLIGHT = 100  # unanswered requests on one connection before it stops reading
SCRATCH_BYTES = 64 * 1024  # what one read between frames may take (one scratch per server)
SPARE_BYTES = 8 * 1024 * 1024  # the largest frame buffer the scratch keeps for the next large frame
JOIN_BYTES = 16 * 1024  # answers of one read up to this size together are joined into one write
_SIZE = struct.Struct(">i")
_connection_ids = itertools.count(1)


class _Slot:
    """A request's place in the response order."""

    __slots__ = ("answer", "api_key", "api_version", "correlation_id", "done", "response", "task")

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id
        self.done = False
        self.response: Message | None = None
        self.task: asyncio.Future[Any] | None = None
        self.answer: Awaitable[Message | None] | None = None  # what the handler returned, when it waits


class ReceiveScratch:
    """The buffer reads between frames land in, shared by the connections of one event loop, and a
    spare buffer for the next frame larger than it (lent to one connection at a time)."""

    __slots__ = ("data", "returned", "spare", "view")

    def __init__(self, size: int = SCRATCH_BYTES) -> None:
        self.data = bytearray(size)
        self.view = memoryview(self.data)
        self.spare: bytearray | None = None
        self.returned: bytearray | None = None  # the last handled frame's buffer, not yet adopted

    def lend(self, size: int) -> bytearray | None:
        """The spare, if a frame of ``size`` bytes fits in it (the caller owns it until ``give_back``)."""
        returned = self.returned
        if returned is not None:
            self.returned = None
            self._adopt(returned)
        spare = self.spare
        if spare is None or len(spare) < size:
            return None
        self.spare = None
        return spare

    def give_back(self, buffer: bytearray) -> None:
        """A handled frame's buffer. The loop still holds the view it read into until ``buffer_updated``
        returns, so whether anything else keeps a view is asked when the next large frame begins."""
        self.returned = buffer

    def _adopt(self, buffer: bytearray) -> None:
        """Keep ``buffer`` as the spare (rounded up to a power of two) unless a view of it is alive."""
        size = len(buffer)
        if size > SPARE_BYTES or (self.spare is not None and len(self.spare) >= size):
            return
        try:
            buffer.append(0)  # a resize: raises BufferError while any view of the buffer exists
        except BufferError:
            return
        rounded = max(size, min(SPARE_BYTES, 1 << (size - 1).bit_length()))
        if rounded > size + 1:
            buffer.extend(bytes(rounded - size - 1))
        else:
            del buffer[rounded:]
        self.spare = buffer


class DispatchObserver(Protocol):
    """What the admin endpoint hooks into dispatch (see the module docstring)."""

    def handle(self, connection: KafkaConnection, handler: ApiHandler, context: RequestContext, body: Any,
               size: int) -> HandlerResult: ...

    def response_written(self, connection: KafkaConnection, api_key: int,
                         buffers: Sequence[bytes | bytearray | memoryview]) -> None: ...


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection: framing, dispatch, ordered responses, back-pressure, idle timeout."""

    session: Any = None  # authentication and principal: kafkalite.broker.security.connection sets it

    def __init__(
        self,
        cluster: Cluster,
        *,
        max_request_bytes: int,
        idle_ms: int,
        handlers: Mapping[int, ApiHandler] = HANDLERS,
        connections: MutableSet[KafkaConnection] | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_in_flight: int = MAX_IN_FLIGHT,
        scratch: ReceiveScratch | None = None,
        listener_name: str = "",
        receive_timeout_ms: int = 0,
        quotas: ConnectionQuotas | None = None,
        budget: RequestBudget | None = None,
        observer: DispatchObserver | None = None,
    ) -> None:
        self._cluster, self._handlers, self._connections, self._clock = cluster, handlers, connections, clock
        self.observer = observer  # the admin endpoint's hook, None when it is off
        self.listener_name = listener_name
        self.client_id: str | None = None  # of the last request header read
        self._max_request_bytes, self._idle_ms, self._max_in_flight = max_request_bytes, idle_ms, max_in_flight
        self._receive_timeout_ms = receive_timeout_ms
        self._quotas, self._budget = quotas, budget
        self.connection_id = next(_connection_ids)
        self.peer = "?"
        self._address = ""
        self._admitted = False
        self.transport: asyncio.Transport | None = None
        self._pending: deque[_Slot] = deque()
        self._scratch = scratch if scratch is not None else ReceiveScratch()  # reads between frames land here,
        self._prefix = b""  # after a size prefix split across reads, put back at its front
        self._kept = 0
        self._body: bytearray | None = None  # a frame split across reads: its buffer so far, its size,
        self._frame_size = 0  # and how much of it is in
        self._filled = 0
        self._reserved = 0  # bytes of _body counted in the budget
        self._frame_began: float | None = None  # when the incomplete frame started arriving
        self._held: bytes | None = None  # read but not dispatched while back-pressure holds the connection
        self._held_scheduled = False
        self._closed = self._eof = self._draining = False
        self._write_paused = self._reading_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._corked: list[bytes | bytearray | memoryview] | None = None
        self._socket_descriptor = -1  # a plaintext stream socket's: answers may send file regions to it
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._last_activity = clock()

    # asyncio.BufferedProtocol --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # create_server hands stream transports
        peer = transport.get_extra_info("peername")
        self.peer = (f"[{peer[0]}]:{peer[1]}" if ":" in peer[0] else f"{peer[0]}:{peer[1]}") if peer else "?"
        self._address = str(peer[0]) if peer else "?"
        if self._quotas is not None:
            refused = self._quotas.admit(self._address)
            if refused is not None:
                log.info("refused connection from %s: %s", self.peer, refused)
                self._closed = True
                self.transport.close()
                return
            self._admitted = True
        self._last_activity = self._clock()
        self._socket_descriptor = _plaintext_socket(transport)
        if self._connections is not None:
            self._connections.add(self)
        if self._idle_ms > 0:
            self._arm_timer(self._last_activity + self._idle_ms / 1000)

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next read goes: the rest of a split frame's own buffer, else the scratch."""
        body = self._body
        if body is not None:
            if self._filled == len(body):  # all that arrived so far fills it: grow it for what comes next
                body = self._grow_body(body)
            return memoryview(body)[self._filled:self._frame_size]
        kept = self._kept = len(self._prefix)
        if kept:
            self._scratch.data[:kept] = self._prefix
        return self._scratch.view[kept:]

    def _grow_body(self, body: bytearray) -> bytearray:
        grow = min(self._frame_size - len(body), max(len(body), SCRATCH_BYTES))
        try:
            body.extend(bytes(grow))  # in place for a large buffer (realloc moves pages, copies nothing)
        except BufferError:  # a view of it is still held somewhere: move to a larger one
            larger = bytearray(len(body) + grow)
            larger[:self._filled] = memoryview(body)[:self._filled]
            self._body = body = larger
        self._reserve(grow)
        return body

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed:
            return
        self._last_activity = self._clock()
        if self._held is not None:  # arrived while reading was being paused: keep it with the rest
            self._held += self._scratch.data[self._kept:self._kept + nbytes]
            return
        body = self._body
        if body is not None:
            self._filled += nbytes
            if self._filled < self._frame_size:  # more of the frame to come: nothing to dispatch yet
                return
        self._corked = []  # responses ready during this read go out together (_uncork)
        try:
            begin_dispatch()
            if body is None:
                self._read_frames(self._kept + nbytes)
            else:
                self._body = None
                self._frame_began = None
                whole = memoryview(body)
                frame = whole[:self._frame_size]
                try:
                    self._dispatch(frame)
                finally:
                    self._release_reserved()
                    try:
                        frame.release()
                        whole.release()
                    except BufferError:  # something made a buffer of the frame view and keeps it
                        pass
                    else:
                        self._scratch.give_back(body)
        except (ImportError, OSError) as exc:
            # What serving an API needs is imported on its first request (or by the warm-up after the
            # start); with no descriptor left to open a module, the request cannot be read or answered.
            log.error("closing connection from %s: cannot load what serving its request needs: %s", self.who, exc)
            self.close()
        finally:
            run_after_dispatch()  # long polls the requests just read completed, answered now
            self._uncork()

    def _read_frames(self, end: int) -> None:
        """Dispatch the frames in ``scratch[:end]``; give a partial frame its own buffer, and keep the
        rest when back-pressure says stop."""
        scratch, view, position = self._scratch.data, self._scratch.view, 0
        self._prefix = b""
        budget = self._budget
        while end - position >= 4:
            if (self._write_paused or self._draining or len(self._pending) >= self._max_in_flight
                    or (budget is not None and budget.exhausted)):  # _must_hold(), without a call per frame
                self._hold(bytes(scratch[position:end]))
                return
            size = _SIZE.unpack_from(scratch, position)[0]
            if not 0 <= size <= self._max_request_bytes:
                return self._violation(f"sent a request of {size} bytes (socket.request.max.bytes is "
                                       f"{self._max_request_bytes})")
            position += 4
            if end - position < size:
                arrived = end - position
                body = self._scratch.lend(size)
                self._body = bytearray(min(size, max(arrived, SCRATCH_BYTES))) if body is None else body
                self._frame_size, self._filled = size, arrived
                self._reserve(min(size, len(self._body)))
                self._body[:arrived] = view[position:end]
                position = end
            else:
                self._frame_began = None
                self._dispatch(scratch[position:position + size])  # a copy: see the module docstring
                position += size
                if self._closed:
                    return
        if end > position:  # a split size prefix (at most 3 bytes): the connection keeps it
            self._prefix = bytes(scratch[position:end])
        if (self._body is not None or self._prefix) and self._frame_began is None:
            self._frame_began = self._clock()
            if self._receive_timeout_ms > 0:
                self._arm_timer(self._frame_began + self._receive_timeout_ms / 1000)

    def _must_hold(self) -> bool:
        """Whether back-pressure forbids starting the next request now."""
        if self._write_paused or self._draining or len(self._pending) >= self._max_in_flight:
            return True
        return self._budget is not None and self._budget.exhausted

    def _hold(self, rest: bytes) -> None:
        """Keep what was read but not dispatched, and stop reading until back-pressure lets go."""
        self._held = rest
        if self._budget is not None and self._budget.exhausted:
            self._budget.wait(self)
        self._update_reading()

    def budget_available(self) -> None:
        """The server's request budget has room again (``RequestBudget.wait``)."""
        self._update_reading()

    def _resume_held(self) -> None:
        """Dispatch what back-pressure held, as if it had just been read."""
        self._held_scheduled = False
        held = self._held
        if held is None or self._closed:
            return
        if self._must_hold():
            if self._budget is not None and self._budget.exhausted:
                self._budget.wait(self)
            return
        self._held = None
        self._scratch.data[:len(held)] = held
        self._kept = 0
        self._corked = []
        try:
            begin_dispatch()
            self._read_frames(len(held))
        finally:
            run_after_dispatch()
            self._uncork()
        self._update_reading()
        if self._eof and not self._pending and self._held is None:
            self.close()

    def _reserve(self, count: int) -> None:
        self._reserved += count
        if self._budget is not None:
            self._budget.add_bytes(count)

    def _release_reserved(self) -> None:
        reserved, self._reserved = self._reserved, 0
        if reserved and self._budget is not None:
            self._budget.release_bytes(reserved)

    def eof_received(self) -> bool:
        """Half-close from the client: send what is pending, then close."""
        self._eof = True
        return bool(self._pending) or self._held is not None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._cancel_pending()
        self._body = None
        self._held = None
        self._release_reserved()
        if self._budget is not None:
            self._budget.forget(self)
        if self._timer is not None:
            self._timer.cancel()
        if self._connections is not None:
            self._connections.discard(self)
        if self._admitted and self._quotas is not None:
            self._admitted = False
            self._quotas.release(self._address)
        self._set_drained()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # requests and responses ------------------------------------------------------------------
    def _dispatch(self, frame: bytes | bytearray | memoryview) -> None:
        try:
            request = parse_request(frame)
        except ProtocolError as exc:
            return self._violation(f"sent a malformed request header: {exc}")
        header = request.header
        api_key, api_version, correlation_id = header.request_api_key, header.request_api_version, header.correlation_id
        self.client_id = client_id = header.client_id
        handler = self._handlers.get(api_key)
        if handler is None:
            return self._violation(f"sent unknown API key {api_key} (v{api_version})")
        if not handler.min_version <= api_version <= handler.max_version:
            if api_key != API_VERSIONS_KEY:
                return self._violation(f"sent {handler.name} v{api_version}; this broker serves "
                                       f"v{handler.min_version}-{handler.max_version}")
            slot = _Slot(api_key, api_version, correlation_id)
            slot.api_version, slot.done = 0, True
            slot.response = api_versions_response(self._handlers, ErrorCode.UNSUPPORTED_VERSION)
            self._add_slot(slot)
            return self._flush()
        try:
            body = decode_request_body(handler.request_type, request.body, api_version)
        except ProtocolError as exc:
            return self._violation(f"sent a malformed {handler.name} v{api_version} request: {exc}")
        context = RequestContext(self._cluster, api_key, api_version, correlation_id, client_id, self.peer,
                                 self.connection_id, self.listener_name, self.session,
                                 file_regions=self._socket_descriptor >= 0)
        observer = self.observer
        if observer is None and not self._pending:
            return self._handle_now(handler, context, body)
        slot = _Slot(api_key, api_version, correlation_id)
        self._add_slot(slot)
        try:
            result = handler.handle(context, body) if observer is None else observer.handle(
                self, handler, context, body, len(frame))
            if result is not None and not isinstance(result, Message):
                return self._await_answer(slot, handler, result)
        except Exception as exc:
            return self._handler_failed(handler, api_version, exc)
        slot.response, slot.done = result, True
        self._flush()

    def _handle_now(self, handler: ApiHandler, context: RequestContext, body: Any) -> None:
        """Dispatch with nothing queued ahead and no observer: an answer ready at once is written
        without a slot in the response order; one that has to wait takes a slot as usual."""
        budget = self._budget
        if budget is not None:
            budget.add_request()
        try:
            result = handler.handle(context, body)
        except Exception as exc:
            if budget is not None:
                budget.end_request()
            return self._handler_failed(handler, context.api_version, exc)
        if result is not None and not isinstance(result, Message):
            slot = _Slot(context.api_key, context.api_version, context.correlation_id)
            self._pending.append(slot)  # the budget counts it already
            return self._await_answer(slot, handler, result)
        if budget is not None:
            budget.end_request()
        if result is not None:
            try:
                buffers = encode_response(result, context.api_key, context.api_version, context.correlation_id)
            except Exception:
                log.exception("cannot encode the response to %s (API key %d v%d); closing the connection",
                              self.peer, context.api_key, context.api_version)
                return self.close()
            self._send(buffers)
        if self._drained is not None:
            self._set_drained()
        if self._eof and self._held is None:
            self.close()

    def _add_slot(self, slot: _Slot) -> None:
        self._pending.append(slot)
        if self._budget is not None:
            self._budget.add_request()

    def _await_answer(self, slot: _Slot, handler: ApiHandler, answer: Awaitable[Message | None]) -> None:
        """Wait for a handler's answer: a ``DelayedAnswer`` calls back when it is there; anything
        else awaitable runs as a task."""
        slot.answer = answer
        if isinstance(answer, DelayedAnswer):
            answer.add_done_callback(partial(self._delayed_answer_done, slot, handler))
        else:
            slot.task = asyncio.ensure_future(self._answer_when_ready(slot, handler, answer))
        self._update_reading()

    def _delayed_answer_done(self, slot: _Slot, handler: ApiHandler, answer: DelayedAnswer) -> None:
        """A delayed answer is there (called from the event that completed it): write it now, in
        request order."""
        if self._closed:
            return
        try:
            response = answer.result()
        except Exception as exc:
            return self._handler_failed(handler, slot.api_version, exc)
        slot.response, slot.done = response, True
        self._flush()

    async def _answer_when_ready(self, slot: _Slot, handler: ApiHandler,
                                 answer: Awaitable[Message | None]) -> None:
        """Await a handler's answer and write it in the same step (no hop through a done callback),
        so a long poll woken by an append is answered as soon as its task runs."""
        try:
            response = await answer
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not self._closed:
                self._handler_failed(handler, slot.api_version, exc)
            return
        if self._closed:
            return
        slot.response, slot.done = response, True
        self._flush()

    def _flush(self) -> None:
        """Write every completed response at the front of the queue, in request order."""
        pending = self._pending
        while pending and pending[0].done and not self._closed:
            slot = pending.popleft()
            if self._budget is not None:
                self._budget.end_request()
            if slot.response is None:
                continue
            try:
                buffers = encode_response(slot.response, slot.api_key, slot.api_version, slot.correlation_id)
            except Exception:
                log.exception("cannot encode the response to %s (API key %d v%d); closing the connection",
                              self.peer, slot.api_key, slot.api_version)
                return self.close()
            if self.observer is not None:
                self.observer.response_written(self, slot.api_key, buffers)
            self._send(buffers)
            self._last_activity = self._clock()
        if not pending:
            self._set_drained()
            if self._eof and self._held is None:
                return self.close()
        self._update_reading()

    @property
    def who(self) -> str:
        """The client as log lines name it: its address, and its client id once a request said it."""
        return self.peer if self.client_id is None else f"{self.peer} (client id {self.client_id!r})"

    def _handler_failed(self, handler: ApiHandler, api_version: int, exc: BaseException) -> None:
        """A handler raised. A client's bad input the codec or a Kafka-level check caught is one line;
        anything else is a broker bug, logged with its traceback. Either way the connection closes."""
        if isinstance(exc, (ProtocolError, KafkaError)):
            log.warning("closing connection from %s: its %s v%d request failed: %s: %s", self.who, handler.name,
                        api_version, type(exc).__name__, exc)
        else:
            log.error("%s v%d from %s failed; closing the connection", handler.name, api_version, self.who,
                      exc_info=exc)
        self.close()

    def _violation(self, reason: str) -> None:
        log.warning("closing connection from %s: %s", self.who, reason)
        self.close()

    def _update_reading(self) -> None:
        """Pause or resume reading as back-pressure says; go on with held bytes once it lets go."""
        if self._closed or self.transport is None:
            return
        pause = self._write_paused or self._draining or len(self._pending) >= self._max_in_flight
        if not pause and self._held is not None:
            pause = True  # until the held bytes are dispatched
            if self._budget is not None and self._budget.exhausted:
                self._budget.wait(self)
            elif not self._held_scheduled:
                self._held_scheduled = True
                asyncio.get_running_loop().call_soon(self._resume_held)
        if pause != self._reading_paused:
            self._reading_paused = pause
            (self.transport.pause_reading if pause else self.transport.resume_reading)()

    # lifecycle -------------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Requests whose responses have not been written yet."""
        return len(self._pending)

    def check_deadlines(self) -> float | None:
        """Close the connection if its incomplete frame has taken ``socket.request.receive.timeout.ms``,
        or if it was idle for ``connections.max.idle.ms`` (a connection with requests in flight is not
        idle); else the seconds until the next check (None: closed, or nothing to watch)."""
        now = self._clock()
        delays = []
        if self._frame_began is not None and self._receive_timeout_ms > 0:
            waited = now - self._frame_began
            limit = self._receive_timeout_ms / 1000
            if waited >= limit:
                log.info("closing connection from %s: a request began arriving %d ms ago and is still incomplete "
                         "(socket.request.receive.timeout.ms)", self.who, waited * 1000)
                self.close()
                return None
            delays.append(limit - waited)
        if self._idle_ms > 0:
            limit = self._idle_ms / 1000
            idle_for = now - self._last_activity
            if idle_for < limit or self._pending:
                delays.append(limit - idle_for if idle_for < limit else limit)
            else:
                log.info("closing connection from %s: idle for %d ms (connections.max.idle.ms)", self.who,
                         idle_for * 1000)
                self.close()
                return None
        return min(delays) if delays else None

    def _arm_timer(self, due: float) -> None:
        """Make sure the timer fires by ``due`` (clock time)."""
        if self._timer is not None:
            if self._timer_due <= due:
                return
            self._timer.cancel()
        self._timer_due = due
        self._timer = asyncio.get_running_loop().call_later(max(0.0, due - self._clock()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if not self._closed and (delay := self.check_deadlines()) is not None:
            self._arm_timer(self._clock() + delay)

    def drain(self) -> asyncio.Future[None]:
        """Stop reading requests; the future completes once every pending response is written."""
        self._draining = True
        self._update_reading()
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
        if self._closed or not self._pending:
            self._set_drained()
        return self._drained

    def _send(self, buffers: list[Any]) -> None:
        """Write an encoded answer, after what is ahead of it: with the region writer when it holds file
        regions, into the cork while a read is being handled, else to the transport (one buffer with
        ``write``)."""
        if self._socket_descriptor >= 0 and FileRegion in map(type, buffers):
            self._write_regions(buffers)
        elif self._corked is not None:
            self._corked.extend(buffers)
        elif self.transport is not None:
            if len(buffers) == 1:
                self.transport.write(buffers[0])
            else:
                self.transport.writelines(buffers)
            self._last_activity = self._clock()

    def _uncork(self) -> None:
        """Send what this read answered: one buffer as it is; several small ones joined into one
        (a ``write`` of the join costs less than a ``writelines`` of the parts); larger ones as a
        ``writelines``, not copied."""
        corked, self._corked = self._corked, None
        if corked and self.transport is not None and not self.transport.is_closing():
            if len(corked) == 1:
                self.transport.write(corked[0])
            elif sum(len(buffer) for buffer in corked) <= JOIN_BYTES:
                self.transport.write(b"".join(corked))
            else:
                self.transport.writelines(corked)

    def _write_regions(self, pieces: list[Any]) -> None:
        """Write an answer that holds file regions (a Fetch from disk, ``core.log.region``), after what
        is ahead of it. Corked answers go to the transport first; then, if the transport holds nothing,
        the answer goes straight to the socket (bytes with ``os.writev``, regions with ``os.sendfile``)
        until it would block. What is left, or the whole answer when the transport still holds bytes,
        is read (``os.pread``) and given to the transport, which keeps the order from there. A region
        whose file ends early, or a socket error, closes the connection (the answer's size is sent)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        corked = self._corked
        if corked:
            transport.writelines(corked)
            corked.clear()
        try:
            if transport.get_write_buffer_size() == 0:
                pieces = send_now(self._socket_descriptor, pieces)
            if pieces:
                transport.writelines(read_pieces(pieces))
        except RegionTruncated as exc:
            log.error("closing connection from %s: a Fetch answer cannot be completed: %s", self.who, exc)
            self.abort()
        except OSError as exc:
            log.info("closing connection from %s: writing a Fetch answer failed: %s", self.who, exc)
            self.abort()
        self._last_activity = self._clock()

    def _set_drained(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def close(self) -> None:
        """Close after writing what is already buffered; pending handlers are cancelled."""
        if self._closed:
            return
        self._closed = True
        self._cancel_pending()
        self._uncork()  # responses to the requests before the one that closes still go out
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Close at once, dropping unsent data."""
        self.close()
        if self.transport is not None:
            self.transport.abort()

    def _cancel_pending(self) -> None:
        for slot in self._pending:
            if isinstance(slot.answer, DelayedAnswer):
                slot.answer.cancel()
            elif slot.task is not None and not slot.task.done():
                slot.task.cancel()
                answer = slot.answer
                if inspect.iscoroutine(answer) and inspect.getcoroutinestate(answer) == inspect.CORO_CREATED:
                    answer.close()  # cancelled before its task first ran: it never will
            if self._budget is not None:
                self._budget.end_request()
        self._pending.clear()


def _plaintext_socket(transport: asyncio.BaseTransport) -> int:
    """The descriptor of the transport's socket if answers may be written to it directly (a stream
    socket without TLS, on a system with ``os.sendfile``), else -1."""
    if not hasattr(os, "sendfile") or transport.get_extra_info("sslcontext") is not None \
            or transport.get_extra_info("ssl_object") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    if sock is None or getattr(sock, "type", None) != socket.SOCK_STREAM:
        return -1
    try:
        return int(sock.fileno())
    except (OSError, ValueError):
        return -1
