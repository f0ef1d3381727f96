"""The generator's runs of fixed-size fields: one struct call per run, the same bytes as field by field.

A schema written here (fields present from different versions, a tagged field and a string between
fixed fields, a bool) is generated, executed, and each version's encoding compared with the bytes
Kafka's layout gives when every field is written on its own.
"""

from __future__ import annotations

import json
import struct
import types
from pathlib import Path

import pytest

from kafkalite.protocol.codegen.generate import generate_module
from kafkalite.protocol.codegen.schema import load
from kafkalite.protocol.exceptions import ProtocolError

SCHEMA = {
    "apiKey": 9999, "type": "response", "name": "RunsResponse", "validVersions": "0-4", "flexibleVersions": "4+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "2+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "Generation", "type": "int32", "versions": "0+"},
        {"name": "Hint", "type": "string", "versions": "4+", "taggedVersions": "4+", "tag": 0, "default": ""},
        {"name": "Offset", "type": "int64", "versions": "1+", "default": "-1"},
        {"name": "Name", "type": "string", "versions": "0+"},
        {"name": "Enabled", "type": "bool", "versions": "0+"},
        {"name": "Epoch", "type": "int32", "versions": "0+", "default": "-1"},
        {"name": "Ratio", "type": "float64", "versions": "3+"},
    ],
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, type]:
    path = Path(tmp_path_factory.mktemp("schema")) / "RunsResponse.json"
    path.write_text(json.dumps(SCHEMA))
    source = generate_module(load(path))
    module = types.ModuleType("runs_response")
    exec(compile(source, "runs_response.py", "exec"), module.__dict__)
    return source, module.RunsResponse


def field_by_field(version: int, throttle: int, error: int, generation: int, offset: int, name: str,
                   enabled: bool, epoch: int, ratio: float) -> bytes:
    flexible = version >= 4
    out = b""
    if version >= 2:
        out += struct.pack(">i", throttle)
    out += struct.pack(">h", error) + struct.pack(">i", generation)
    if version >= 1:
        out += struct.pack(">q", offset)
    data = name.encode()
    out += (bytes([len(data) + 1]) if flexible else struct.pack(">h", len(data))) + data
    out += bytes([1 if enabled else 0]) + struct.pack(">i", epoch)
    if version >= 3:
        out += struct.pack(">d", ratio)
    if flexible:
        out += b"\x00"  # no tagged fields (Hint at its default)
    return out


def test_runs_are_one_struct_call_each(generated: tuple[str, type]) -> None:
    source, _ = generated
    # ThrottleTimeMs (v2+) joins ErrorCode and Generation in a branch on the version; the tagged Hint
    # does not break the run that goes on with Offset (v1+); Name (a string) ends it.
    assert "throttle_time_ms, error_code, generation, offset = _FIXED_ihiq.unpack_from(" in source
    assert "error_code, generation, offset = _FIXED_hiq.unpack_from(" in source
    assert "enabled, epoch, ratio = _FIXED_oid.unpack_from(" in source  # Ratio from v3: two branches
    assert "writer.buf += _FIXED_oi.pack(self.enabled, self.epoch)" in source
    assert "_FIXED_oi = _struct.Struct('>?i')" in source


@pytest.mark.parametrize("version", range(5))
def test_same_bytes_as_field_by_field(generated: tuple[str, type], version: int) -> None:
    _, cls = generated
    values = dict(throttle=7, error=-3, generation=2**31 - 1, offset=-(2**63), name="grüße", enabled=True,
                  epoch=-1, ratio=0.25)
    message = cls(throttle_time_ms=values["throttle"], error_code=values["error"], generation=values["generation"],
                  offset=values["offset"], name=values["name"], enabled=values["enabled"], epoch=values["epoch"],
                  ratio=values["ratio"])
    encoded = message.encode(version)
    assert encoded == field_by_field(version, **values)
    decoded = cls.decode(encoded, version)
    assert decoded.error_code == -3 and decoded.generation == 2**31 - 1 and decoded.enabled is True
    assert decoded.throttle_time_ms == (7 if version >= 2 else 0)
    assert decoded.offset == (-(2**63) if version >= 1 else -1)
    assert decoded.ratio == (0.25 if version >= 3 else 0.0)
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolError):
            cls.decode(encoded[:cut], version)


def test_a_bool_reads_any_non_zero_byte_as_true(generated: tuple[str, type]) -> None:
    _, cls = generated
    encoded = bytearray(cls(name="x", enabled=True).encode(0))
    enabled_at = 2 + 4 + 2 + 1  # error code, generation, the name's length and its byte
    encoded[enabled_at] = 0x7F
    assert cls.decode(bytes(encoded), 0).enabled is True
