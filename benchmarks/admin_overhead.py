"""What the admin endpoint costs the broker on the produce path, over real sockets: prints numbers only.

    python benchmarks/admin_overhead.py [--rounds N] [--block N] [--before PATH]

Starts ``kafkalite serve --memory`` subprocesses side by side: without the admin endpoint ("off"),
with it ("on": ``admin.listener=127.0.0.1:0``, every request counted, timed and logged), and, given
``--before`` (a checkout of the code before the endpoint existed, e.g. made with ``git worktree
add``), that code ("before"). A confluent-kafka producer per broker sends Produce requests of one
100-byte record each, one at a time (acks=1, a flush per record), after a warm-up; round after
round, each broker gets ``--block`` requests in turn, so the machine's other work weighs on all
alike. What is measured is the broker's own CPU time per request, read from
``/proc/<pid>/task/*/schedstat`` (nanoseconds on CPU, all its threads): the client's time and other
processes do not count, the kernel's socket work for the broker does. Each configuration's median
over the rounds is printed, with the difference to "off"; "off #2", a second broker like "off",
shows how far two identical brokers differ (Linux only).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

REPO = Path(__file__).resolve().parents[1]
_LISTENING = re.compile(r"listening on \w+://[^:\s]+:(\d+)")


def cpu_ns(pid: int) -> int:
    """Nanoseconds the process's threads have spent on a CPU."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def start(tree: Path, admin: bool, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    command = [sys.executable, "-m", "kafkalite", "serve", "--memory", "--listeners", "PLAINTEXT://127.0.0.1:0",
               "num.partitions=1"] + (["admin.listener=127.0.0.1:0"] if admin else [])
    environment = {name: value for name, value in os.environ.items() if not name.startswith("KAFKALITE_")}
    environment["PYTHONPATH"] = str(tree)
    environment["PYTHONHASHSEED"] = "0"  # the same dict layouts in every broker
    with open(log, "wb") as output:
        process = subprocess.Popen(command, cwd=tree, env=environment, stdout=output, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        match = _LISTENING.search(text)
        if match and (not admin or "admin endpoint on" in text):  # (the endpoint answers after the listeners)
            return process, int(match.group(1))
        if process.poll() is not None:
            raise SystemExit(f"the broker exited: {log.read_text(errors='replace')}")
        time.sleep(0.02)
    process.kill()
    raise SystemExit("the broker did not start in 30 s")


def measure(configurations: list[tuple[str, Path, bool]], rounds: int, block: int, warmup: int
            ) -> dict[str, list[float]]:
    """Each configuration's broker CPU seconds per request, one sample per round. The brokers run at
    the same time and take turns: each round sends ``block`` requests to each in turn, so what the
    rest of the machine does meanwhile weighs on all of them alike."""
    with tempfile.TemporaryDirectory() as scratch:
        brokers = []
        try:
            for name, tree, admin in configurations:
                process, port = start(tree, admin, Path(scratch) / f"{name}.log")
                producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0, "acks": 1,
                                     "enable.idempotence": False})
                brokers.append((name, process, producer))
            value = bytes(100)

            def send(producer: Producer, count: int) -> None:
                for _ in range(count):
                    producer.produce("bench", value)
                    producer.flush(10)

            for _, _, producer in brokers:
                send(producer, warmup)
            samples: dict[str, list[float]] = {name: [] for name, _, _ in brokers}
            for round_ in range(rounds):
                for name, process, producer in brokers:
                    before = cpu_ns(process.pid)
                    send(producer, block)
                    samples[name].append((cpu_ns(process.pid) - before) / 1e9 / block)
                print(f"round {round_ + 1}: " + ", ".join(f"{name} {values[-1] * 1e6:.1f} µs"
                                                          for name, values in samples.items()), flush=True)
            return samples
        finally:
            for _, process, producer in brokers:
                producer.flush(10)
                process.terminate()
                process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--block", type=int, default=1000, help="requests per broker per round")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--before", type=Path, help="a checkout of the code before the admin endpoint")
    args = parser.parse_args()
    configurations = [("off", REPO, False), ("on", REPO, True), ("off #2", REPO, False)]
    if args.before is not None:
        configurations.insert(0, ("before", args.before.resolve(), False))
    samples = measure(configurations, args.rounds, args.block, args.warmup)
    off = statistics.median(samples["off"])
    print(f"\nbroker CPU per Produce request (1 record of 100 B, acks=1), median of {args.rounds} rounds "
          f"of {args.block}:")
    for name, values in samples.items():
        median = statistics.median(values)
        paired = statistics.median(value / reference - 1 for value, reference in zip(values, samples["off"],
                                                                                      strict=True))
        print(f"  {name:<7} {median * 1e6:7.1f} µs   {(median / off - 1) * 100:+5.1f}% vs off "
              f"(median of the rounds' ratios {paired * 100:+5.1f}%)")


if __name__ == "__main__":
    main()
