"""How the commands print: aligned tables for people, JSON for scripts (plain functions, no I/O)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["cell", "kafka_uuid", "rate", "render_json", "render_table"]


def cell(value: Any) -> str:
    """A table cell: ``None`` is ``-`` (as kafka-consumer-groups prints a missing offset), a list is comma-joined."""
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> str:
    """Columns left-aligned to their widest cell, two spaces apart, no trailing blanks."""
    texts = [[cell(value) for value in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in texts:
        for index, text in enumerate(row):
            widths[index] = max(widths[index], len(text))
    lines = []
    for row in [list(headers), *texts]:
        lines.append(indent + "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def render_json(document: Any) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def kafka_uuid(value: uuid.UUID | None) -> str | None:
    """A topic id as Kafka prints it: URL-safe base64 of its 16 bytes, without padding."""
    if value is None:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def rate(count: int, seconds: float) -> str:
    """``12,345/s``; a count done in no measurable time has no rate."""
    if seconds <= 0:
        return "-/s"
    return f"{count / seconds:,.0f}/s"
