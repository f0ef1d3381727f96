"""``pyspark-kafkalite`` (packaging/pyspark-kafkalite): Spark's own discovery of Python data sources finds
``format("kafkalite")`` in it, and it stays a distribution of one module beside kafkalite's one package."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "packaging" / "pyspark-kafkalite"

# Runs Spark's lookup (what a session's first use of a data source runs in a Python worker) and prints
# the names it would register, decoded from the stream it writes for the JVM. Spark 4.1+ has the lookup
# alone as _main(); Spark 4.0's main() first reads what the JVM sends every worker, given here empty.
LOOKUP = """
import io, sys, tempfile
from pyspark.serializers import SpecialLengths, UTF8Deserializer, read_int, write_int, write_with_length
from pyspark.sql.worker import lookup_data_sources
from pyspark.worker_util import pickleSer

out = io.BytesIO()
if hasattr(lookup_data_sources, "_main"):
    lookup_data_sources._main(io.BytesIO(), out)
else:
    with tempfile.TemporaryDirectory() as files:
        header = io.BytesIO()
        write_with_length(("%d.%d" % sys.version_info[:2]).encode(), header)  # the workers' Python
        write_with_length(files.encode(), header)  # SparkFiles' directory
        write_int(0, header)  # Python includes
        header.write(bytes(1))  # no broadcast decryption server
        write_int(0, header)  # broadcast variables
        write_int(SpecialLengths.END_OF_STREAM, header)
        header.seek(0)
        lookup_data_sources.main(header, out)
out.seek(0)
for _ in range(read_int(out)):
    name = UTF8Deserializer().loads(out)
    source = pickleSer._read_with_length(out)
    print(name, source.__module__ + "." + source.__qualname__)
"""


def _lookup(*paths: Path) -> str:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(str(path) for path in paths)}
    finished = subprocess.run([sys.executable, "-c", LOOKUP], env=environment, capture_output=True, text=True,
                              timeout=120, check=False)
    assert finished.returncode == 0, finished.stderr
    return finished.stdout


@pytest.mark.skipif(importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None,
                    reason="pyspark and pyarrow are not installed (pip install 'kafkalite[spark]')")
def test_sparks_lookup_finds_kafkalite_in_the_pyspark_kafkalite_module() -> None:
    without = _lookup(ROOT).splitlines()
    assert not [line for line in without if line.startswith("kafkalite ")]
    found = _lookup(ROOT, SHIM).splitlines()
    assert "kafkalite kafkalite.spark.source.KafkaliteDataSource" in found


def test_the_shim_is_one_module_depending_on_the_spark_extra() -> None:
    project = tomllib.loads((SHIM / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["name"] == "pyspark-kafkalite"
    assert project["project"]["dependencies"] == ["kafkalite[spark]"]
    assert project["tool"]["setuptools"]["py-modules"] == ["pyspark_kafkalite"]
    assert sorted(path.name for path in SHIM.glob("*.py")) == ["pyspark_kafkalite.py"]
