"""``kafkalite produce``: records from stdin or a file, one per line (kafka-console-producer, kcat -P).

Lines are read in chunks: from a file in the event loop's thread (with a progress bar of the bytes
read, the rate and the time left), from stdin in a thread of its own, so that a line typed at a
terminal is sent at once while the producer keeps sending in the background. Each line becomes one
record (its value, or with ``--key-separator`` its key and value) sent with the bundled producer.
Deliveries are counted per batch as the batches complete; at the end the count, the time and the rate
are printed, and any record that was not delivered makes the command fail (exit status 1).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

from kafkalite.cli.common import ClientSettings, client_options
from kafkalite.cli.common import run_async as run_on_loop
from kafkalite.cli.output import rate
from kafkalite.cli.parsing import LineSplitter, parse_pair, split_key, unescape
from kafkalite.client.producer.accumulator import RecordFuture
from kafkalite.client.producer.producer import Producer

__all__ = ["produce"]

CHUNK_BYTES = 1 << 16
_COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True, slots=True)
class Outcome:
    sent: int
    delivered: int
    failed: int
    first_error: BaseException | None
    seconds: float


class _Deliveries:
    """Counts delivered and failed records with one callback per batch, not per record."""

    __slots__ = ("pending", "delivered", "failed", "first_error")

    def __init__(self) -> None:
        self.pending: dict[asyncio.Future[Any], int] = {}
        self.delivered = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def add(self, record: RecordFuture) -> None:
        future = record.batch.future
        count = self.pending.get(future)
        if count is None:
            self.pending[future] = 1
            future.add_done_callback(self._settle)
        else:
            self.pending[future] = count + 1

    def _settle(self, future: asyncio.Future[Any]) -> None:
        count = self.pending.pop(future, 0)
        error = asyncio.CancelledError() if future.cancelled() else future.exception()
        if error is None:
            self.delivered += count
        else:
            self.failed += count
            self.first_error = self.first_error or error


async def _file_chunks(stream: IO[bytes]) -> AsyncIterator[bytes]:
    while chunk := stream.read(CHUNK_BYTES):
        yield chunk


async def _stdin_chunks(stream: IO[bytes]) -> AsyncIterator[bytes]:
    """Chunks of stdin as they arrive (a terminal: a line at a time), read by a daemon thread."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException] = asyncio.Queue(maxsize=8)
    read = getattr(stream, "read1", stream.read)

    def reader() -> None:
        while True:
            try:
                chunk: bytes | BaseException = read(CHUNK_BYTES)
            except OSError as exc:
                chunk = exc
            try:
                asyncio.run_coroutine_threadsafe(queue.put(chunk), loop).result()
            except RuntimeError:  # the loop is gone: the command has ended
                return
            if not chunk or isinstance(chunk, BaseException):
                return

    threading.Thread(target=reader, name="kafkalite-stdin", daemon=True).start()
    while True:
        item = await queue.get()
        if isinstance(item, BaseException):
            raise item
        if not item:
            return
        yield item


async def produce_lines(producer: Producer, topic: str, chunks: AsyncIterator[bytes], *,
                        key_separator: bytes | None, headers: Sequence[tuple[str, bytes]],
                        partition: int | None, progress: Any = None) -> Outcome:
    """Send every line of ``chunks`` as a record; wait for the deliveries; count them."""
    began = time.perf_counter()
    deliveries = _Deliveries()
    splitter = LineSplitter()
    send = producer.send
    header_list = list(headers) or None
    sent = 0

    async def send_lines(lines: list[bytes]) -> None:
        nonlocal sent
        for line in lines:
            sent += 1
            if key_separator is None:
                key, value = None, line
            else:
                try:
                    key, value = split_key(line, key_separator, sent)
                except ValueError as exc:
                    raise click.ClickException(f"{exc} (the lines before it were sent)") from None
            deliveries.add(await send(topic, value, key, partition, header_list))

    await producer.start()
    async for chunk in chunks:
        await send_lines(splitter.feed(chunk))
        if progress is not None:
            progress.update(len(chunk), f"{sent:,} records, {rate(sent, time.perf_counter() - began)}")
    await send_lines(splitter.finish())
    await producer.flush()
    await asyncio.sleep(0)  # the batches' done callbacks run
    return Outcome(sent, deliveries.delivered, deliveries.failed + sum(deliveries.pending.values()),
                   deliveries.first_error, time.perf_counter() - began)


def _headers(context: click.Context, parameter: click.Parameter, values: Sequence[str]) -> list[tuple[str, bytes]]:
    pairs = []
    for value in values:
        try:
            key, text = parse_pair(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), context, parameter) from None
        pairs.append((key, text.encode("utf-8")))
    return pairs


def _separator(context: click.Context, parameter: click.Parameter, value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        return unescape(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), context, parameter) from None


@click.command("produce")
@click.option("--topic", "-t", required=True, metavar="TOPIC", help="The topic to write to.")
@click.option("--file", "-f", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read the records from this file, with a progress bar (default: stdin).")
@click.option("--key-separator", "-K", callback=_separator, metavar="SEP",
              help=r"Each line is KEY SEP VALUE (cut at the first SEP; \t and \xNN escapes work).")
@click.option("--header", "-H", "headers", multiple=True, callback=_headers, metavar="KEY=VALUE",
              help="A header on every record. Repeatable.")
@click.option("--partition", "-p", type=click.IntRange(min=0), metavar="N", help="Write every record to this partition "
              "(default: by key, keyless records spread by the partitioner).")
@click.option("--compression", "--compression-codec", "compression", type=click.Choice(_COMPRESSION_TYPES),
              help="Compression of the batches (compression.type).")
@click.option("--acks", "--request-required-acks", "acks", type=click.Choice(["all", "-1", "0", "1"]),
              help="Acknowledgements to wait for (default: all).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Show a progress bar when reading a file (on a terminal).")
@client_options()
def produce(settings: ClientSettings, topic: str, path: Path | None, key_separator: bytes | None,
            headers: list[tuple[str, bytes]], partition: int | None, compression: str | None, acks: str | None,
            progress: bool) -> None:
    """Send records read from stdin or --file, one per line.

    \b
      seq 1000 | kafkalite produce -t numbers
      kafkalite produce -t orders -f orders.txt -K : -H source=import --compression zstd
    """
    producer = Producer(settings.producer_config({"acks": acks, "compression.type": compression}))

    def run(chunks: AsyncIterator[bytes], bar: Any = None) -> Outcome:
        async def body() -> Outcome:
            try:
                return await produce_lines(producer, topic, chunks, key_separator=key_separator, headers=headers,
                                           partition=partition, progress=bar)
            finally:
                await producer.close()

        return run_on_loop(body())

    if path is None:
        if sys.stdin.isatty():
            click.echo("Type one record per line; Ctrl-D ends.", err=True)
        outcome = run(_stdin_chunks(sys.stdin.buffer))
    else:
        with path.open("rb") as stream:
            if progress:
                with click.progressbar(length=path.stat().st_size, label=f"Producing to {topic}", show_eta=True,
                                       show_percent=True, item_show_func=lambda text: text, file=sys.stderr,
                                       width=24) as bar:
                    outcome = run(_file_chunks(stream), bar)
            else:
                outcome = run(_file_chunks(stream))
    if outcome.failed:
        raise click.ClickException(f"{outcome.failed} of {outcome.sent} records were not delivered: "
                                   f"{outcome.first_error}")
    click.echo(f"Produced {outcome.delivered} records to {topic} in {outcome.seconds:.2f} s "
               f"({rate(outcome.delivered, outcome.seconds).replace('/s', ' records/s')}).", err=True)
