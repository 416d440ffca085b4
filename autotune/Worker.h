// The measuring side of the tuner: the loop run by the `kiln-worker` executable. The tuner
// (autotune/Runner.h) starts it as a child process and talks to it in JSON lines over its stdin
// and stdout, so that a candidate that crashes or hangs takes down only the worker.
//
// Requests, one JSON object per line:
//   {"cmd": "build", "op": "matmul", "shape": [64, 64, 64], "trace": {...}, "threads": 2,
//    "target": "triple=...;gpu=opencl"}
//       builds a fresh instance, applies the trace and JIT-compiles it for the target (a
//       Target::to_string text; absent: the host CPU). For a target with a GPU API it also runs
//       the candidate once (the device compiles its kernels at the first launch), in this
//       process's own device context. Replies {"status": "built", "compile_ms": 123.4} or
//       {"status": "compile_error", "error": "..."} ("runtime_error" when that first GPU run
//       fails for another reason than building the kernel).
//   {"cmd": "measure", "min_time_ms": 200, "warmup": 1, "max_repeats": 200}
//       runs the built candidate once (GPU: followed by the interface's synchronize(), as every
//       timed run), sends {"event": "ran", "first_ms": ...}; compares the output (GPU: copied
//       back to the host) with the operator's reference (computed once per operator and shape, then
//       cached) within Operator::tolerance, sends {"event": "checked"}; then runs `warmup` more
//       times and repeats until min_time_ms of measuring (and at least 3 samples). Replies
//       {"status": "ok", "times_ms": [...], "median_ms": ..., "spread_ms": max - min} or a failure
//       status
//       ("runtime_error", "wrong_answer") with "error". Kernels faster than 1 ms are run in
//       batches, each sample being the batch time divided by its size.
//   {"cmd": "quit"}
// Crashes and hangs are not reported by the worker: the tuner sees the pipe close (and the
// signal) or the deadline pass.
#pragma once

#include <cstdio>

namespace kiln::autotune {

/// Serves requests from `in` until end of file or "quit"; returns the exit status.
int run_worker(std::FILE *in, std::FILE *out);

} // namespace kiln::autotune
