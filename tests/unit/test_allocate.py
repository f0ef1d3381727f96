"""Blocks allocated before a large append: the file's length and bytes are what the writes made them."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest

from kafkalite.broker.core.log import allocate
from kafkalite.broker.core.log.allocate import allocate_blocks


@pytest.fixture(autouse=True)
def _fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocate, "_fallocate", None)
    monkeypatch.setattr(allocate, "_available", sys.platform.startswith("linux"))


def test_the_size_stays_and_the_writes_land_where_they_would(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    chunks = [os.urandom(300_000), os.urandom(70_000), os.urandom(5)]
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        position = 0
        for chunk in chunks:
            allocate_blocks(fd, position, len(chunk))
            assert os.fstat(fd).st_size == position  # nothing written yet: the length did not move
            os.write(fd, chunk)
            position += len(chunk)
        if sys.platform.startswith("linux") and allocate._available:
            assert os.fstat(fd).st_blocks * 512 >= position
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(chunks)


def test_a_truncation_after_a_failed_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(b"kept")
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        allocate_blocks(fd, 4, 1 << 20)  # the write that would follow fails: the append cuts back to 4
        os.ftruncate(fd, 4)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"kept"


def test_a_file_system_that_refuses_turns_it_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[tuple[int, int, int]] = []

    def refusing(fd: int, mode: int, offset: int, length: int) -> int:
        calls.append((mode, offset, length))
        return errno.EOPNOTSUPP

    monkeypatch.setattr(allocate, "_available", True)
    monkeypatch.setattr(allocate, "_fallocate", refusing)
    allocate_blocks(3, 0, 100)
    allocate_blocks(3, 100, 100)
    assert calls == [(0x01, 0, 100)]  # keep the size; asked once, then never again


def test_other_failures_are_left_to_the_write(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def full(fd: int, mode: int, offset: int, length: int) -> int:
        calls.append(offset)
        return errno.ENOSPC

    monkeypatch.setattr(allocate, "_available", True)
    monkeypatch.setattr(allocate, "_fallocate", full)
    allocate_blocks(3, 0, 100)
    allocate_blocks(3, 100, 100)
    assert calls == [0, 100]


def test_a_bad_descriptor_is_not_an_error() -> None:
    allocate_blocks(-1, 0, 100)  # EBADF: ignored, the write that follows would say so
