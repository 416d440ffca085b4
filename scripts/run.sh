#!/usr/bin/env bash
# The main job: installs what is missing, builds the kiln command line (Release), tunes matmul
# for a few minutes into tuning_db/kiln.db and emits the best kernel as object + static library +
# header under out/kernels/matmul. The tuning resumes where an earlier run stopped (Ctrl-C is
# safe), and never measures a schedule twice.
#
#   scripts/run.sh                      # tune matmul 1024^3 for KILN_TUNE_TIME (default 3m)
#   KILN_TUNE_TIME=8h scripts/run.sh    # an overnight run
#   scripts/run.sh db report -o report.html   # any other arguments are passed to `kiln`
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF >/dev/null
cmake --build build-release -j"${KILN_JOBS:-2}" --target kiln-cli kiln-worker
if [ $# -gt 0 ]; then exec build-release/tools/kiln "$@"; fi

op=${KILN_TUNE_OP:-matmul}
shape=${KILN_TUNE_SHAPE:-1024x1024x1024}
db=tuning_db/kiln.db
build-release/tools/kiln tune "$op" --shape "$shape" --time "${KILN_TUNE_TIME:-3m}" \
    --strategy "${KILN_TUNE_STRATEGY:-bandit}" --db "$db" --jobs 2
build-release/tools/kiln compile "$op" --shape "$shape" --db "$db" -o "out/kernels/$op"
