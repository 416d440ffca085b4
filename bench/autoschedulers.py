#!/usr/bin/env python3
"""Peer autoschedulers on float32 matmul: TVM MetaSchedule and Halide's Adams2019.

Measures what other autoschedulers reach on the workload kiln's tuner is judged by, on the same
machine: C[M][N] = A[M][K] * B[K][N], row-major, float32 (the matmul of apps/ and of
bench/bench_common.h, with the same inputs: splitmix64 seeds 1 and 2, uniform in [-1, 1)).

  TVM MetaSchedule  the matmul written in TE, tuned by tvm.s_tir.meta_schedule.tune_tir (TVM
                    0.27's place for it) for a global trial budget on an llvm target with this
                    CPU's -mcpu and -num-cores T; local builder (at most 2 workers) and runner.
                    Each budget in --trials is its own tuning run in a fresh work directory.
  Halide Adams2019  the matmul in Halide's Python bindings (a pure zero, an update over RDom k,
                    and a copy to the output, estimates on both inputs and the output), scheduled
                    by the Adams2019 plugin shipped in the halide wheel (parallelism T). If the
                    plugin is missing or fails, Mullapudi2016 then Li2018 are tried and the table
                    says which one ran.

Every result is checked before it is timed, like bench/bench_common.h: the output is filled with
NaN, the kernel runs once and max |got - ref| / max(1, |ref|) against a float64 reference must be
below 1e-3; after the timed runs the output is poisoned and checked once more. Timing: repeated
runs for at least --min-time seconds (and 5 samples); a sample is one run, or a batch of runs
when one run is under 1 ms; the median and the minimum per run are reported.

Each tuning run is its own process (TVM and Halide both carry an LLVM; one process per
measurement as in bench/), its output in build-bench/peers/<run>/run.log, next to what it leaves:
MetaSchedule's database and logs, the best schedule (TVM trace and TIR; Halide schedule source).

  python3 bench/autoschedulers.py --shape 256x256x256 --trials 8          # a smoke run
  python3 bench/autoschedulers.py --trials 64,300 --json out.jsonl        # 1024^3, two budgets
  python3 bench/autoschedulers.py --only halide --threads 1

Needs apache-tvm (with xgboost for the cost model), halide and numpy: scripts/bench-autoschedulers.sh
makes a virtual environment with them and runs this script. Prints a Markdown table; the exit
status is 1 when a result was wrong or a run failed. Not part of the tests or CI.
"""
import argparse
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS_DIR = os.path.join(ROOT, "build-bench", "peers")
TOLERANCE = 1e-3  # as bench_common.h for matmul: float sums against a double reference
MIN_SAMPLES = 5
MIN_SAMPLE_S = 1e-3  # runs shorter than this are timed in batches
HALIDE_ORDER = ["Adams2019", "Mullapudi2016", "Li2018"]


# ---------------------------------------------------------------------------------------------
# The problem: inputs, reference, check, timing (shared by both peers).


def parse_shape(text):
    """'MxNxK' -> (M, N, K), positive integers."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"--shape '{text}' is not MxNxK with three positive integers, e.g. 1024x1024x1024")
    return tuple(int(p) for p in parts)


def parse_trials(text):
    """'64,300' -> [64, 300]."""
    try:
        trials = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        trials = []
    if not trials or min(trials) <= 0:
        raise argparse.ArgumentTypeError(
            f"--trials '{text}' is not a comma-separated list of positive trial budgets, e.g. 64,300")
    return trials


def random_floats(np, n, seed, lo, hi):
    """bench_common.h's random_floats: splitmix64 from a fixed seed, uniform in [lo, hi)."""
    golden = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + golden * np.arange(1, n + 1, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return (lo + (hi - lo) * u).astype(np.float32)


def make_problem(np, M, N, K):
    """Row-major A (MxK), B (KxN) as bench_common.h makes them, and C's float64 reference."""
    a = random_floats(np, M * K, 1, -1.0, 1.0).reshape(M, K)
    b = random_floats(np, K * N, 2, -1.0, 1.0).reshape(K, N)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return a, b, ref


def max_relative_error(np, got, ref):
    """max |got - ref| / max(1, |ref|) (apps::max_relative_error); +inf for a NaN."""
    err = np.abs(got.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref))
    return float("inf") if np.isnan(err).any() else float(err.max())


