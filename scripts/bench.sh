#!/usr/bin/env bash
# The benchmark command: kiln's hand-scheduled operators side by side with OpenBLAS, oneDNN,
# Halide 14 and plain C++ loops on the same workloads, every result checked before it is timed.
#
#   bash scripts/bench.sh                 # the full set (takes a while; the machine must be quiet)
#   bash scripts/bench.sh --quick         # small shapes, one round: a smoke run in about a minute
#   bash scripts/bench.sh --only matmul   # one workload (matmul, matmul_u8s8, matmul_bf16,
#                                         # conv2d, blur, blur_u16, softmax, layernorm)
#   bash scripts/bench.sh --gpu-pocl      # GPU schedules on OpenCL (PoCL, this CPU) beside the
#                                         # CPU schedules: a sanity figure, not a GPU measurement
#   bash scripts/bench.sh --gpu           # CUDA schedules beside cuBLAS, cuDNN and the copy
#                                         # bandwidth on an NVIDIA GPU (bench/gpu_cuda.cpp)
#   extra options go to the driver: --rounds N, --threads 1,2, --reps R, --impls kiln,openblas,
#   --tuned-db FILE (a kiln_tuned column: the best schedules `kiln tune ... --db FILE` recorded)
#
# Installs what is missing, builds a Release tree in build-bench/ with -DKILN_BUILD_BENCH=ON, runs
# the implementations interleaved (bench/bench_driver.cpp) and prints a Markdown table, also
# written to build-bench/bench.md (raw measurements: build-bench/bench.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."

for a in "$@"; do
    case "$a" in
        -h | --help)
            sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
    esac
done

bash scripts/install-deps.sh
jobs="${KILN_JOBS:-2}"
gpu_pocl=0
gpu_cuda=0
if [ "${1:-}" = "--gpu-pocl" ]; then
    gpu_pocl=1
    shift
elif [ "${1:-}" = "--gpu" ]; then
    gpu_cuda=1
    shift
fi
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
    -DKILN_BUILD_TESTS=OFF "${launcher[@]}" >build-bench.cmake.log 2>&1 || {
    cat build-bench.cmake.log
    exit 1
}
rm -f build-bench.cmake.log
if [ "$gpu_pocl" = 1 ]; then
    cmake --build build-bench -j"$jobs" --target kiln_bench_gpu_pocl
    POCL_CACHE_DIR="$(mktemp -d)" exec build-bench/bench/kiln_bench_gpu_pocl "$@"
fi
if [ "$gpu_cuda" = 1 ]; then
    cmake --build build-bench -j"$jobs" --target kiln_bench_gpu_cuda
    exec build-bench/bench/kiln_bench_gpu_cuda "$@"
fi
cmake --build build-bench -j"$jobs" --target bench_openblas bench_onednn bench_onednn_nchw bench_halide bench_loops bench_driver

# The kiln side: built when bench/kiln_bench.cpp exists; if it does not build, the table shows
# kiln as missing rather than losing the reference columns.
rm -f build-bench/bench/kiln_bench.stale
if [ -f bench/kiln_bench.cpp ]; then
    if ! cmake --build build-bench -j"$jobs" --target kiln_bench; then
        echo "bench.sh: kiln_bench failed to build; the table shows kiln as missing" >&2
        if [ -f build-bench/bench/kiln_bench ]; then mv build-bench/bench/kiln_bench build-bench/bench/kiln_bench.stale; fi
    fi
else
    echo "bench.sh: bench/kiln_bench.cpp does not exist yet; the table shows kiln as missing" >&2
    rm -f build-bench/bench/kiln_bench
fi

# Some machines set these to force OpenBLAS onto its (half-speed here) AVX2 Haswell kernels; the
# benchmark lets OpenBLAS pick the kernel for this CPU (unless it falls back: below), and reports
# which one it runs.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

bin=build-bench/bench
md=build-bench/bench.md
openblas_kernel="$("$bin/bench_openblas" --info | sed -n 's/^corename: //p')"
openblas_how="OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, chosen by OpenBLAS"
# An OpenBLAS that does not know this CPU model falls back to a generic kernel (Prescott: SSE3,
# a fraction of the machine's speed), which would make its column a strawman. Then the benchmark
# forces the best kernel the library has for the CPU's instruction set, read from /proc/cpuinfo's
# flags (best first), keeps the first one OpenBLAS accepts, and says so in the table's header.
case "$(printf '%s' "$openblas_kernel" | tr '[:upper:]' '[:lower:]')" in
    haswell | skylakex | cooperlake | sapphirerapids | zen | "") ;;
    *)
        flags=" $(grep -m1 '^flags' /proc/cpuinfo | sed 's/.*: //') "
        candidates=""
        case "$flags" in *" avx512_bf16 "*) candidates="$candidates COOPERLAKE" ;; esac
        case "$flags" in *" avx512f "*" avx512vl "* | *" avx512vl "*" avx512f "*) candidates="$candidates SKYLAKEX" ;; esac
        case "$flags" in *" avx2 "*) candidates="$candidates HASWELL" ;; esac
        fallback="$openblas_kernel"
        for c in $candidates; do
            got="$(OPENBLAS_CORETYPE=$c "$bin/bench_openblas" --info | sed -n 's/^corename: //p')"
            if [ "$(printf '%s' "$got" | tr '[:upper:]' '[:lower:]')" = "$(printf '%s' "$c" | tr '[:upper:]' '[:lower:]')" ]; then
                export OPENBLAS_CORETYPE=$c
                openblas_kernel="$got"
                openblas_how="forced with OPENBLAS_CORETYPE=$c: unset, OpenBLAS did not recognise this CPU and ran its generic $fallback kernel; $c is the best kernel it has for this CPU's instruction set"
                break
            fi
        done
        ;;
esac
{
    echo "# kiln benchmarks"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores visible; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- OpenBLAS: $("$bin/bench_openblas" --info | sed -n 's/^config: //p'); kernel in use: **${openblas_kernel}** (${openblas_how})"
    echo "- oneDNN: $("$bin/bench_onednn" --info)"
    echo "- Halide: $("$bin/bench_halide" --info)"
    echo "- loops: $("$bin/bench_loops" --info)"
    if [ -x "$bin/kiln_bench" ]; then echo "- kiln: $bin/kiln_bench"; else echo "- kiln: kiln_bench missing (not built)"; fi
    echo
} >"$md"
cat "$md"
echo "OpenBLAS kernel: $openblas_kernel ($openblas_how)"
echo

status=0
"$bin/bench_driver" --bin-dir "$bin" --out "$md" --jsonl build-bench/bench.jsonl "$@" || status=$?
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$md"
echo "table written to $md"
if [ "$status" -ne 0 ]; then echo "bench.sh: some result was wrong or some run failed (see the notes under the table)" >&2; fi
exit "$status"
