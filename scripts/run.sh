#!/usr/bin/env bash
# The main job: installs what is missing, configures, builds and runs the kiln command line on the
# demo pipeline. Arguments are passed to `kiln`; without arguments it runs `kiln demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${KILN_JOBS:-2}" --target kiln-cli
if [ $# -eq 0 ]; then set -- demo; fi
exec build/tools/kiln "$@"
