"""One SparkSession for the Spark tests (all in one module): local[2] (up to 4 attempts per task), UI off,
2 shuffle partitions; the JVM is stopped after the module.

Spark runs Python data sources in worker processes of its own: they must run this interpreter and
import this checkout's kafkalite, so the session is started with ``PYSPARK_PYTHON`` set to it and the
checkout first on ``PYTHONPATH`` (the JVM keeps the environment it started with; ours is put back).
``packaging/pyspark-kafkalite`` is on that path too, as if ``pyspark-kafkalite`` were installed: Spark's
own discovery finds ``format("kafkalite")`` there, and the fixture's ``register()`` call beside it is
harmless (one test reads through a new session, which has only what discovery found).
Without pyspark, pyarrow or Java the tests skip and say which is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "packaging" / "pyspark-kafkalite"  # the module pyspark-kafkalite installs


def _missing() -> str | None:
    for module in ("pyspark", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'kafkalite[spark]')"
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and Path(java_home, "bin", "java").exists()):
        return "Spark needs Java (17 or later) and none is on PATH or in JAVA_HOME"
    return None


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    from pyspark.sql import SparkSession

    import kafkalite.spark

    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), str(SHIM), saved["PYTHONPATH"]]))
    try:
        session = (SparkSession.builder.master("local[2,4]").appName("kafkalite-tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.sql.session.timeZone", "UTC")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.sql.streaming.stopTimeout", "30s")
                   .getOrCreate())
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    session.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
        _stop_the_jvm()


def _stop_the_jvm() -> None:
    """Stop the JVM the session ran in, so no Spark thread, process or socket outlives the module
    (later tests in the same process count descriptors and threads)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    process = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process is not None:
        if process.stdin is not None:
            process.stdin.close()  # Spark's gateway server exits when its stdin ends
        process.wait(timeout=60)
