"""``kafkalite consume``: records to stdout (kafka-console-consumer, kcat -C).

Without ``--group`` the command is assigned every partition of the topics (or the ones ``-p`` names)
and commits nothing, as kcat does; with ``--group`` it subscribes as a member of that group, takes
the partitions the group gives it, and commits what it printed when it stops (auto-commit). Where it
starts: ``--offset`` (``earliest``, ``latest``, an offset, ``-N`` for the last N records of each
partition, or ``@TIMESTAMP_MS``); ``--from-beginning`` is ``--offset earliest``. A group starts from
its committed offsets, and ``--offset earliest|latest`` only says where a partition without one begins
(``auto.offset.reset``).

Each record is printed with ``--format`` (kcat's codes, see :data:`FORMAT_HELP`), or as one JSON
object per line with ``--json``; bytes are written as they are, so binary values pass through a pipe
unchanged. It stops after ``--max-messages``, at the end of every partition with ``--exit-at-end``
(the end as it was when the partition was first assigned), after ``--idle-timeout`` seconds without a
record, or on Ctrl-C; then it prints ``Processed a total of N messages`` on stderr.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import click

from kafkalite.cli.common import CLIENT_ID, ClientSettings, client_options, run_async
from kafkalite.cli.parsing import unescape
from kafkalite.client.consumer.consumer import Consumer
from kafkalite.client.consumer.records import ConsumerRecord
from kafkalite.client.metadata import TopicPartition

__all__ = ["compile_format", "consume", "record_json"]

FORMAT_HELP = ("%t topic, %p partition, %o offset, %k key, %v value, %T timestamp (ms), %h headers "
               "(k=v,...), %K key length, %S value length, %% a percent sign; \\n \\t \\\\ escapes. "
               "A null key or value prints nothing (its length -1).")
_CODE = re.compile(r"%(.?)", re.DOTALL)
_NULL = b""

Formatter = Callable[[ConsumerRecord], bytes]


def _bytes(value: Any) -> bytes:
    return _NULL if value is None else value


def _headers(record: ConsumerRecord) -> bytes:
    return b",".join(key.encode("utf-8") + b"=" + _bytes(value) for key, value in record.headers)


_FIELDS: dict[str, Formatter] = {
    "t": lambda record: record.topic.encode("utf-8"),
    "p": lambda record: str(record.partition).encode(),
    "o": lambda record: str(record.offset).encode(),
    "k": lambda record: _bytes(record.key),
    "v": lambda record: _bytes(record.value),
    "T": lambda record: str(record.timestamp).encode(),
    "h": _headers,
    "K": lambda record: str(-1 if record.key is None else len(record.key)).encode(),
    "S": lambda record: str(-1 if record.value is None else len(record.value)).encode(),
}


def compile_format(template: str) -> Formatter:
    """A kcat-style template (``"%k\\t%v\\n"``) as a function from a record to the bytes to print."""
    pieces: list[bytes | Formatter] = []
    position = 0
    for match in _CODE.finditer(template):
        if match.start() > position:
            pieces.append(unescape(template[position:match.start()]))
        code = match.group(1)
        if code == "%":
            pieces.append(b"%")
        elif code in _FIELDS:
            pieces.append(_FIELDS[code])
        elif not code:
            raise ValueError("the format ends with a lone %")
        else:
            raise ValueError(f"unknown format code %{code} (known: {FORMAT_HELP})")
        position = match.end()
    if position < len(template):
        pieces.append(unescape(template[position:]))

    def render(record: ConsumerRecord) -> bytes:
        return b"".join(piece if isinstance(piece, bytes) else piece(record) for piece in pieces)

    return render


def _text_or_base64(name: str, value: bytes | None, into: dict[str, Any]) -> None:
    if value is None:
        into[name] = None
        return
    try:
        into[name] = value.decode("utf-8")
    except UnicodeDecodeError:
        into[name] = None
        into[f"{name}_base64"] = base64.b64encode(value).decode("ascii")


def record_json(record: ConsumerRecord) -> dict[str, Any]:
    """A record for ``--json``: text where the bytes are UTF-8, else ``key_base64`` / ``value_base64``."""
    item: dict[str, Any] = {"topic": record.topic, "partition": record.partition, "offset": record.offset,
                            "timestamp": record.timestamp, "timestamp_type": record.timestamp_type}
    _text_or_base64("key", record.key, item)
    _text_or_base64("value", record.value, item)
    headers = []
    for key, value in record.headers:
        header: dict[str, Any] = {"key": key}
        _text_or_base64("value", value, header)
        headers.append(header)
    item["headers"] = headers
    return item


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where to start: ``kind`` is earliest, latest, offset, from_end (the last ``value`` records) or timestamp."""

    kind: str
    value: int = 0

    @classmethod
    def parse(cls, text: str) -> StartAt:
        lowered = text.strip().lower()
        if lowered in ("earliest", "beginning", "start"):
            return cls("earliest")
        if lowered in ("latest", "end"):
            return cls("latest")
        try:
            if lowered.startswith("@"):
                return cls("timestamp", int(lowered[1:]))
            number = int(lowered)
        except ValueError:
            raise ValueError(f"{text!r} is not earliest, latest, an offset, -N or @TIMESTAMP_MS") from None
        return cls("from_end", -number) if number < 0 else cls("offset", number)


