"""What the modules of a start cost to import: which dataclasses a start builds (and that it builds no
named tuple), which patterns it compiles at import, which modules wait.

Making a dataclass executes the source of each method it generates (four or more for a frozen one,
and ``slots=True`` makes the class twice); on the start path that was most of what importing the
broker cost beyond its own code. In the codec, the config room and core, a start's classes that
nothing compares, hashes or copies with ``dataclasses.replace`` are plain slotted classes with their
``__init__`` written out (fields ``Final`` where they were frozen), so the dataclasses a start builds
there are the values listed here; elsewhere a class that nothing compares is declared ``eq=False``.
A pattern a start does not use is compiled on its first use (re's own cache). Each check runs in a
fresh interpreter that imports what a bare start does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# what ``kafkalite serve`` imports before its first answer (tests/integration/test_startup.py checks a real start)
START_IMPORTS = ("kafkalite.cli.serve", "kafkalite.broker.server", "kafkalite.broker.core.cluster",
                 "kafkalite.broker.handlers.api_versions")
# the handlers of the first requests a client sends after ApiVersions
FIRST_REQUESTS = ("kafkalite.broker.handlers.metadata", "kafkalite.broker.handlers.produce",
                  "kafkalite.broker.handlers.fetch")

# compared somewhere: listeners (serve.py moves the first one to --port), the registry's table rows (a
# handler's @handles against SERVED), log configs (aborted transactions, a set of them, wait for the first abort)
COMPARED = ["kafkalite.broker.config.broker_config.Listener", "kafkalite.broker.core.log.partition_log.LogConfig",
            "kafkalite.broker.handlers.registry.ServedApi"]


def fresh(script: str) -> list[str]:
    """Run ``script`` in a new interpreter importing this checkout; its stdout lines."""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_dataclasses_of_a_start_compare_by_value_only_where_something_compares_them() -> None:
    lines = fresh(
        "import dataclasses, importlib, sys\n"
        f"for name in {START_IMPORTS + FIRST_REQUESTS!r}:\n"
        "    importlib.import_module(name)\n"
        "for name, module in sorted(sys.modules.items()):\n"
        "    if name.startswith('kafkalite.') and not name.startswith('kafkalite.protocol.messages'):\n"
        "        for value in vars(module).values():\n"
        "            if (isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value)\n"
        "                    and value.__dataclass_params__.eq):\n"
        "                print(f'{name}.{value.__qualname__}')\n")
    assert sorted(lines) == sorted(COMPARED), "a new dataclass of the start path that nothing compares: eq=False"


# the only dataclasses a start builds in the codec, the config room and core: values compared somewhere
# (listeners by serve.py, log configs by the storage-default check and replaced by the log tests)
BUILT_IN_THE_LOWER_ROOMS = ["kafkalite.broker.config.broker_config.Listener",
                            "kafkalite.broker.core.log.partition_log.LogConfig"]


def test_a_start_builds_no_dataclass_in_the_codec_config_or_core_but_the_compared_values() -> None:
    lines = fresh(
        "import dataclasses, importlib, sys\n"
        f"for name in {START_IMPORTS + FIRST_REQUESTS!r}:\n"
        "    importlib.import_module(name)\n"
        "for name, module in sorted(sys.modules.items()):\n"
        "    if name.startswith(('kafkalite.protocol.', 'kafkalite.broker.config.', 'kafkalite.broker.core.')):\n"
        "        for value in vars(module).values():\n"
        "            if isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value):\n"
        "                print(f'{name}.{value.__qualname__}')\n")
    assert sorted(lines) == BUILT_IN_THE_LOWER_ROOMS, "a class nothing compares: a slotted class with an __init__"


def test_a_start_builds_no_named_tuple_class() -> None:
    """typing.NamedTuple and collections.namedtuple execute the source of the __new__ they generate."""
    lines = fresh(
        "import importlib, sys\n"
        f"for name in {START_IMPORTS + FIRST_REQUESTS!r}:\n"
        "    importlib.import_module(name)\n"
        "for name, module in sorted(sys.modules.items()):\n"
        "    if name.startswith('kafkalite.'):\n"
        "        for value in vars(module).values():\n"
        "            if (isinstance(value, type) and value.__module__ == name and issubclass(value, tuple)\n"
        "                    and hasattr(value, '_fields')):\n"
        "                print(f'{name}.{value.__qualname__}')\n")
    assert lines == []


# compiled at import because a start or its first requests use them: the listeners (every start parses
# them) and legal topic names (the first Metadata creates its topic); other patterns wait for their first use
PATTERNS_OF_A_START = ["kafkalite.broker.config.broker_config._LISTENER", "kafkalite.broker.core.topics._LEGAL_NAME"]


def test_a_start_compiles_at_import_only_the_patterns_it_uses() -> None:
    lines = fresh(
        "import importlib, re, sys\n"
        f"for name in {START_IMPORTS + FIRST_REQUESTS!r}:\n"
        "    importlib.import_module(name)\n"
        "for name, module in sorted(sys.modules.items()):\n"
        "    if name.startswith('kafkalite.'):\n"
        "        for key, value in vars(module).items():\n"
        "            if isinstance(value, re.Pattern):\n"
        "                print(f'{name}.{key}')\n")
    assert sorted(lines) == PATTERNS_OF_A_START


def test_a_start_and_its_first_requests_leave_what_they_do_not_use_unimported() -> None:
    """The memory logs (log.storage=memory), magic 0/1 batches, decoded records and transaction markers
    (appends and reads move batches as bytes) and zlib (the first gzip batch) wait for their first use;
    the transaction room waits for the first transactional request or stored transaction state, the
    AbortedTxn class for the first abort written or read, and the CRC-32C extension is loaded without
    importlib.util."""
    lines = fresh(
        "import importlib, sys\n"
        f"for name in {START_IMPORTS + FIRST_REQUESTS!r}:\n"
        "    importlib.import_module(name)\n"
        "print(*sorted(sys.modules), sep='\\n')\n")
    assert "kafkalite.broker.core.log.disk" in lines
    for name in ("kafkalite.broker.core.log.memory", "kafkalite.protocol.legacy_records",
                 "kafkalite.protocol.decoded_records", "zlib", "kafkalite.broker.core.txn.producer_ids",
                 "kafkalite.broker.core.log.aborted", "importlib.util"):
        assert name not in lines, name


def test_records_and_markers_are_there_for_whoever_imports_them() -> None:
    lines = fresh(
        "from kafkalite.protocol.records import EndTransactionMarker, Record, RecordBatch, build_record_batch\n"
        "from kafkalite.protocol.decoded_records import Record as Decoded\n"
        "batch = RecordBatch(build_record_batch([Record(0, 5, b'k', b'v')]))\n"
        "print(Record is Decoded, EndTransactionMarker.__module__, list(batch.records()))\n")
    assert lines == ["True kafkalite.protocol.decoded_records "
                     "[Record(offset=0, timestamp=5, key=b'k', value=b'v', headers=(), sequence=-1)]"]
