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
//       runs the built candidate once, sends {"event": "ran", "first_ms": ...} (wall clock until
//       its work is done; GPU: also "first_device_ms", its device time); compares the output
//       (GPU: copied back to the host) with the operator's reference (computed once per operator
//       and shape, then cached) within Operator::tolerance, sends {"event": "checked"}; then runs
//       `warmup` more batches and repeats until min_time_ms of measuring (wall clock, and at
//       least 3 samples), and past it, up to 4 x min_time_ms, until the samples settle
//       (timing_settled). Replies {"status": "ok", "times_ms": [...], "median_ms": ...,
//       "spread_ms": max - min, "settled": true or false, "clock": "host" or "device"} or a
//       failure status
//       ("runtime_error", "wrong_answer") with "error". Candidates whose first run took under
//       1 ms are run in batches, each sample being the batch time divided by its size.
//       What a sample times: for a CPU target ("clock": "host"), the steady clock around the
//       batch's runs; for a GPU target ("clock": "device"), the device's own clock between two
//       marks on its queue (the device interface's timer_start / timer_stop: an OpenCL
//       profiling marker, a CUDA event), placed before the batch's first run and after its last,
//       the runs launched back to back without synchronizing: the device's time for the batch,
//       host work between launches included when the device had to wait for it, the host's
//       final wait and wake-up not.
//   {"cmd": "quit"}
// Crashes and hangs are not reported by the worker: the tuner sees the pipe close (and the
// signal) or the deadline pass.
#pragma once

#include <cstdio>
#include <vector>

namespace kiln::autotune {

/// Whether timing samples settle a candidate's time: their interquartile range is at most
/// `tolerance` times their median (one slow outlier, a preemption, does not unsettle them;
/// samples that keep disagreeing do). Fewer than 3 samples never settle.
bool timing_settled(const std::vector<double> &samples, double tolerance = 0.05);

/// Serves requests from `in` until end of file or "quit"; returns the exit status.
int run_worker(std::FILE *in, std::FILE *out);

} // namespace kiln::autotune
