#!/usr/bin/env bash
# Side-by-side throughput benchmark: kafkalite against librdkafka's mock broker, with the same
# clients in the same run, using the shared benchmark kit in ../shared/bench (see its README).
#
#   benchmarks/compare.sh --quick                     # smoke test (1 rep, 10x fewer messages), ~1 min
#   benchmarks/compare.sh                             # the real comparison (5 reps, all tests)
#   benchmarks/compare.sh --only confluent --match '1000000x100B acks=1 none'
#   benchmarks/compare.sh --port 19092 --broker-config log.flush.on.ack=true --quick
#
# It starts kafkalite on 127.0.0.1 (a free port unless --port is given) with a scratch data
# directory, runs the kit's compare.py against it (--broker, --broker-pid, --label kafkalite),
# then stops the broker by its PID (SIGTERM) and deletes the scratch directory.
#
# Options of this script (everything else goes to compare.py; `compare.py --help` lists those):
#   --port N                 listen on N instead of a free port
#   --broker-config KEY=VAL  a broker config override (repeatable), e.g. log.flush.on.ack=true
#   --keep-data              keep the scratch data directory and the broker log
# Environment:
#   BENCH_KIT  the kit's directory (default: ../shared/bench next to this repository)
#   PYTHON     the interpreter that runs the broker (default: .venv/bin/python, else python3)
#
# Setup, once: `bash ../shared/bench/build.sh` from the repository root (needs gcc, make, npm and
# librdkafka-dev; run as root it installs what is missing with apt-get). The kit's results land in
# $BENCH_HOME/results (default ~/.cache/kafkalite-bench/results).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
KIT="${BENCH_KIT:-$REPO/../shared/bench}"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$REPO/.venv/bin/python" ]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python3; fi
fi

port=0
keep=0
broker_config=()
forward=()
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --port=*) port="${1#*=}"; shift ;;
    --broker-config) broker_config+=("$2"); shift 2 ;;
    --broker-config=*) broker_config+=("${1#*=}"); shift ;;
    --keep-data) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) forward+=("$1"); shift ;;
  esac
done

[ -f "$KIT/compare.py" ] || { echo "compare.sh: no benchmark kit at $KIT (set BENCH_KIT)" >&2; exit 2; }
bench_home="${BENCH_HOME:-$HOME/.cache/kafkalite-bench}"
[ -x "$bench_home/bin/mock_broker" ] || {
  echo "compare.sh: the kit is not built yet; run: bash $KIT/build.sh" >&2; exit 2; }

scratch="$(mktemp -d -t kafkalite-bench.XXXXXX)"
log="$scratch/broker.log"
pid=""

stop_broker() {
  local status=$?
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "compare.sh: broker pid $pid ignored SIGTERM for 30 s; killing it" >&2
      kill -KILL "$pid"
    fi
    wait "$pid" 2>/dev/null || true
  fi
  if [ "$keep" = 1 ]; then
    echo "compare.sh: kept the data directory and broker log in $scratch"
  else
    rm -rf "$scratch"
  fi
  exit "$status"
}
trap stop_broker EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cd "$REPO"
"$PYTHON" -m kafkalite serve --port "$port" --data-dir "$scratch/data" \
    --listeners "PLAINTEXT://127.0.0.1:$port" ${broker_config[@]+"${broker_config[@]}"} >"$log" 2>&1 &
pid=$!

bound=""
for _ in $(seq 300); do  # up to 30 s
  bound="$(sed -n 's/.*listening on PLAINTEXT:\/\/127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)"
  [ -n "$bound" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "compare.sh: the broker exited before listening:" >&2; cat "$log" >&2; pid=""; exit 1
  fi
  sleep 0.1
done
[ -n "$bound" ] || { echo "compare.sh: the broker did not start listening in 30 s:" >&2; cat "$log" >&2; exit 1; }
echo "compare.sh: kafkalite pid $pid listening on 127.0.0.1:$bound, data in $scratch/data"

status=0
python3 "$KIT/compare.py" --broker "127.0.0.1:$bound" --broker-pid "$pid" --label kafkalite \
    ${forward[@]+"${forward[@]}"} || status=$?
if ! kill -0 "$pid" 2>/dev/null; then
  echo "compare.sh: the broker died during the run; its log ends with:" >&2
  tail -n 30 "$log" >&2
  pid=""
  [ "$status" = 0 ] && status=1
fi
exit "$status"
