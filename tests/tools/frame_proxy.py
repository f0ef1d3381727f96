"""A loopback proxy between a client and a broker that forwards whole Kafka frames, for fault tests.

Each accepted connection gets a connection to ``target`` and two threads: requests are read frame
by frame, passed to ``on_request`` (which returns a note kept for that request's answer) and sent
on; answers are read frame by frame and passed to ``on_response`` with the note of their request
(answers come in request order), which returns the frame to forward (the same one, or a rewritten
one) or None to close both sockets instead, so the request was handled but the client cannot know.
Subclasses say what to do in those two hooks; everything else (sockets, threads, closing) is here.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["FrameProxy", "close_socket", "frames"]


class FrameProxy:
    """Forwards frames between clients and ``target``; see the module's docstring for the hooks."""

    def __init__(self) -> None:
        self.target: tuple[str, int] | None = None
        self._lock = threading.Lock()  # subclasses guard their counters with it too
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def on_request(self, frame: bytes) -> Any:
        """A request frame on its way to the broker; what is returned comes back with its answer."""
        return None

    def on_response(self, frame: bytes, note: Any) -> bytes | None:
        """An answer on its way to the client: the frame to forward, or None to drop the connection."""
        return frame

    def start(self, target: tuple[str, int]) -> None:
        self.target = target
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                close_socket(sock)
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)  # type: ignore[arg-type]
            except OSError:
                close_socket(client)
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            notes: list[Any] = []  # one per request in flight, in order
            threading.Thread(target=self._requests, args=(client, upstream, notes), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, notes), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket, notes: list[Any]) -> None:
        for frame in frames(source):
            notes.append(self.on_request(frame))
            try:
                sink.sendall(frame)
            except OSError:
                break
        close_socket(source)
        close_socket(sink)

    def _responses(self, source: socket.socket, sink: socket.socket, notes: list[Any]) -> None:
        for frame in frames(source):
            deadline = time.monotonic() + 5
            while not notes and time.monotonic() < deadline:
                time.sleep(0.001)
            if not notes:
                break
            forward = self.on_response(frame, notes.pop(0))
            if forward is None:
                break
            try:
                sink.sendall(forward)
            except OSError:
                break
        close_socket(source)
        close_socket(sink)


def frames(sock: socket.socket) -> Iterator[bytes]:
    """Whole frames (size prefix included) read from ``sock`` until it closes."""
    buffer = b""
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        buffer += data
        while len(buffer) >= 4:
            (size,) = struct.unpack_from(">i", buffer)
            if len(buffer) < 4 + size:
                break
            yield buffer[:4 + size]
            buffer = buffer[4 + size:]


def close_socket(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
