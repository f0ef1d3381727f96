"""What the commands read from their arguments and input, as plain functions (no click, no I/O).

A malformed value raises ``ValueError`` with a message fit for one line after the option's name;
:mod:`.app` turns it into click's usage error (exit status 2).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable

__all__ = [
    "LineSplitter", "parse_datetime_ms", "parse_pair", "parse_properties", "parse_topic_partitions",
    "split_key", "unescape",
]  # fmt: skip

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def parse_pair(text: str) -> tuple[str, str]:
    """``key=value`` as a pair; the key is stripped and must not be empty, the value is kept as given."""
    key, separator, value = text.partition("=")
    key = key.strip()
    if not separator or not key:
        raise ValueError(f"expected key=value, got {text!r}")
    return key, value


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file's ``key=value`` (or ``key: value``) lines; ``#`` and ``!`` start comments."""
    properties = {}
    for number, raw_line in enumerate(text.splitlines(), 1):
        line = raw_line.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if match is None:
            raise ValueError(f"line {number} is not key=value: {raw_line!r}")
        properties[match.group(1)] = match.group(2)
    return properties


def parse_topic_partitions(text: str) -> tuple[str, tuple[int, ...] | None]:
    """``topic`` (every partition: ``None``) or ``topic:0,1,2``, as kafka-consumer-groups takes them."""
    topic, separator, partitions = text.partition(":")
    if not _TOPIC_NAME.fullmatch(topic):
        raise ValueError(f"{topic!r} is not a topic name")
    if not separator:
        return topic, None
    try:
        indexes = tuple(sorted({int(item) for item in partitions.split(",")}))
    except ValueError:
        raise ValueError(f"expected topic:partition,partition,... got {text!r}") from None
    if any(index < 0 for index in indexes):
        raise ValueError(f"partitions are numbered from 0, got {text!r}")
    return topic, indexes


def parse_datetime_ms(text: str, local_zone: datetime.tzinfo | None = None) -> int:
    """An ISO 8601 date and time (``2024-05-01T12:00:00.000``, ``...Z``, ``...+02:00``, or a date) in ms
    since the epoch. Without a zone it is local time (``local_zone``, or the machine's)."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 date-time such as 2024-05-01T12:00:00.000") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=local_zone) if local_zone is not None else moment.astimezone()
    return int(moment.timestamp() * 1000)


def unescape(text: str) -> bytes:
    r"""A separator as kcat takes it: UTF-8, with ``\t``, ``\n``, ``\r``, ``\\`` and ``\xNN`` escapes."""
    result = bytearray()
    index = 0
    simple = {"t": b"\t", "n": b"\n", "r": b"\r", "\\": b"\\", "0": b"\0"}
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            follower = text[index + 1]
            if follower in simple:
                result += simple[follower]
                index += 2
                continue
            if follower == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[index + 2:index + 4]):
                result.append(int(text[index + 2:index + 4], 16))
                index += 4
                continue
        result += char.encode("utf-8")
        index += 1
    if not result:
        raise ValueError("the separator is empty")
    return bytes(result)


def split_key(line: bytes, separator: bytes, line_number: int) -> tuple[bytes, bytes]:
    """A line's key and value, cut at the first ``separator`` (kafka-console-producer's ``parse.key``)."""
    key, found, value = line.partition(separator)
    if not found:
        shown = separator.decode("utf-8", "backslashreplace")
        raise ValueError(f"line {line_number} has no key separator {shown!r}")
    return key, value


class LineSplitter:
    """Cuts a byte stream, fed in chunks of any size, into lines without their ``\\n`` (or ``\\r\\n``)."""

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes; an unfinished last line waits for the next chunk."""
        lines = (self._tail + chunk).split(b"\n") if self._tail else chunk.split(b"\n")
        self._tail = lines.pop()
        return _strip_carriage_returns(lines)

    def finish(self) -> list[bytes]:
        """The last line, if the stream did not end with a newline."""
        tail, self._tail = self._tail, b""
        return _strip_carriage_returns([tail]) if tail else []


def _strip_carriage_returns(lines: Iterable[bytes]) -> list[bytes]:
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]
