#!/usr/bin/env bash
# Peer autoschedulers on float32 matmul: TVM MetaSchedule and Halide's Adams2019, tuned, checked
# and timed on this machine (bench/autoschedulers.py), to set kiln's tuner beside them.
#
#   bash scripts/bench-autoschedulers.sh                          # 1024^3, MetaSchedule 64 and 300 trials
#   bash scripts/bench-autoschedulers.sh --shape 256x256x256 --trials 8    # a smoke run (under a minute)
#   bash scripts/bench-autoschedulers.sh --only halide --threads 1
#   options: --shape MxNxK, --threads T (default 2), --trials 64,300, --only tvm|halide,
#            --json FILE (appends one JSON line per result), --min-time S (default 1)
#
# Makes (once) a Python virtual environment in build-bench/peers-venv with apache-tvm, halide,
# numpy and what MetaSchedule needs, sets TVM_NUM_THREADS and HL_NUM_THREADS from --threads and
# runs the script with the arguments given. Each tuning run leaves its log, database and best
# schedule in build-bench/peers/. Not part of the tests or CI.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2
prev=""
for a in "$@"; do
    case "$a" in
        -h | --help)
            sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        --threads=*) threads="${a#--threads=}" ;;
    esac
    if [ "$prev" = "--threads" ]; then threads="$a"; fi
    prev="$a"
done

# apache-tvm 0.27.0.post1 segfaults in tvm::ffi::ToJSONGraph (every save_json of a TIR
# expression, so MetaSchedule's database) with apache-tvm-ffi 0.1.15, which pip picks by default:
# the FFI is pinned to the 0.1.14 it works with. xgboost (MetaSchedule's default cost model),
# psutil and cloudpickle are imported by MetaSchedule but not declared by the wheel.
requirements=(apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 halide==21.0.0 numpy
    xgboost-cpu psutil cloudpickle)
venv=build-bench/peers-venv
stamp="$venv/kiln-requirements.txt"
if [ ! -x "$venv/bin/python" ]; then
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        if [ "$(id -u)" = 0 ]; then
            apt-get install -y -qq python3-venv >/dev/null
        else
            echo "bench-autoschedulers.sh: python3 cannot make a virtual environment; install python3-venv" >&2
            exit 1
        fi
    fi
    mkdir -p build-bench
    python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "${requirements[*]}" ]; then
    "$venv/bin/pip" install --disable-pip-version-check -q "${requirements[@]}"
    echo "${requirements[*]}" >"$stamp"
fi

export TVM_NUM_THREADS="$threads" HL_NUM_THREADS="$threads"
exec "$venv/bin/python" bench/autoschedulers.py "$@"
