"""Kafka's JSON message schemas, read into a small model the code generator walks.

The files are JSON with ``//`` comments (the format of Apache Kafka's ``common/message`` folder). A schema names
a message, its valid and flexible versions, and an ordered list of fields; a field's type is a
primitive, an array (``[]T``), or a struct defined inline, in ``commonStructs``, or inline at an
earlier field of the same message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "string", "bytes", "uuid", "records"}
)

# The highest version number Kafka's generator allows; an open range "3+" means 3..MAX_VERSION.
MAX_VERSION = 0x7FFF


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; ``empty`` when the schema says "none"."""

    low: int
    high: int

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def intersect(self, other: VersionRange) -> VersionRange:
        return VersionRange(max(self.low, other.low), min(self.high, other.high))

    def covers(self, other: VersionRange) -> bool:
        return other.empty or (self.low <= other.low and other.high <= self.high)

    def describe(self) -> str:
        if self.empty:
            return "none"
        if self.high >= MAX_VERSION:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"

    @classmethod
    def parse(cls, text: str | None) -> VersionRange:
        if text is None or text == "none":
            return NO_VERSIONS
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-", 1)
            return cls(int(low), int(high))
        return cls(int(text), int(text))


NO_VERSIONS = VersionRange(1, 0)


@dataclass(slots=True)
class Field:
    name: str
    type: str
    versions: VersionRange
    nullable_versions: VersionRange
    tagged_versions: VersionRange
    tag: int | None
    default: object
    ignorable: bool
    about: str
    flexible_versions: VersionRange | None  # a per-field override of the message's setting
    map_key: bool
    entity_type: str | None
    fields: list[Field] | None  # an inline struct definition

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES


@dataclass(slots=True)
class Struct:
    name: str
    fields: list[Field]
    versions: VersionRange  # versions in which the struct can appear on the wire


@dataclass(slots=True)
class Message:
    name: str
    type: str  # request, response, header, data
    api_key: int | None
    valid_versions: VersionRange
    flexible_versions: VersionRange
    deprecated_versions: VersionRange
    listeners: tuple[str, ...]
    latest_version_unstable: bool
    fields: list[Field]
    common_structs: list[Struct] = field(default_factory=list)
    source: str = ""


def strip_comments(text: str) -> tuple[str, list[str]]:
    """Remove ``//`` comments outside of strings; return the JSON and the comment lines."""
    out: list[str] = []
    comments: list[str] = []
    i = 0
    in_string = False
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            out.append(ch)
            i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            comments.append(text[i + 2 : end].strip())
            i = end
            continue
        out.append(ch)
        i += 1
    return "".join(out), comments


def _optional_str(raw: dict[str, object], key: str) -> str | None:
    """A string property that may be absent; anything else than a string is a schema error."""
    value = raw.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"schema property {key!r} is {value!r}, expected a string")


def _int(raw: dict[str, object], key: str) -> int:
    """An integer property, written in the schemas as a number or a numeric string."""
    value = raw[key]
    if isinstance(value, (int, str)):
        return int(value)
    raise ValueError(f"schema property {key!r} is {value!r}, expected an integer")


def _objects(raw: dict[str, object], key: str) -> list[dict[str, object]]:
    """A list of JSON objects (the ``fields`` of a struct)."""
    value = raw[key]
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ValueError(f"schema property {key!r} is not a list of objects")
    return value


def _parse_field(raw: dict[str, object]) -> Field:
    tagged = VersionRange.parse(_optional_str(raw, "taggedVersions"))
    flexible_override = raw.get("flexibleVersions")
    return Field(
        name=str(raw["name"]),
        type=str(raw["type"]),
        versions=VersionRange.parse(str(raw["versions"])),
        nullable_versions=VersionRange.parse(_optional_str(raw, "nullableVersions")),
        tagged_versions=tagged,
        tag=_int(raw, "tag") if "tag" in raw else None,
        default=raw.get("default"),
        ignorable=bool(raw.get("ignorable", False)),
        about=str(raw.get("about", "")),
        flexible_versions=VersionRange.parse(str(flexible_override)) if flexible_override is not None else None,
        map_key=bool(raw.get("mapKey", False)),
        entity_type=_optional_str(raw, "entityType"),
        fields=[_parse_field(f) for f in _objects(raw, "fields")] if "fields" in raw else None,
    )


def load(path: Path) -> Message:
    text, _comments = strip_comments(path.read_text(encoding="utf-8"))
    raw = json.loads(text)
    return Message(
        name=raw["name"],
        type=raw["type"],
        api_key=raw.get("apiKey"),
        valid_versions=VersionRange.parse(raw["validVersions"]),
        flexible_versions=VersionRange.parse(raw.get("flexibleVersions", "none")),
        deprecated_versions=VersionRange.parse(raw.get("deprecatedVersions")),
        listeners=tuple(raw.get("listeners", ())),
        latest_version_unstable=bool(raw.get("latestVersionUnstable", False)),
        fields=[_parse_field(f) for f in raw["fields"]],
        common_structs=[
            Struct(s["name"], [_parse_field(f) for f in s["fields"]], VersionRange.parse(s.get("versions", "0+")))
            for s in raw.get("commonStructs", ())
        ],
        source=path.name,
    )


def load_all(directory: Path) -> list[Message]:
    return [load(path) for path in sorted(directory.glob("*.json"))]
