"""How the broker's log lines look: text for people (the default) or one JSON object per line for
log collectors (``kafkalite serve --log-format json``).

A JSON line has ``time`` (ISO 8601, UTC, milliseconds), ``level``, ``logger`` and ``message``, and
``error`` when the line carries an exception (its one-line description; the traceback, for the broker's
own bugs, in ``traceback``).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

__all__ = ["FORMATS", "JsonFormatter", "TEXT_FORMAT", "configure_logging"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        created = time.gmtime(record.created)
        line: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", created) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and record.exc_info[1] is not None:
            line["error"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str = "INFO", log_format: str = "text", stream: TextIO | None = None) -> None:
    """The root logger writes ``level`` and above to ``stream`` (stderr) in ``log_format``."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {log_format!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
