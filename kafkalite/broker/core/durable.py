"""Small files written so that a crash leaves the old content or the new, never a part.

Checkpoints, ``topics.json``, the dynamic configs, SCRAM credentials and ACLs are all written the
same way: the bytes go to ``NAME.tmp`` (every byte, short writes continued), the file is fsynced,
renamed over ``NAME`` and the directory fsynced, so the rename itself is durable. ``sync=False``
skips both fsyncs where durability is not the point (the rename alone still makes it atomic).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_durably"]


def write_durably(path: Path, data: bytes, *, sync: bool = True, mode: int = 0o644,
                  make_parent: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically (and durably, with ``sync``). ``mode`` is the new
    file's permission bits; ``make_parent`` creates the directory first."""
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
        if sync:
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)
    if sync:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
