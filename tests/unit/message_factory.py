"""Random instances of generated message classes, valid for a given version.

Fields that do not exist in the version keep their defaults and nullable fields are null only
where the schema allows, so ``decode(encode(m, v), v) == m`` must hold for every instance.
"""

from __future__ import annotations

import random
import uuid

from kafkalite.protocol.codegen.schema import VersionRange
from kafkalite.protocol.message import FieldSpec, Struct

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_ALPHABET = "abcdefghijklmnopqrstuvwxyz_-.0123456789ÄéЖ中🙂"


def _scalar(rng: random.Random, kind: str) -> object:
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        return rng.choice([v for v in (low, high, 0, -1, 1, rng.randint(low, high)) if low <= v <= high])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.choice([0.0, -1.5, 1e300, rng.uniform(-1e6, 1e6)])
    if kind == "string":
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12)))
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 40))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise ValueError(kind)


def _value(rng: random.Random, spec: FieldSpec, version: int, depth: int) -> object:
    if version in VersionRange.parse(spec.nullable_versions) and rng.random() < 0.2:
        return None
    if spec.type.startswith("[]"):
        count = rng.randint(0, 3 if depth < 3 else 1)
        element = spec.type[2:]
        if spec.struct is not None:
            return [build(rng, spec.struct, version, depth + 1) for _ in range(count)]
        return [_scalar(rng, element) for _ in range(count)]
    if spec.struct is not None:
        return build(rng, spec.struct, version, depth + 1)
    return _scalar(rng, spec.type)


def build(rng: random.Random, cls: type[Struct], version: int, depth: int = 0) -> Struct:
    """A random ``cls`` whose every field is valid at ``version``."""
    instance = cls()
    for spec in cls.FIELDS:
        if version in VersionRange.parse(spec.versions):
            setattr(instance, spec.name, _value(rng, spec, version, depth))
    return instance