def time_runs(run_batch, single_s, min_time_s):
    """Times run_batch(n) (n runs back to back, returns seconds) until min_time_s have passed
    and MIN_SAMPLES samples are taken. Returns (median ms per run, min ms per run, runs)."""
    batch = max(1, math.ceil(MIN_SAMPLE_S / max(single_s, 1e-9)))
    samples = []
    total = 0.0
    while total < min_time_s or len(samples) < MIN_SAMPLES:
        s = run_batch(batch)
        samples.append(s / batch)
        total += s
    samples.sort()
    return samples[len(samples) // 2] * 1e3, samples[0] * 1e3, len(samples) * batch


def checked(np, run, out, ref):
    """Poisons out (a numpy view of the output), runs once, returns the error."""
    out.fill(np.nan)
    run()
    return max_relative_error(np, out, ref)


# ---------------------------------------------------------------------------------------------
# TVM MetaSchedule (runs in a worker process).


def tvm_target(tvm, threads):
    """The llvm target for this CPU: 0.27 takes only the dict form of a target."""
    from tvm.target import codegen
    cpu = codegen.llvm_get_system_cpu() or "native"
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": threads})


def run_tvm(args, work_dir):
    import numpy as np
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    M, N, K = args.shape
    trials = args.trials[0]
    target = tvm_target(tvm, args.threads)

    # C[i][j] = sum_k A[i][k] B[k][j], no layout hints: B is read row-major inside the kernel.
    A = te.placeholder((M, K), "float32", name="A")
    B = te.placeholder((K, N), "float32", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    func = te.create_prim_func([A, B, C]).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func.with_attr("tirx.noalias", True)})

    workers = min(2, os.cpu_count() or 1)
    t0 = time.perf_counter()
    db = ms.tune_tir(
        mod, target, work_dir, max_trials_global=trials,
        num_trials_per_iter=min(64, trials),
        builder=ms.builder.LocalBuilder(max_workers=workers),
        runner=ms.runner.LocalRunner(
            evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=100)),
        num_tuning_cores=args.threads)
    tune_s = time.perf_counter() - t0

    records = db.get_all_tuning_records()
    valid = [r for r in records if r.run_secs and max(float(s) for s in r.run_secs) < 1e9]
    best_tuned_ms = min((sum(float(s) for s in r.run_secs) / len(r.run_secs) * 1e3 for r in valid),
                        default=None)
    sch = ms.tir_integration.compile_tir(db, mod, target)
    if sch is None:
        raise RuntimeError(f"MetaSchedule found no valid schedule in {len(records)} trials")
    with open(os.path.join(work_dir, "best_trace.py"), "w") as f:
        f.write(str(sch.trace) + "\n")
    with open(os.path.join(work_dir, "best_tir.py"), "w") as f:
        f.write(sch.mod.script() + "\n")

    t0 = time.perf_counter()
    rt = tvm.tirx.build(sch.mod, target=target)  # what MetaSchedule's builder measured
    compile_s = time.perf_counter() - t0
    fn = rt["main"]
    dev = tvm.cpu(0)
    a, b, ref = make_problem(np, M, N, K)
    a_t, b_t = tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev)
    c_np = np.empty((M, N), np.float32)

    def run_checked():
        c_np.fill(np.nan)
        c_t = tvm.runtime.tensor(c_np, dev)
        fn(a_t, b_t, c_t)
        return max_relative_error(np, c_t.numpy(), ref)

    err = run_checked()
    c_t = tvm.runtime.tensor(c_np, dev)
    # One run's time, averaged over at least 0.1 s, sizes the samples (a batch of `number` runs
    # when one is under 1 ms); then `repeat` samples, more until min_time has passed.
    single_s = rt.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=100)(
        a_t, b_t, c_t).mean
    number = max(1, math.ceil(MIN_SAMPLE_S / max(single_s, 1e-9)))
    repeat = max(MIN_SAMPLES, math.ceil(args.min_time / (number * max(single_s, 1e-9))))
    samples = []
    while not samples or sum(samples) * number < args.min_time:
        res = rt.time_evaluator("main", dev, number=number, repeat=repeat)(a_t, b_t, c_t)
        samples += res.results
    samples.sort()
    median_ms, min_ms = samples[len(samples) // 2] * 1e3, samples[0] * 1e3
    err = max(err, run_checked())

    return {
        "impl": "tvm-metaschedule", "peer": "TVM MetaSchedule", "trials": trials,
        "trials_measured": len(records), "trials_failed": len(records) - len(valid),
        "median_ms": median_ms, "min_ms": min_ms, "reps": number * len(samples),
        "max_rel_err": err, "tune_s": tune_s, "compile_s": compile_s,
        "best_tuned_ms": best_tuned_ms,
        "version": tvm.__version__, "target": str(target),
        "note": f"{workers} builders, runner number=3 min_repeat_ms=100",
    }


# ---------------------------------------------------------------------------------------------
# Halide autoschedulers (run in a worker process).


def halide_matmul(hl, M, N, K):
    """The matmul as Halide's algorithm (x first: A(k, i) is A[i][k]), estimates set."""
    A = hl.ImageParam(hl.Float(32), 2, "A")
    B = hl.ImageParam(hl.Float(32), 2, "B")
    i, j = hl.Var("i"), hl.Var("j")
    k = hl.RDom([hl.Range(0, K)], "k")
    prod, C = hl.Func("prod"), hl.Func("C")
    prod[j, i] = hl.f32(0)
    prod[j, i] += A[k.x, i] * B[j, k.x]
    C[j, i] = prod[j, i]
    A.set_estimates([(0, K), (0, M)])
    B.set_estimates([(0, N), (0, K)])
    C.set_estimates([(0, N), (0, M)])
    return A, B, C


def halide_plugin(hl, name):
    """The plugin library for an autoscheduler inside the wheel, or None when absent."""
    path = os.path.join(os.path.dirname(hl.__file__), "lib64",
                        f"libautoschedule_{name.lower()}.so")
    return path if os.path.exists(path) else None


def run_halide(args, work_dir):
    import numpy as np
    import halide as hl

    M, N, K = args.shape
    target = hl.get_jit_target_from_environment()
    tried = []  # what happened to each autoscheduler before the one that ran
    for name in HALIDE_ORDER:
        plugin = halide_plugin(hl, name)
        if plugin is None:
            tried.append(f"{name}: plugin libautoschedule_{name.lower()}.so missing from the wheel")
            print(f"autoschedulers: Halide {tried[-1]}", file=sys.stderr)
            continue
        A, B, C = halide_matmul(hl, M, N, K)
        p = hl.Pipeline(C)
        try:
            hl.load_plugin(plugin)
            params = hl.AutoschedulerParams(name, {"parallelism": str(args.threads)})
            t0 = time.perf_counter()
            results = p.apply_autoscheduler(target, params)
            tune_s = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 (a plugin's failure is reported, not fatal)
            tried.append(f"{name}: failed: {e}")
            print(f"autoschedulers: Halide {tried[-1]}", file=sys.stderr)
            continue
        break
    else:
        raise RuntimeError("no Halide autoscheduler ran: " + "; ".join(tried))
    with open(os.path.join(work_dir, "schedule.txt"), "w") as f:
        f.write(results.schedule_source + "\n")

    t0 = time.perf_counter()
    p.compile_jit(target)
    compile_s = time.perf_counter() - t0
    a, b, ref = make_problem(np, M, N, K)
    A.set(hl.Buffer(a))  # reverse_axes: dimension 0 is numpy's last axis, as in the algorithm
    B.set(hl.Buffer(b))
    c_np = np.empty((M, N), np.float32)
    c_buf = hl.Buffer(c_np)  # shares c_np's memory

    def run():
        p.realize(c_buf)

    def run_batch(n):
        t = time.perf_counter()
        for _ in range(n):
            p.realize(c_buf)
        return time.perf_counter() - t

    err = checked(np, run, c_np, ref)
    single_s = min(run_batch(1) for _ in range(3))
    median_ms, min_ms, reps = time_runs(run_batch, single_s, args.min_time)
    err = max(err, checked(np, run, c_np, ref))

    return {
        "impl": "halide-" + name.lower(), "peer": "Halide " + name, "trials": None,
        "median_ms": median_ms, "min_ms": min_ms, "reps": reps, "max_rel_err": err,
        "tune_s": tune_s, "compile_s": compile_s, "version": hl_version(hl),
        "target": str(target), "note": f"{name}, parallelism={args.threads}", "not_run": tried,
    }


def hl_version(hl):
    """The halide wheel's version, from its package metadata."""
    try:
        from importlib.metadata import version
        return version("halide")
    except Exception:  # noqa: BLE001
        return getattr(hl, "__version__", "unknown")


# ---------------------------------------------------------------------------------------------
# The driver: one worker process per tuning run, then the table.


def worker(args):
    """Runs one peer (args.worker) and writes its result as JSON to args.result."""
    work_dir = args.work_dir
    try:
        result = (run_tvm if args.worker == "tvm" else run_halide)(args, work_dir)
    except Exception as e:  # noqa: BLE001 (reported in the table)
        import traceback
        traceback.print_exc()
        result = {"impl": args.worker, "error": f"{type(e).__name__}: {e}"}
    with open(args.result, "w") as f:
        json.dump(result, f)
    return 0


def run_job(args, peer, trials):
    """Runs one tuning run in its own process; returns its result dict (with 'error' on failure)."""
    M, N, K = args.shape
    shape = f"{M}x{N}x{K}"
    name = f"tvm-{shape}-t{trials}-th{args.threads}" if peer == "tvm" \
        else f"halide-{shape}-th{args.threads}"
    work_dir = os.path.join(PEERS_DIR, name)
    shutil.rmtree(work_dir, ignore_errors=True)  # a fresh run: no records of an earlier one
    os.makedirs(work_dir)
    result_path = os.path.join(work_dir, "result.json")
    log_path = os.path.join(work_dir, "run.log")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", peer, "--shape", shape,
           "--threads", str(args.threads), "--trials", str(trials or 1),
           "--min-time", str(args.min_time), "--work-dir", work_dir, "--result", result_path]
    env = dict(os.environ, TVM_NUM_THREADS=str(args.threads), HL_NUM_THREADS=str(args.threads))
    what = f"TVM MetaSchedule, {trials} trials" if peer == "tvm" else "Halide autoscheduler"
    print(f"autoschedulers: {what}, {shape}, {args.threads} threads ... (log: "
          f"{os.path.relpath(log_path, ROOT)})", flush=True)
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    wall_s = time.perf_counter() - t0
    try:
        with open(result_path) as f:
            result = json.load(f)
    except (OSError, ValueError):
        result = {"impl": peer, "error": f"worker exited with status {rc} and no result"}
    result.update(workload="matmul", shape=shape, threads=args.threads, wall_s=wall_s,
                  log=os.path.relpath(log_path, ROOT))
    if peer == "tvm":
        result.setdefault("peer", "TVM MetaSchedule")
        result.setdefault("trials", trials)
    else:
        result.setdefault("peer", "Halide autoscheduler")
    if "error" not in result:
        result.update(work=2 * M * N * K, unit="GF/s",
                      rate=2 * M * N * K / (result["median_ms"] * 1e-3) / 1e9,
                      checked=result["max_rel_err"] < TOLERANCE)
    else:
        with open(log_path) as f:
            tail = f.read().splitlines()[-15:]
        print("\n".join("    " + line for line in tail), file=sys.stderr)
    for line in result.get("not_run", []):
        print(f"autoschedulers:   Halide {line}; {result['peer']} ran instead", flush=True)
    print(f"autoschedulers:   done in {wall_s:.1f} s"
          + (f": {result['error']}" if "error" in result else ""), flush=True)
    return result


def fmt_ms(ms):
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def fmt_s(s):
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def table(results):
    """The Markdown table and the notes under it."""
    lines = ["| peer | trials | median ms | GF/s | tuning time | check |",
             "|---|---:|---:|---:|---:|---|"]
    notes = []
    for r in results:
        trials = "–" if r.get("trials") is None else str(r["trials"])
        if "error" in r:
            lines.append(f"| {r['peer']} | {trials} | – | – | – | error |")
            notes.append(f"{r['peer']} ({trials} trials): **error**: {r['error']} (log: {r['log']})")
            continue
        check = f"ok ({r['max_rel_err']:.1e})" if r["checked"] \
            else f"**WRONG** ({r['max_rel_err']:.1e})"
        lines.append(f"| {r['peer']} | {trials} | {fmt_ms(r['median_ms'])} | {r['rate']:.3g} | "
                     f"{fmt_s(r['tune_s'])} | {check} |")
        if r["impl"] == "tvm-metaschedule":
            best = r.get("best_tuned_ms")
            notes.append(
                f"TVM {r['version']} MetaSchedule, {r['trials']} trials: {r['trials_measured']} "
                f"measured ({r['trials_failed']} failed), best while tuning "
                f"{'–' if best is None else fmt_ms(best) + ' ms'}, target `{r['target']}`, "
                f"{r['note']}; compile {r['compile_s'] * 1e3:.0f} ms, "
                f"process {fmt_s(r['wall_s'])}")
        else:
            not_run = "".join(f" (not run: {line})" for line in r.get("not_run", []))
            notes.append(
                f"Halide {r['version']}: {r['note']}{not_run}; target `{r['target']}`; no measurement "
                f"while scheduling (cost model); compile {r['compile_s'] * 1e3:.0f} ms, "
                f"process {fmt_s(r['wall_s'])}")
    return "\n".join(lines) + "\n\nNotes:\n" + "\n".join("- " + n for n in notes)


def main():
    ap = argparse.ArgumentParser(
        description="TVM MetaSchedule and Halide's Adams2019 autoscheduler on float32 matmul "
                    "(C = A B, row-major), tuned, checked and timed on this machine.")
    ap.add_argument("--shape", type=parse_shape, default=(1024, 1024, 1024),
                    help="MxNxK (default 1024x1024x1024)")
    ap.add_argument("--threads", type=int, default=2,
                    help="threads of the kernels and parallelism of the schedules (default 2)")
    ap.add_argument("--trials", type=parse_trials, default=[64, 300],
                    help="MetaSchedule trial budgets, one tuning run each (default 64,300)")
    ap.add_argument("--only", choices=["tvm", "halide"], help="run one peer only")
    ap.add_argument("--json", metavar="FILE", help="append one JSON line per result to FILE")
    ap.add_argument("--min-time", type=float, default=1.0,
                    help="seconds of timed runs per result (default 1)")
    # Internal: one tuning run in a worker process (see run_job).
    ap.add_argument("--worker", choices=["tvm", "halide"], help=argparse.SUPPRESS)
    ap.add_argument("--work-dir", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads <= 0:
        ap.error(f"--threads {args.threads} must be positive")
    if args.worker:
        return worker(args)

    M, N, K = args.shape
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/loadavg") as f:
        load_start = " ".join(f.read().split()[:3])
    started = datetime.datetime.now(datetime.timezone.utc)
    print(f"# Peer autoschedulers: matmul {M}x{N}x{K}, {args.threads} threads\n\n"
          f"- date: {started:%Y-%m-%d %H:%M} UTC\n"
          f"- CPU: {cpu}, {os.cpu_count()} cores visible; load average at start: {load_start}\n",
          flush=True)

    jobs = []
    if args.only in (None, "tvm"):
        jobs += [("tvm", t) for t in args.trials]
    if args.only in (None, "halide"):
        jobs.append(("halide", None))
    results = [run_job(args, peer, trials) for peer, trials in jobs]

    with open("/proc/loadavg") as f:
        load_end = " ".join(f.read().split()[:3])
    print()
    print(table(results))
    print(f"\nload average at end: {load_end}")
    if args.json:
        with open(args.json, "a") as f:
            for r in results:
                f.write(json.dumps(dict(r, date=f"{started:%Y-%m-%dT%H:%MZ}", cpu=cpu)) + "\n")
    bad = [r for r in results if "error" in r or not r["checked"]]
    if bad:
        print("autoschedulers: some result was wrong or some run failed (see the notes)",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
