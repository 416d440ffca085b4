#!/usr/bin/env bash
# The GPU check: kiln's CUDA path run for real on an NVIDIA GPU, in one prepared script that
# finishes within 6 minutes of GPU time. It runs the tests that need a GPU (each skips with its
# reason elsewhere), the GPU schedule fuzzer and its reproducers on the CUDA device
# (KILN_FUZZ_GPU=cuda), the CUDA pipeline cases under compute-sanitizer's memcheck, an
# ahead-of-time CUDA kernel linked into a plain C program, short tuning jobs with --target
# host-cuda (template and generated space), the CUDA benchmark against cuBLAS, cuDNN and the
# copy bandwidth (bench/gpu_cuda.cpp), and an Nsight Compute profile of kiln's matmul kernel
# where ncu is installed. The report goes to stdout and to $KILN_GPU_REPORT (default
# gpu-check.md), the full logs beside it.
#
#   bash scripts/gpu-check.sh                 # build (Release, build-gpu/) and run: a machine
#                                             # that builds kiln and has a GPU
#   bash scripts/gpu-check.sh --pack [DIR]    # build here and pack what runs there into
#                                             # .gpu-check/ (binaries, the libraries the GPU
#                                             # machine may lack, the AOT C program): for a GPU
#                                             # machine that cannot build kiln
#   bash scripts/gpu-check.sh --run           # on the GPU machine: run the pack, build nothing
#
# KILN_GPU_BUILD_DIR overrides the build folder (default build-gpu); KILN_GPU_FUZZ_JOBS (8) and
# KILN_GPU_FUZZ_SECONDS (90) size the fuzzer run (0 jobs: none), KILN_GPU_TUNE_SPACES ("template
# auto") names the tuning jobs, KILN_GPU_BENCH_ARGS adds arguments to the benchmark (e.g.
# --knobs matmul:tile_j=128,tile_i=128: a column per template point), and KILN_GPU_PROFILE=0
# skips the Nsight Compute profile of the matmul kernel.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=all
case "${1:-}" in
    --pack) mode=pack ;;
    --run) mode=run ;;
    "") ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--pack | --run]" >&2; exit 2 ;;
esac
build="${KILN_GPU_BUILD_DIR:-build-gpu}"
pack=.gpu-check
report="${KILN_GPU_REPORT:-gpu-check.md}"
jobs="${KILN_JOBS:-2}"

build_all() {
    bash scripts/install-deps.sh
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON >/dev/null
    cmake --build "$build" -j"$jobs" --target kiln_runtime_tests kiln_pipeline_tests \
        kiln_apps_tests kiln kiln-worker kiln_operator_gen kiln_bench_gpu_cuda
}

