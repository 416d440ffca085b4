#!/usr/bin/env bash
# The test command: installs what is missing, checks the module table, the formatting and
# clang-tidy, then configures, builds (warnings are errors: KILN_WERROR) and runs the whole suite,
# first in the release configuration, then under AddressSanitizer + UndefinedBehaviorSanitizer.
#   bash scripts/test.sh            # both configurations
#   bash scripts/test.sh --fast     # release configuration only
#   bash scripts/test.sh --long     # long fuzz runs: a million cases, at most 300 s per fuzz test
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
long=0
for arg in "$@"; do
    case "$arg" in
    --fast) fast=1 ;;
    --long) long=1 ;;
    *) echo "usage: $0 [--fast] [--long]" >&2; exit 2 ;;
    esac
done

bash scripts/install-deps.sh
jobs="${KILN_JOBS:-2}"
# --long: a million cases per fuzzer, but no fuzz test starts a case after KILN_FUZZ_SECONDS
# (tests/lang/FuzzBudget.h), so each one ends well inside its 900 s CTest timeout
# (tests/CMakeLists.txt) whatever a case costs: a schedule fuzzer case is a JIT compile, and the
# sanitizer build runs several times slower than the release one.
if [ "$long" = 1 ]; then
    export KILN_FUZZ_ITERATIONS="${KILN_FUZZ_ITERATIONS:-1000000}"
    export KILN_FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-300}"
fi

# run_suite DIR [CTEST_ARGS...] -- [CMAKE_ARGS...]
run_suite() {
    local dir="$1"; shift
    local ctest_args=()
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do ctest_args+=("$1"); shift; done
    [ "$#" -gt 0 ] && shift
    cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
    cmake --build "$dir" -j"$jobs"
    (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 1800 "${ctest_args[@]}")
}

echo "== module table (includes and links against docs/ARCHITECTURE.md)"
python3 scripts/check-includes.py
echo "== clang-format"
# Every tracked C/C++ file, formatted by the project's .clang-format (no third-party code here).
git ls-files -z '*.h' '*.hpp' '*.c' '*.cc' '*.cpp' | xargs -0 clang-format --dry-run --Werror
echo "== clang-tidy (library folders, tools/ and driver/: scripts/clang-tidy.sh)"
# Needs only the configured release build's compile_commands.json, not a build.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON >/dev/null
bash scripts/clang-tidy.sh build

echo "== release build and tests"
run_suite build -- -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON
if [ "$fast" = 0 ]; then
    echo "== sanitizer build (ASan + UBSan) and tests"
    # The release run above covers the fuzzers' full default counts; under the sanitizers they
    # run fewer cases (memory errors, not coverage, are what this pass is for), unless
    # KILN_FUZZ_ITERATIONS is set (--long). intercept_tls_get_addr=0: GCC 12's sanitizer runtime
    # takes a dynamic TLS block that malloc happens to place at a certain page offset for the
    # header glibc dropped in 2.25 and reads garbage through it; LeakSanitizer's tracer then
    # crashes at exit ("Tracer caught signal 11") after every test passed. It hits PoCL's threads
    # (dynamic TLS of a dlopen'ed library) and, for a given binary, every run (a rerun does not
    # help). A test that fails is rerun once (ctest prints both runs), as the release run above
    # does not.
    # KILN_FUZZ_SECONDS: a fuzzer whose case is a whole pipeline (the automatic space's corpus,
    # several JIT compiles per case) stops starting cases after 240 s, well inside CTest's 900.
    KILN_FUZZ_ITERATIONS="${KILN_FUZZ_ITERATIONS:-150}" KILN_FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-240}" \
    ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 \
        run_suite build-sanitize --repeat until-pass:2 -- -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON \
            -DKILN_WERROR=ON
fi
