"""Fault injection: what to break, for which requests, for how long.

A ``Fault`` is made from a JSON object (``parse_fault``) such as ``{"api": "Produce", "error":
"NOT_LEADER_OR_FOLLOWER", "count": 3}`` and kept in the ``FaultRegistry`` until it expires. Kinds:

* ``error``: answer the request with ``error`` (a Kafka error name or code) instead of handling it;
  narrowed to a topic or partition, only those partitions get the error and the rest is handled.
* ``disk_full``: ``error`` with KAFKA_STORAGE_ERROR on Produce (what Kafka answers when a log
  directory fails); nothing is appended.
* ``latency``: wait ``delay_ms`` before handling the request.
* ``stall``: handle the request at once, hold its response for ``delay_ms``.
* ``drop_before``: close the connection instead of handling the request.
* ``drop_after``: handle the request, then close the connection instead of answering.
* ``leader_unavailable``: for ``duration_ms`` the partition (or every partition of the topic) has no
  leader: Produce, Fetch, ListOffsets and OffsetForLeaderEpoch answer it NOT_LEADER_OR_FOLLOWER and
  Metadata shows leader -1 with LEADER_NOT_AVAILABLE, as during a leader election in Kafka.

Narrowing, all optional: ``api`` (name or key; every kind but ``leader_unavailable`` needs one),
``client_id`` (exact), ``topic`` and ``partition`` (only for the APIs whose requests name partitions,
``fault_responses.PARTITIONED``, and Metadata). A fault applies to the next ``count`` matching
requests (default: every one), each with ``probability`` (default 1; ``seed`` makes the draws
repeatable), and expires after ``duration_ms`` (default 60 s, at most an hour) whatever is left:
nothing injected outlives its test. When several faults match a request, the oldest decides.

Everything here is plain state on the event loop's clock; ``observer`` applies the decisions.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kafkalite.broker.admin.fault_responses import PARTITIONED, error_response_supported
from kafkalite.broker.handlers.registry import HANDLERS
from kafkalite.protocol.errors import ErrorCode

__all__ = ["DEFAULT_DURATION_MS", "MAX_DURATION_MS", "Fault", "FaultError", "FaultKind", "FaultRegistry",
           "FaultSpec", "Match", "api_key_of", "parse_fault"]

DEFAULT_DURATION_MS = 60_000
MAX_DURATION_MS = 3_600_000
METADATA_KEY = 3


class FaultKind(StrEnum):
    ERROR = "error"
    DISK_FULL = "disk_full"
    LATENCY = "latency"
    STALL = "stall"
    DROP_BEFORE = "drop_before"
    DROP_AFTER = "drop_after"
    LEADER_UNAVAILABLE = "leader_unavailable"


_NEEDS_DELAY = (FaultKind.LATENCY, FaultKind.STALL)
_PARTITION_KINDS = (FaultKind.ERROR, FaultKind.DISK_FULL, FaultKind.LEADER_UNAVAILABLE)
_FIELDS = {"kind", "api", "error", "count", "probability", "seed", "delay_ms", "duration_ms", "topic", "partition",
           "client_id"}


class FaultError(ValueError):
    """A fault description that cannot be injected (the HTTP API answers 400 with its message)."""


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """What to inject; ``parse_fault`` makes one from JSON and checks it."""

    kind: FaultKind
    api_key: int | None = None
    error: ErrorCode | None = None
    count: int | None = None
    probability: float = 1.0
    seed: int | None = None
    delay_ms: int = 0
    duration_ms: int = DEFAULT_DURATION_MS
    topic: str | None = None
    partition: int | None = None
    client_id: str | None = None


def api_key_of(value: object) -> int:
    """An API key from its name ("Produce", case and spaces ignored) or its number."""
    if isinstance(value, bool):
        raise FaultError(f"api must be a name or a key, got {value!r}")
    if isinstance(value, int):
        if value in HANDLERS:
            return value
        raise FaultError(f"this broker serves no API with key {value}")
    if isinstance(value, str):
        wanted = value.replace(" ", "").lower()
        for key, handler in HANDLERS.items():
            if handler.name.lower() == wanted or str(key) == wanted:
                return key
    raise FaultError(f"unknown API {value!r} (names as in Kafka: Produce, Fetch, Metadata, JoinGroup, ...)")


def _error_of(value: object) -> ErrorCode:
    try:
        if isinstance(value, str) and not value.lstrip("-").isdigit():
            return ErrorCode[value.strip().upper()]
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            code = ErrorCode.from_code(int(value))
            if code.value == int(value):
                return code
    except (KeyError, ValueError):
        pass
    raise FaultError(f"unknown error {value!r} (Kafka's names, e.g. NOT_LEADER_OR_FOLLOWER, or codes)")


def _int(data: Mapping[str, Any], name: str, low: int, high: int | None = None) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FaultError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        raise FaultError(f"{name} must be {low} or more" + (f" and at most {high}" if high is not None else "") +
                         f", got {value}")
    return value


def parse_fault(data: object) -> FaultSpec:
    """Check a JSON fault description and make it a ``FaultSpec`` (raises ``FaultError``)."""
    if not isinstance(data, Mapping):
        raise FaultError("a fault is a JSON object, e.g. {\"api\": \"Produce\", \"error\": \"NOT_LEADER_OR_FOLLOWER\"}")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise FaultError(f"unknown field(s) {', '.join(unknown)}; a fault has {', '.join(sorted(_FIELDS))}")
    kind_text = data.get("kind", "error" if "error" in data else None)
    if kind_text is None:
        raise FaultError(f"kind is missing: one of {', '.join(kind.value for kind in FaultKind)}")
    try:
        kind = FaultKind(str(kind_text).lower())
    except ValueError:
        raise FaultError(f"unknown kind {kind_text!r}: one of {', '.join(k.value for k in FaultKind)}") from None
    api_key = api_key_of(data["api"]) if data.get("api") is not None else None
    error = _error_of(data["error"]) if data.get("error") is not None else None
    if kind is FaultKind.DISK_FULL:
        if api_key not in (None, 0):
            raise FaultError("disk_full applies to Produce only")
        api_key, error = 0, ErrorCode.KAFKA_STORAGE_ERROR
    if kind is FaultKind.ERROR and (error is None or error is ErrorCode.NONE):
        raise FaultError("an error fault needs an error other than NONE")
    if kind is not FaultKind.ERROR and kind is not FaultKind.DISK_FULL and error is not None:
        raise FaultError(f"error applies to the error kind only, not {kind.value}")
    if kind is FaultKind.LEADER_UNAVAILABLE:
        if api_key is not None:
            raise FaultError("leader_unavailable applies to every API that names the partition; give no api")
    elif api_key is None:
        raise FaultError(f"a {kind.value} fault needs an api")
    topic = data.get("topic")
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise FaultError(f"topic must be a topic name, got {topic!r}")
    partition = _int(data, "partition", 0)
    if partition is not None and topic is None:
        raise FaultError("partition needs a topic")
    if kind is FaultKind.LEADER_UNAVAILABLE and topic is None:
        raise FaultError("leader_unavailable needs a topic (and optionally a partition)")
    if topic is not None and kind not in _PARTITION_KINDS:
        raise FaultError(f"a {kind.value} fault cannot be narrowed to a topic; narrow it by api and client_id")
    if topic is not None and api_key is not None and api_key not in PARTITIONED and api_key != METADATA_KEY:
        names = ", ".join(sorted(HANDLERS[key].name for key in (*PARTITIONED, METADATA_KEY)))
        raise FaultError(f"{HANDLERS[api_key].name} requests name no partitions; topic narrowing applies to {names}")
    if error is not None and api_key is not None and not error_response_supported(api_key):
        raise FaultError(f"error faults are not offered for {HANDLERS[api_key].name}")
    delay_ms = _int(data, "delay_ms", 0, MAX_DURATION_MS)
    if kind in _NEEDS_DELAY and not delay_ms:
        raise FaultError(f"a {kind.value} fault needs delay_ms")
    probability = data.get("probability", 1.0)
    if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0 < probability <= 1:
        raise FaultError(f"probability must be a number in (0, 1], got {probability!r}")
    client_id = data.get("client_id")
    if client_id is not None and not isinstance(client_id, str):
        raise FaultError(f"client_id must be a string, got {client_id!r}")
    duration_ms = _int(data, "duration_ms", 1, MAX_DURATION_MS)
    return FaultSpec(kind, api_key, error, _int(data, "count", 1), float(probability), _int(data, "seed", 0),
                     delay_ms or 0, duration_ms if duration_ms is not None else DEFAULT_DURATION_MS, topic, partition,
                     client_id)


class Fault:
    """An injected fault and what is left of it."""

    __slots__ = ("fault_id", "spec", "created_ms", "expires_at", "remaining", "applied", "_random")

    def __init__(self, fault_id: int, spec: FaultSpec, created_ms: int, expires_at: float) -> None:
        self.fault_id = fault_id
        self.spec = spec
        self.created_ms = created_ms
        self.expires_at = expires_at  # on the registry's monotonic clock
        self.remaining = spec.count  # None: every matching request until it expires
        self.applied = 0
        self._random = random.Random(spec.seed) if spec.probability < 1 else None

    def covers(self, topic: str, partition: int) -> bool:
        spec = self.spec
        return topic == spec.topic and (spec.partition is None or partition == spec.partition)

    def draw(self) -> bool:
        """Whether this matching request is one the fault takes (``probability``)."""
        return self._random is None or self._random.random() < self.spec.probability

    def as_json(self, now: float, now_ms: int) -> dict[str, Any]:
        spec = self.spec
        return {
            "id": self.fault_id,
            "kind": spec.kind.value,
            "api": None if spec.api_key is None else HANDLERS[spec.api_key].name,
            "error": None if spec.error is None else spec.error.name,
            "count": spec.count,
            "remaining": self.remaining,
            "probability": spec.probability,
            "delay_ms": spec.delay_ms,
            "duration_ms": spec.duration_ms,
            "topic": spec.topic,
            "partition": spec.partition,
            "client_id": spec.client_id,
            "applied": self.applied,
            "created_ms": self.created_ms,
            "expires_in_ms": max(0, int((self.expires_at - now) * 1000)),
            "expires_at_ms": now_ms + max(0, int((self.expires_at - now) * 1000)),
        }


@dataclass(frozen=True, slots=True)
class Match:
    """A fault that takes a request: the whole request, or only ``partitions`` of it."""

    fault: Fault
    partitions: frozenset[tuple[str, int]] | None = None


PartitionsOf = Callable[[int, int, Any], list[tuple[str, int]] | None]


class FaultRegistry:
    """The faults in force. ``active`` is False when there is none, so a request pays one check."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._clock, self._wall_clock_ms = clock, wall_clock_ms
        self._faults: dict[int, Fault] = {}
        self._ids = itertools.count(1)
        self.active = False
        self.listeners: list[Callable[[], None]] = []  # told when faults are added or removed

    def add(self, spec: FaultSpec | Mapping[str, Any]) -> Fault:
        if not isinstance(spec, FaultSpec):
            spec = parse_fault(spec)
        fault = Fault(next(self._ids), spec, self._wall_clock_ms(), self._clock() + spec.duration_ms / 1000)
        self._faults[fault.fault_id] = fault
        self._changed()
        return fault

    def faults(self) -> list[Fault]:
        """The faults in force, oldest first (expired ones are dropped here)."""
        self._expire(self._clock())
        return list(self._faults.values())

    def get(self, fault_id: int) -> Fault | None:
        self._expire(self._clock())
        return self._faults.get(fault_id)

    def as_json(self, faults: Iterable[Fault] | None = None) -> list[dict[str, Any]]:
        now, now_ms = self._clock(), self._wall_clock_ms()
        return [fault.as_json(now, now_ms) for fault in (self.faults() if faults is None else faults)]

    def remove(self, fault_id: int) -> bool:
        removed = self._faults.pop(fault_id, None) is not None
        self._changed()
        return removed

    def clear(self) -> int:
        count = len(self._faults)
        self._faults.clear()
        self._changed()
        return count

    def match(self, api_key: int, client_id: str | None, request: Any, api_version: int,
              partitions_of: PartitionsOf) -> Match | None:
        """The fault that takes this request, if any (its count is used up here)."""
        now = self._clock()
        requested: list[tuple[str, int]] | None = None
        for fault in list(self._faults.values()):
            if fault.expires_at <= now:
                self._remove_expired(fault)
                continue
            spec = fault.spec
            if spec.api_key is None:  # leader_unavailable: every API that names partitions, and Metadata
                if api_key not in PARTITIONED and api_key != METADATA_KEY:
                    continue
            elif spec.api_key != api_key:
                continue
            if spec.client_id is not None and spec.client_id != client_id:
                continue
            hit: frozenset[tuple[str, int]] | None = None
            if spec.topic is not None:
                if requested is None:
                    requested = partitions_of(api_key, api_version, request) or []
                hit = frozenset(item for item in requested if fault.covers(*item))
                if not hit:
                    continue
            if not fault.draw():
                continue
            fault.applied += 1
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    del self._faults[fault.fault_id]
                    self._changed()
            return Match(fault, hit)
        return None

    def _expire(self, now: float) -> None:
        for fault in [fault for fault in self._faults.values() if fault.expires_at <= now]:
            self._remove_expired(fault)

    def _remove_expired(self, fault: Fault) -> None:
        self._faults.pop(fault.fault_id, None)
        self._changed()

    def _changed(self) -> None:
        self.active = bool(self._faults)
        for listener in self.listeners:
            listener()