# The AOT check: a CUDA kernel compiled ahead of time (PTX and cubins for sm_80 and sm_90) and
# linked into a C program with libkiln_runtime.a and -ldl alone.
build_aot_program() {
    local out="$1"
    mkdir -p "$out"
    "$build/tools/kiln_operator_gen" -o "$out" -f aot_softmax -t host-cuda op=softmax \
        shape=512x1000 -e static_library,c_header,cuda_source
    cat >"$out/main.c" <<'EOF'
/* Runs the ahead-of-time CUDA softmax on rows of 1000 values and checks each row sums to 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aot_softmax.h"
int main(void) {
    enum { N = 1000, M = 512 };
    float *in = malloc(sizeof(float) * N * M), *out = malloc(sizeof(float) * N * M);
    kiln_dimension_t d_in[2] = {{0, N, 1, 0}, {0, M, N, 0}}, d_out[2] = {{0, N, 1, 0}, {0, M, N, 0}};
    kiln_buffer_t b_in, b_out;
    int i, y, code, bad = 0;
    memset(&b_in, 0, sizeof(b_in));
    memset(&b_out, 0, sizeof(b_out));
    for (i = 0; i < N * M; i++) in[i] = (float)((i * 37) % 101) / 25.0f;
    b_in.host = (uint8_t *)in; b_out.host = (uint8_t *)out;
    b_in.type.code = b_out.type.code = kiln_type_float;
    b_in.type.bits = b_out.type.bits = 32;
    b_in.type.lanes = b_out.type.lanes = 1;
    b_in.dimensions = b_out.dimensions = 2;
    b_in.dim = d_in; b_out.dim = d_out;
    code = aot_softmax(&b_in, &b_out);
    if (code == 0) code = kiln_buffer_copy_to_host(&b_out);
    if (code != 0) {
        printf("aot: %s: %s\n", kiln_error_code_name(code), kiln_last_error_message());
        return 1;
    }
    for (y = 0; y < M; y++) {
        double s = 0;
        for (i = 0; i < N; i++) s += out[y * N + i];
        bad += fabs(s - 1.0) > 1e-3;
    }
    printf("aot: softmax of %d rows on the GPU, %d rows off\n", M, bad);
    kiln_buffer_device_free(&b_in);
    kiln_buffer_device_free(&b_out);
    free(in);
    free(out);
    return bad != 0;
}
EOF
    cc -std=c99 -O2 -I"$out" -Iruntime "$out/main.c" "$out/aot_softmax.a" \
        "$build/runtime/libkiln_runtime.a" -fopenmp -lm -ldl -o "$out/aot_main"
    if nm -u "$out/aot_main" | grep -qiE ' (cu|cuda)[A-Z_]'; then
        echo "gpu-check: the AOT program links a CUDA library symbol" >&2
        exit 1
    fi
}

# Copies the binaries and every shared library they need that is not part of the C/C++ runtime
# or of the CUDA installation on the GPU machine.
make_pack() {
    rm -rf "$pack"
    mkdir -p "$pack/bin" "$pack/lib"
    local bins=("$build/tests/kiln_runtime_tests" "$build/tests/kiln_pipeline_tests"
        "$build/tests/kiln_apps_tests" "$build/tools/kiln" "$build/tools/kiln-worker"
        "$build/bench/kiln_bench_gpu_cuda")
    for b in "${bins[@]}"; do
        strip -o "$pack/bin/$(basename "$b")" "$b"
    done
    build_aot_program "$pack/aot"
    for b in "${bins[@]}"; do
        ldd "$b" | awk '$3 ~ /^\// {print $3}'
    done | sort -u | while read -r lib; do
        case "$(basename "$lib")" in
            libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libgcc_s.so* | \
                libstdc++.so* | libcuda.so* | libcudart.so* | libcublas* | libcudnn* | libnvrtc*) ;;
            *) cp -L "$lib" "$pack/lib/" ;;
        esac
    done
    # Build paths compiled into the tests (KILN_TEST_* definitions) do not exist there; only the
    # tests below, which need none, are run from a pack.
    cp scripts/gpu-check.sh "$pack/"
    git rev-parse --short HEAD >"$pack/commit" 2>/dev/null || echo unknown >"$pack/commit"
    tar -C "$pack" -cf - bin lib aot gpu-check.sh commit | xz -T"$jobs" -6 >"$pack.tar.xz"
    rm -rf "$pack"
    mkdir -p "$pack"
    mv "$pack.tar.xz" "$pack/pack.tar.xz"
    grep -qxF "/$pack/" .git/info/exclude 2>/dev/null || echo "/$pack/" >>.git/info/exclude
    echo "gpu-check: packed $(du -h "$pack/pack.tar.xz" | cut -f1) into $pack/pack.tar.xz;" \
        "on the GPU machine: bash scripts/gpu-check.sh --run"
}

# Where the GPU machine keeps the CUDA libraries the benchmark links (cudart, cuBLAS, cuDNN):
# the toolkit's lib folder, else the NVIDIA Python wheels.
cuda_library_path() {
    local dirs=() d
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
        [ -d "$d" ] && dirs+=("$d")
    done
    # The driver (libcuda.so.1) where the loader's cache does not list it, e.g. a mounted folder.
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
        for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
            [ -e "$d/libcuda.so.1" ] && dirs+=("$d")
        done
    fi
    while read -r d; do dirs+=("$(dirname "$d")"); done < <(
        find / -xdev \( -name 'libcudnn.so.9' -o -name 'libcublas.so.13' -o -name 'libcudart.so.13' \
            -o -name 'libnvrtc.so.13' \) 2>/dev/null | head -20)
    local IFS=:
    echo "${dirs[*]}"
}

run_checks() {
    local bin="$1" aot="$2"
    local status=0
    # Full logs go beside the report; the report keeps their tails and the summaries.
    local logs
    logs="$(dirname "$report")"
    mkdir -p "$logs"
    export KILN_CACHE_DIR
    KILN_CACHE_DIR="$(mktemp -d)"
    local t0=$SECONDS f
    {
        echo "# kiln GPU check"
        echo
        echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit ${commit:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
        echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not available')"
        echo "- host: $(nproc) cores; ptxas: $(command -v ptxas || ls /usr/local/cuda/bin/ptxas 2>/dev/null || echo none)"
        echo "- LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
        echo
    } | tee "$report"

    # The schedule fuzzer on the CUDA device, in the background while the tests run: random GPU
    # schedules of the fuzzer's corpus compared bit for bit with the reference evaluator, from
    # seeds CI never runs, one process per seed range.
    local fuzz_jobs="${KILN_GPU_FUZZ_JOBS:-8}" fuzz_seconds="${KILN_GPU_FUZZ_SECONDS:-90}"
    local fuzz_dir
    fuzz_dir="$(mktemp -d)"
    for ((f = 1; f <= fuzz_jobs; f++)); do
        KILN_FUZZ_GPU=cuda KILN_FUZZ_SEED=$((f * 100000 + 1)) KILN_FUZZ_ITERATIONS=2000 \
            KILN_FUZZ_SECONDS="$fuzz_seconds" timeout $((fuzz_seconds + 60)) \
            "$bin/kiln_pipeline_tests" --gtest_filter='GPUScheduleFuzz.Random*' \
            >"$fuzz_dir/$f.log" 2>&1 &
    done

    run_step() {
        local name="$1"
        shift
        echo "\$ $*" | tee -a "$report" "$logs/$name.log" >/dev/null
        local s=$SECONDS
        if ! timeout 240 "$@" >"$logs/$name.step" 2>&1; then status=1; fi
        cat "$logs/$name.step" >>"$logs/$name.log"
        tail -n 25 "$logs/$name.step" | tee -a "$report"
        echo "($((SECONDS - s)) s)" | tee -a "$report"
        rm -f "$logs/$name.step"
    }
    echo '## Tests' | tee -a "$report"
    echo '```' | tee -a "$report"
    # (The fake-driver cases need the build tree's fake library; they ran in CI.)
    run_step tests "$bin/kiln_runtime_tests" --gtest_filter='*CUDA*:*Cuda*-CUDAFake.*' --gtest_brief=1
    run_step tests "$bin/kiln_pipeline_tests" --gtest_filter='*/CUDA:*CUDA*' --gtest_brief=1
    run_step tests "$bin/kiln_apps_tests" --gtest_filter='*GPU*:*Gpu*' --gtest_brief=1
    # The fuzzer's kiln-level reproducers on CUDA, the ones PoCL fails (DISABLED_ there) too;
    # the two that are OpenCL source run through the OpenCL interface and stay out.
    KILN_FUZZ_GPU=cuda run_step tests "$bin/kiln_pipeline_tests" --gtest_also_run_disabled_tests \
        --gtest_filter='GPUScheduleFuzzBugs.*-*PoCLCompilesABarrierAfterAnInnerLoop:*PoCLRunsAStagedReductionWithBarriersInLoops' \
        --gtest_brief=1
    run_step tests "$aot/aot_main"
    echo '```' | tee -a "$report"

    # Every CUDA pipeline case and the AOT program under compute-sanitizer's memcheck: an
    # out-of-bounds access in a generated kernel fails here even where the values came out right.
    local sanitizer
    sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"
    if [ -n "$sanitizer" ]; then
        echo | tee -a "$report"
        echo '## compute-sanitizer (memcheck)' | tee -a "$report"
        echo '```' | tee -a "$report"
        run_step sanitizer "$sanitizer" --tool memcheck --error-exitcode 9 \
            "$bin/kiln_pipeline_tests" --gtest_filter='On/GPUPipeline.*/CUDA' --gtest_brief=1
        run_step sanitizer "$sanitizer" --tool memcheck --error-exitcode 9 "$aot/aot_main"
        echo '```' | tee -a "$report"
    fi

    {
        echo
        echo "## Schedule fuzzer on CUDA ($fuzz_jobs processes, ${fuzz_seconds} s each)"
        echo '```'
    } | tee -a "$report"
    wait
    for ((f = 1; f <= fuzz_jobs; f++)); do
        cat "$fuzz_dir/$f.log" >>"$logs/fuzz.log"
        { grep -E '^\[ fuzz \] on|failed seeds|^\[  (PASSED|FAILED|SKIPPED) ' "$fuzz_dir/$f.log" ||
            tail -n 5 "$fuzz_dir/$f.log"; } | tee -a "$report"
        grep -q '^\[  PASSED  \] 1 test' "$fuzz_dir/$f.log" || status=1
    done
    echo '```' | tee -a "$report"

    # Short tuning jobs: the hand schedule, the defaults and candidates of the template space,
    # then of the generated (auto) space, each candidate in a worker.
    local db
    db="$(mktemp -d)/gpu.db"
    local space
    for space in ${KILN_GPU_TUNE_SPACES:-template auto}; do
        {
            echo
            echo "## Tuning (kiln tune matmul --target host-cuda --space $space, 24 trials)"
            echo '```'
        } | tee -a "$report"
        if ! timeout 120 "$bin/kiln" tune matmul --shape 2048x2048x2048 --target host-cuda \
            --space "$space" --trials 24 --time 60s --jobs 8 --db "$db" \
            --worker "$bin/kiln-worker" >"$logs/tune-$space.step" 2>&1; then
            status=1
        fi
        cat "$logs/tune-$space.step" >>"$logs/tune.log"
        tail -n 25 "$logs/tune-$space.step" | tee -a "$report"
        rm -f "$logs/tune-$space.step"
        echo '```' | tee -a "$report"
    done
    { "$bin/kiln" db list --db "$db" && "$bin/kiln" db best matmul --db "$db" --top 5; } \
        >>"$logs/tune.log" 2>&1 || true
    cp "$db" "$logs/gpu.db" 2>/dev/null || true
    local trace_args=()
    if "$bin/kiln" db best matmul --db "$db" --top 1 --trace 2>/dev/null |
        sed -n 's/^  trace: //p' | head -n 1 >"$db.trace.json" && [ -s "$db.trace.json" ]; then
        trace_args=(--trace "matmul=$db.trace.json")
    fi
    {
        echo
        echo "## Benchmark (kiln_bench_gpu_cuda)"
        echo
    } | tee -a "$report"
    # A column for the automatic GPU space's point with the matmul hand schedule's kernel (16 x 16
    # threads of 8 x 8 interleaved sums in registers, B's panel staged per 16 values of k:
    # GPUTune.AutoGPUSpaceHasTheMatmulHandSchedulesKernel), then the environment's arguments.
    # And conv2d with its weights repacked once per run, output channel innermost (not yet
    # measured on a GPU).
    local bench_args=(--auto-config 'matmul={"B_panel_at":"inline","block_x":16,"block_y":16,"interleave":true,"out_x":8,"out_y":8,"prod_at":"registers","prod_r_step":16,"prod_stage_A":false,"prod_stage_B_panel":true,"unroll":true}'
        --knobs conv2d:w_packed_at=root)
    local env_args=()
    read -r -a env_args <<<"${KILN_GPU_BENCH_ARGS:-}"
    bench_args+=("${env_args[@]}")
    if ! timeout 200 "$bin/kiln_bench_gpu_cuda" "${trace_args[@]}" "${bench_args[@]}" 2>&1 |
        tee -a "$report"; then
        status=1
    fi
    # Hardware counters of kiln's hand matmul kernel at 1024^3 (Nsight Compute, clocks left
    # alone), where ncu is installed and KILN_GPU_PROFILE is not 0: where the time goes (issue
    # slots, shared and global memory, occupancy, stalls), in ncu.txt beside the report.
    local ncu
    ncu="$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)"
    if [ -n "$ncu" ] && [ "${KILN_GPU_PROFILE:-1}" != 0 ]; then
        {
            echo
            echo "## Nsight Compute: kiln's matmul kernel (ncu.txt)"
            echo '```'
        } | tee -a "$report"
        timeout 180 "$ncu" --clock-control none --kernel-name regex:C_kernel --launch-count 1 \
            --section SpeedOfLight --section ComputeWorkloadAnalysis \
            --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
            --section LaunchStats "$bin/kiln_bench_gpu_cuda" --only matmul --quick --rounds 1 \
            >"$logs/ncu.txt" 2>&1 || echo "gpu-check: ncu failed (see ncu.txt)" | tee -a "$report"
        grep -E 'Duration|Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Bank Conflicts|Stall' \
            "$logs/ncu.txt" | head -n 30 | tee -a "$report" || true
        echo '```' | tee -a "$report"
    fi
    echo "gpu-check: report in $report ($((SECONDS - t0)) s)"
    return $status
}

case "$mode" in
    all)
        build_all
        build_aot_program "$build/gpu-check-aot"
        run_checks "$build/tests" "$build/gpu-check-aot" || exit 1
        ;;
    pack)
        build="${KILN_GPU_BUILD_DIR:-build-gpu}"
        build_all
        make_pack
        ;;
    run)
        [ -f "$pack/pack.tar.xz" ] || { echo "gpu-check: no $pack/pack.tar.xz; run --pack first" >&2; exit 1; }
        dir="$(mktemp -d)"
        xz -dc "$pack/pack.tar.xz" | tar -C "$dir" -xf -
        commit="$(cat "$dir/commit")"
        export LD_LIBRARY_PATH="$dir/lib:$(cuda_library_path)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        # The tools and tests find the worker next to them.
        export KILN_WORKER="$dir/bin/kiln-worker"
        run_checks "$dir/bin" "$dir/aot" || exit 1
        ;;
esac