class _Stop(Exception):
    pass


class _Printer:
    """Writes the records; counts them; stops at ``max_messages``."""

    def __init__(self, out: IO[bytes], formatter: Formatter | None, max_messages: int | None) -> None:
        self.out, self.formatter, self.max_messages = out, formatter, max_messages
        self.count = 0

    def write(self, records: Sequence[ConsumerRecord]) -> None:
        if self.max_messages is not None:
            records = records[: self.max_messages - self.count]
        if self.formatter is None:
            chunk = b"".join(json.dumps(record_json(record), ensure_ascii=False).encode("utf-8") + b"\n"
                             for record in records)
        else:
            chunk = b"".join(map(self.formatter, records))
        self.out.write(chunk)
        self.out.flush()
        self.count += len(records)
        if self.max_messages is not None and self.count >= self.max_messages:
            raise _Stop


@dataclass(frozen=True, slots=True)
class Plan:
    topics: tuple[str, ...]
    pattern: str | None
    partitions: tuple[int, ...]
    group: str | None
    start: StartAt | None
    exit_at_end: bool
    idle_timeout_s: float | None


async def _assign(consumer: Consumer, plan: Plan, timeout_ms: int) -> list[TopicPartition]:
    """Without a group: every partition of the topics (those of ``-p`` only), at the starting offset."""
    topics = list(plan.topics)
    if plan.pattern is not None:
        pattern = re.compile(plan.pattern)
        topics += sorted(name for name in await consumer.list_topics()
                         if pattern.fullmatch(name) and name not in topics)
        if not topics:
            raise click.ClickException(f"no topic matches {plan.pattern!r}")
    assignment = []
    for topic in topics:
        partitions = await consumer.partitions_for(topic, timeout_ms)
        if not partitions:
            raise click.ClickException(f"topic {topic!r} does not exist")
        wanted = plan.partitions or tuple(sorted(partitions))
        missing = sorted(set(wanted) - set(partitions))
        if missing:
            raise click.ClickException(f"topic {topic!r} has no partition {missing[0]} "
                                       f"(it has {len(partitions)})")
        assignment += [TopicPartition(topic, index) for index in wanted]
    consumer.assign(assignment)
    await _seek(consumer, assignment, plan.start or StartAt("latest"), timeout_ms)
    return assignment


async def _seek(consumer: Consumer, partitions: list[TopicPartition], start: StartAt, timeout_ms: int) -> None:
    if start.kind == "earliest":
        consumer.seek_to_beginning(*partitions)
    elif start.kind == "latest":
        consumer.seek_to_end(*partitions)
    elif start.kind == "offset":
        for partition in partitions:
            consumer.seek(partition, start.value)
    elif start.kind == "from_end":
        beginnings = await consumer.beginning_offsets(partitions, timeout_ms)
        ends = await consumer.end_offsets(partitions, timeout_ms)
        for partition in partitions:
            consumer.seek(partition, max(beginnings[partition], ends[partition] - start.value))
    else:
        found = await consumer.offsets_for_times({partition: start.value for partition in partitions}, timeout_ms)
        ends = await consumer.end_offsets(partitions, timeout_ms)
        for partition in partitions:
            at = found.get(partition)
            consumer.seek(partition, ends[partition] if at is None else at.offset)


async def _at_end(consumer: Consumer, ends: dict[TopicPartition, int], timeout_ms: int) -> bool:
    """Whether every assigned partition has been read up to its end (as first seen: ``ends``)."""
    assignment = consumer.assignment()
    if not assignment:
        return False
    new = [partition for partition in assignment if partition not in ends]
    if new:
        ends.update(await consumer.end_offsets(new, timeout_ms))
    for partition in assignment:
        if await consumer.position(partition, timeout_ms) < ends[partition]:
            return False
    return True


async def consume_records(consumer: Consumer, plan: Plan, printer: _Printer, timeout_ms: int) -> None:
    """Subscribe or assign, then print records until one of the stops says so."""
    await consumer.start()
    if plan.group is None:
        await _assign(consumer, plan, timeout_ms)
    elif plan.pattern is not None:
        consumer.subscribe(re.compile(plan.pattern))
    else:
        consumer.subscribe(plan.topics)
    ends: dict[TopicPartition, int] = {}
    last_record = time.monotonic()
    try:
        while True:
            wanted = None if printer.max_messages is None else printer.max_messages - printer.count
            batch = list(await consumer.poll(timeout_ms=200, max_records=wanted))
            if batch:
                printer.write(batch)
                last_record = time.monotonic()
            elif plan.idle_timeout_s is not None and time.monotonic() - last_record >= plan.idle_timeout_s:
                return
            if plan.exit_at_end and await _at_end(consumer, ends, timeout_ms):
                return
    except _Stop:
        return


