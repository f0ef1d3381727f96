"""The tables ``benchmarks/compare.py`` prints: ratios of the medians, and the cores each op kept busy."""

from __future__ import annotations

from typing import Any

import benchmarks.compare as compare

TEST = {"id": "confluent 1000x100B acks=1 none", "records": 1000}


def run(side: str, rate: float, server: float | None, client: float, machine: float, ok: bool = True) -> dict[str, Any]:
    return {"test": TEST["id"], "op": "produce", "side": side, "ok": ok, "rate": rate, "mbs": rate * 1e-4,
            "cpu": None if server is None else server * 2, "rss": 30.0, "records": 1000 if ok else 10,
            "cores": {"server": server, "client": client, "machine": machine, "steal": 0.01}}


def test_cores_table_gives_medians_of_complete_runs_side_by_side() -> None:
    results = [run("mock", 900, 0.05, 1.0, 1.2), run("mock", 1000, 0.07, 1.1, 1.3), run("mock", 950, 0.06, 1.2, 1.4),
               run("kafkalite", 1000, 0.10, 0.9, 1.1), run("kafkalite", 1100, 0.30, 1.0, 1.5),
               run("kafkalite", 10, 1.9, 0.1, 2.0, ok=False)]
    lines = compare.cores_table([TEST], results)
    row = next(line for line in lines if line.startswith(TEST["id"]))
    assert row.split()[-4:] == ["1.10/0.95", "0.06/0.20", "1.30/1.30", "0.01/0.01"]
    assert lines[-1].startswith("kafkalite's process: 0.20-0.20 of a core")


def test_the_main_table_ends_with_the_cores_table() -> None:
    results = [run("mock", 1000, 0.05, 1.0, 1.2), run("kafkalite", 1200, 0.10, 0.9, 1.1)]
    lines = compare.table([TEST], results)
    assert any(line.startswith("geomean kafkalite/mock produce: 1.20") for line in lines)
    assert any(line.startswith("cores busy while the client ran") for line in lines)


def test_a_server_without_cpu_figures_leaves_its_cell_empty() -> None:
    lines = compare.cores_table([TEST], [run("mock", 1000, None, 1.0, 1.2), run("kafkalite", 1000, 0.2, 1.0, 1.2)])
    row = next(line for line in lines if line.startswith(TEST["id"]))
    assert "-/0.20" in row
