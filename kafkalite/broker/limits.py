"""The process limits a broker runs within: the open-file limit in force is raised as far as allowed, and known.

Most shells and containers start with a soft ``RLIMIT_NOFILE`` of 1024 (macOS: 256) while the hard
limit is much higher. A broker holds sockets and segment files, so ``kafkalite serve`` raises its soft
limit to the hard one (on macOS no further than ``OPEN_MAX``, which the kernel enforces) and logs the
limit it runs with, once.

Of the limit in force, ``segment_file_budget`` gives half to segment and index files (opened when used,
closed when least recently used: see ``kafkalite.broker.core.log.files``), after keeping
``RESERVED_DESCRIPTORS`` aside for checkpoints, metadata files, directories being fsynced and the
interpreter's own; the rest is for client connections.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["RESERVED_DESCRIPTORS", "open_file_limit", "raise_open_file_limit", "segment_file_budget"]

RESERVED_DESCRIPTORS = 64
MIN_SEGMENT_FILES = 16

log = logging.getLogger("kafkalite.server")

_MACOS_OPEN_MAX = 10240


def raise_open_file_limit() -> int | None:
    """Raise the soft open-file limit to the hard limit; the limit now in force (None where unknown)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on this platform
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if sys.platform == "darwin" and (hard == resource.RLIM_INFINITY or hard > _MACOS_OPEN_MAX):
        target = _MACOS_OPEN_MAX
    if soft != resource.RLIM_INFINITY and (target == resource.RLIM_INFINITY or target > soft):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %s: %s", soft, target, exc)
    limit = None if soft == resource.RLIM_INFINITY else int(soft)
    log.info("open-file limit: %s", "unlimited" if limit is None else limit)
    return limit


def open_file_limit() -> int | None:
    """The soft open-file limit in force (None when unlimited or unknown)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on this platform
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def segment_file_budget(limit: int | None = None) -> int | None:
    """How many segment and index files may be open at once under ``limit`` (default: the one in force)."""
    limit = open_file_limit() if limit is None else limit
    if limit is None:
        return None
    return max(MIN_SEGMENT_FILES, (limit - RESERVED_DESCRIPTORS) // 2)
