"""Base classes of the generated message and struct classes.

A generated top-level class (``ProduceRequest``...) describes one Kafka message across all its
versions; ``encode(version)`` and ``decode(buffer, version)`` are the whole public surface.
"""

from __future__ import annotations

import builtins
import struct
from operator import attrgetter
from typing import Any, ClassVar, Final, Self, TypeVar

from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.primitives import Reader, Writer

_M = TypeVar("_M", bound="Message")


class FieldSpec:
    """What the schema says about one field of a generated class: its Python attribute (``name``),
    Kafka's name, its type ("int32", "string", "[]int32", "[]TopicData", "records", ...), its versions
    ("0+", "3-5", "none") and, for a struct or array-of-struct field, the element class (``struct``).

    Read-only (``Final``), compared by identity. Written out rather than a frozen dataclass, like the
    generated classes: every message module's ``FIELDS`` makes these, and a frozen dataclass
    compiles four methods to make the class and sets each field through ``object.__setattr__``."""

    __slots__ = ("name", "kafka_name", "type", "versions", "nullable_versions", "tag", "tagged_versions", "ignorable",
                 "struct")

    name: Final[str]
    kafka_name: Final[str]
    type: Final[str]
    versions: Final[str]
    nullable_versions: Final[str]
    tag: Final[int | None]
    tagged_versions: Final[str]
    ignorable: Final[bool]
    struct: Final[builtins.type[Struct] | None]

    def __init__(self, name: str, kafka_name: str, type: str, versions: str, nullable_versions: str = "none",
                 tag: int | None = None, tagged_versions: str = "none", ignorable: bool = False,
                 struct: builtins.type[Struct] | None = None) -> None:
        self.name = name
        self.kafka_name = kafka_name
        self.type = type
        self.versions = versions
        self.nullable_versions = nullable_versions
        self.tag = tag
        self.tagged_versions = tagged_versions
        self.ignorable = ignorable
        self.struct = struct

    def __repr__(self) -> str:
        fields = ", ".join(f"{field}={getattr(self, field)!r}" for field in FieldSpec.__slots__)
        return f"FieldSpec({fields})"


class Struct:
    """A struct nested in a message. Generated subclasses add ``read`` and ``write``.

    Generated classes are slotted value classes written out in full by the generator: typed
    attributes, ``__init__`` with the schema's defaults, and ``FIELDS`` with each field's schema
    facts. (Decorating the ~370 classes with ``@dataclass`` cost ~290 ms at import, more than the
    broker's whole start-up budget.) Equality and ``repr`` come from here and cover the schema's
    fields; unknown tagged fields are kept but not compared.
    """

    __slots__ = ()

    FIELD_NAMES: ClassVar[tuple[str, ...]] = ()
    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()

    _values: ClassVar[staticmethod[[Any], Any]] = staticmethod(lambda instance: ())

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = cls.__dict__.get("FIELD_NAMES", ())
        if names:
            # One C-level call fetches every schema field; a 1-tuple keeps the shapes uniform.
            cls._values = staticmethod(attrgetter(*names, *names[:1]) if len(names) == 1 else attrgetter(*names))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(self._values(self) == self._values(other))

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose: instances are mutable values

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELD_NAMES)
        return f"{self.__class__.__name__}({fields})"

    @classmethod
    def read(cls, reader: Reader, version: int) -> Self:  # pragma: no cover - generated
        raise NotImplementedError

    def write(self, writer: Writer, version: int) -> None:  # pragma: no cover - generated
        raise NotImplementedError


class Message(Struct):
    """A request, response, header or data message with its schema facts as class variables."""

    __slots__ = ()

    NAME: ClassVar[str]
    TYPE: ClassVar[str]
    API_KEY: ClassVar[int]
    VALID_VERSIONS: ClassVar[tuple[int, int]]
    FLEXIBLE_FROM: ClassVar[int | None]
    DEPRECATED_VERSIONS: ClassVar[tuple[int, int] | None]
    LATEST_VERSION_UNSTABLE: ClassVar[bool]
    LISTENERS: ClassVar[tuple[str, ...]]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE_FROM is not None and version >= cls.FLEXIBLE_FROM

    @classmethod
    def check_version(cls, version: int) -> None:
        low, high = cls.VALID_VERSIONS
        if not low <= version <= high:
            raise ProtocolError(f"{cls.NAME} has no version {version} (valid {low}-{high})")

    def encode(self, version: int) -> bytes:
        """The message body (no size prefix, no header) at ``version``."""
        self.check_version(version)
        writer = Writer()
        self.write(writer, version)
        return writer.getvalue()

    def encode_into(self, writer: Writer, version: int) -> None:
        self.check_version(version)
        self.write(writer, version)

    @classmethod
    def decode(cls: type[_M], buffer: bytes | bytearray | memoryview, version: int) -> _M:
        """Decode a message body; malformed input raises ``ProtocolError`` and nothing else."""
        return cls.decode_from(Reader(buffer), version)

    @classmethod
    def decode_from(cls: type[_M], reader: Reader, version: int) -> _M:
        """Decode from a reader positioned at the body (after a header), leaving it at the end."""
        cls.check_version(version)
        try:
            return cls.read(reader, version)
        except ProtocolError:
            raise
        except (struct.error, IndexError, ValueError, OverflowError, RecursionError) as exc:
            raise ProtocolError(f"malformed {cls.__name__} v{version}: {exc}") from None
