"""What the modules of a start cost to import: which dataclasses compare by value, which modules wait.

Making a dataclass executes the source of each method it generates; on the start path that is most
of what importing the broker costs beyond its own code. A class that nothing compares or hashes is
declared ``eq=False`` (two methods fewer for a frozen one), so the value comparisons a start keeps
are the ones listed here. Each check runs in a fresh interpreter that imports what a bare start does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# what ``kafkalite serve`` imports before its first answer (tests/integration/test_startup.py checks a real start)
START_IMPORTS = ("kafkalite.cli.serve", "kafkalite.broker.server", "kafkalite.broker.core.cluster",
                 "kafkalite.broker.handlers.api_versions")

# compared somewhere: listeners (serve.py moves the first one to --port), the registry's table rows (a
# handler's @handles against SERVED), log configs, aborted transactions (a set of them), decoded records
# and transaction markers (callers compare what they decode)
COMPARED = ["kafkalite.broker.config.broker_config.Listener", "kafkalite.broker.core.log.partition_log.LogConfig",
            "kafkalite.broker.core.log.txn_index.AbortedTxn", "kafkalite.broker.handlers.registry.ServedApi",
            "kafkalite.protocol._record_common.Record", "kafkalite.protocol.records.EndTransactionMarker",
            # the group commit's flush rounds, whose equality nothing uses either (not trimmed yet)
            "kafkalite.broker.core.log.group_commit._Flush", "kafkalite.broker.core.log.group_commit._Round"]


def fresh(script: str) -> list[str]:
    """Run ``script`` in a new interpreter importing this checkout; its stdout lines."""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_dataclasses_of_a_start_compare_by_value_only_where_something_compares_them() -> None:
    lines = fresh(
        "import dataclasses, importlib, sys\n"
        f"for name in {START_IMPORTS!r}:\n"
        "    importlib.import_module(name)\n"
        "for name, module in sorted(sys.modules.items()):\n"
        "    if name.startswith('kafkalite.') and not name.startswith('kafkalite.protocol.messages'):\n"
        "        for value in vars(module).values():\n"
        "            if (isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value)\n"
        "                    and value.__dataclass_params__.eq):\n"
        "                print(f'{name}.{value.__qualname__}')\n")
    assert sorted(lines) == sorted(COMPARED), "a new dataclass of the start path that nothing compares: eq=False"


def test_a_start_leaves_the_memory_logs_and_legacy_batches_unimported() -> None:
    lines = fresh(
        "import importlib, sys\n"
        f"for name in {START_IMPORTS!r}:\n"
        "    importlib.import_module(name)\n"
        "print(*sorted(name for name in sys.modules if name.startswith('kafkalite.')), sep='\\n')\n")
    assert "kafkalite.broker.core.log.disk" in lines
    assert "kafkalite.broker.core.log.memory" not in lines
    assert "kafkalite.protocol.legacy_records" not in lines
