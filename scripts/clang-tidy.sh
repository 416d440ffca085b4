#!/usr/bin/env bash
# Runs clang-tidy with the project's .clang-tidy and fails on any finding.
#   bash scripts/clang-tidy.sh BUILD_DIR            # every library source (what CI runs)
#   bash scripts/clang-tidy.sh BUILD_DIR FILE...    # only these files
# BUILD_DIR is a configured build (CMakeLists.txt turns CMAKE_EXPORT_COMPILE_COMMANDS on); nothing
# needs to be built first, kiln generates no sources.
#
# Scope: the library folders (lang schedule codegen runtime autotune tuning_db apps), whose headers
# are the ones .clang-tidy's HeaderFilterRegex names, and the sources of the executables and the
# driver (tools/*.cpp, driver/*.cpp: 16 files, about 2.5 CPU minutes more); not tests/ or
# examples/. Measured with clang-tidy 14: the library folders (about 100 files) take about 12.5
# CPU minutes, about 6 minutes on CI's 2 cores; the whole tree (the GoogleTest files the
# heaviest) would take twice that. KILN_TIDY_BASE=REV checks only the library sources changed since REV (a quick local
# run before a commit).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [FILE...]" >&2
    exit 2
fi
build="$1"
shift
if [ ! -f "$build/compile_commands.json" ]; then
    echo "clang-tidy: $build/compile_commands.json is missing; configure $build first" >&2
    exit 2
fi
tidy="${CLANG_TIDY:-clang-tidy}"
jobs="${KILN_JOBS:-2}"

library=('lang/*.cpp' 'schedule/*.cpp' 'codegen/*.cpp' 'runtime/*.cpp' 'runtime/*.c' 'autotune/*.cpp'
    'tuning_db/*.cpp' 'apps/*.cpp' 'tools/*.cpp' 'driver/*.cpp')
files=("$@")
if [ "${#files[@]}" -eq 0 ] && [ -n "${KILN_TIDY_BASE:-}" ]; then
    mapfile -t files < <(git diff --name-only --diff-filter=d "$KILN_TIDY_BASE" -- "${library[@]}")
    if [ "${#files[@]}" -eq 0 ]; then
        echo "clang-tidy: no library source changed since $KILN_TIDY_BASE"
        exit 0
    fi
elif [ "${#files[@]}" -eq 0 ]; then
    mapfile -t files < <(git ls-files "${library[@]}")
fi

# --warnings-as-errors makes a finding fail its file; -Wno-error keeps the build's own -Werror
# (KILN_WERROR) from turning clang's compiler warnings, which .clang-tidy does not enable, into
# errors. xargs exits non-zero when any file failed.
start=$SECONDS
printf '%s\0' "${files[@]}" |
    xargs -0 -n 1 -P "$jobs" "$tidy" -p "$build" --quiet --warnings-as-errors='*' \
        --extra-arg=-Wno-error || {
    echo "clang-tidy: findings above (fix them, or NOLINT(check) with a reason)" >&2
    exit 1
}
echo "clang-tidy: ${#files[@]} files clean in $((SECONDS - start)) s"