def _format(context: click.Context, parameter: click.Parameter, value: str | None) -> Formatter | None:
    if value is None:
        return None
    try:
        return compile_format(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), context, parameter) from None


def _start(context: click.Context, parameter: click.Parameter, value: str | None) -> StartAt | None:
    if value is None:
        return None
    try:
        return StartAt.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), context, parameter) from None


@click.command("consume")
@click.option("--topic", "-t", "topics", multiple=True, metavar="TOPIC", help="A topic to read. Repeatable.")
@click.option("--include", "pattern", metavar="REGEX", help="Read every topic whose whole name matches REGEX.")
@click.option("--group", "-g", metavar="GROUP", help="Read as a member of this consumer group (and commit "
              "what was printed); without it every partition is read and nothing is committed.")
@click.option("--partition", "-p", "partitions", multiple=True, type=click.IntRange(min=0), metavar="N",
              help="Read only this partition (without --group). Repeatable.")
@click.option("--offset", "-o", "start", callback=_start, metavar="WHERE",
              help="Where to start: earliest, latest (default), an offset, -N (the last N records of each "
              "partition) or @TIMESTAMP_MS. With --group: where a partition without a committed offset starts.")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest record (as --offset earliest).")
@click.option("--format", "-f", "formatter", callback=_format, metavar="TEMPLATE",
              help=f"How to print each record (default: '%v\\n'): {FORMAT_HELP}")
@click.option("--key-separator", "-K", metavar="SEP", help="Print the key, SEP, then the value (as "
              "--format '%kSEP%v\\n').")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per record (key and value as text, or "
              "key_base64/value_base64 when they are not UTF-8).")
@click.option("--max-messages", "-n", type=click.IntRange(min=1), metavar="N", help="Stop after N records.")
@click.option("--exit-at-end", "-e", is_flag=True, help="Stop once every partition is read to its end.")
@click.option("--idle-timeout", "idle_timeout_s", type=click.FloatRange(min=0.001), metavar="SECONDS",
              help="Stop when no record arrived for this long.")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              help="read_committed skips aborted transactions and waits for open ones (default: "
              "read_uncommitted).")
@client_options()
def consume(settings: ClientSettings, topics: tuple[str, ...], pattern: str | None, group: str | None,
            partitions: tuple[int, ...], start: StartAt | None, from_beginning: bool, formatter: Formatter | None,
            key_separator: str | None, as_json: bool, max_messages: int | None, exit_at_end: bool,
            idle_timeout_s: float | None, isolation_level: str | None) -> None:
    """Print records of topics to stdout, one per line by default.

    \b
      kafkalite consume -t orders --from-beginning -e
      kafkalite consume -t orders -g billing -f '%p:%o %k=%v\\n'
      kafkalite consume --include 'logs-.*' -o -10 --json -n 10
    """
    if not topics and pattern is None:
        raise click.UsageError("name a topic (--topic) or a pattern (--include)")
    if topics and pattern is not None and group is not None:
        raise click.UsageError("a group subscribes to topics or to a pattern, not both")
    if group is not None and partitions:
        raise click.UsageError("--partition reads without a group: a group's partitions are assigned by the group")
    if from_beginning:
        if start is not None and start.kind != "earliest":
            raise click.UsageError("--from-beginning and --offset say different things")
        start = StartAt("earliest")
    if group is not None and start is not None and start.kind not in ("earliest", "latest"):
        raise click.UsageError("with --group, --offset is earliest or latest (where a partition without a "
                               "committed offset starts); reset a group's offsets with `kafkalite groups "
                               "reset-offsets`")
    chosen = sum((formatter is not None, key_separator is not None, as_json))
    if chosen > 1:
        raise click.UsageError("--format, --key-separator and --json are alternatives")
    if key_separator is not None:
        try:
            formatter = compile_format(f"%k{key_separator.replace('%', '%%')}%v\\n")
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--key-separator") from None
    elif formatter is None and not as_json:
        formatter = compile_format("%v\\n")

    config: dict[str, Any] = {"bootstrap.servers": settings.bootstrap_servers, "client.id": CLIENT_ID,
                              "default.api.timeout.ms": settings.timeout_ms,
                              "request.timeout.ms": max(settings.timeout_ms, 30_000),
                              "enable.auto.commit": group is not None,
                              "auto.offset.reset": "earliest" if start is not None and start.kind == "earliest"
                              else "latest"}
    if group is not None:
        config["group.id"] = group
    if isolation_level is not None:
        config["isolation.level"] = isolation_level
    config.update(settings.configs)
    consumer = Consumer(config)
    printer = _Printer(sys.stdout.buffer, formatter, max_messages)
    plan = Plan(topics, pattern, partitions, group, start, exit_at_end, idle_timeout_s)

    async def body() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGTERM, task.cancel)  # a stop as Ctrl-C: commit and leave the group
        try:
            await consume_records(consumer, plan, printer, settings.timeout_ms)
        finally:
            await consumer.close()

    try:
        run_async(body())
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as cat does
        sys.stderr.close()
        return
    click.echo(f"Processed a total of {printer.count} messages", err=True)
