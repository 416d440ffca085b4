// The tuner's worker processes (autotune/Runner.h) as a pool of slots: each slot is one worker
// and the candidate it builds or measures, with the deadline of what it is doing. The pool starts
// and replaces workers and waits on all of them at once; what a line, a death or a missed
// deadline means for a candidate is the tuner's business (autotune/Tuner.cpp), passed in as
// callbacks.
//
//   WorkerPool pool(worker_path, args, jobs);
//   pool.wait(on_line, on_death, on_timeout); // at most 250 ms, or until the nearest deadline
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autotune/Runner.h"
#include "autotune/SearchSpace.h"

namespace kiln::autotune {

/// What a worker builds and measures: a search config, a baseline, or a re-measurement.
struct Candidate {
    enum class Kind { search, default_schedule, hand_schedule, remeasure };
    Kind kind = Kind::search;
    std::optional<Config> config;
    std::string hash, config_json, trace_json;
};

/// One worker process and the candidate it holds.
struct Slot {
    using Clock = std::chrono::steady_clock;
    std::unique_ptr<WorkerProcess> worker;
    enum class State { idle, building, built, measuring } state = State::idle;
    Candidate cand;
    Clock::time_point deadline;
    double compile_ms = 0, first_ms = 0;
    int64_t built_order = 0;
    /// What the deadline guards: the worker compiling the candidate, its first run, the
    /// comparison with the reference, the timing loop.
    enum class Phase { compiling, first_run, checking, timing } phase = Phase::compiling;
    double limit_s = 0; ///< the length of that deadline
    /// Stopped (SIGSTOP) while another candidate is timed, since then; its deadline does not run.
    std::optional<Clock::time_point> paused_since;

    /// Building or measuring: a deadline is running.
    bool busy() const { return state == State::building || state == State::measuring; }
    void set_deadline(Phase what, double seconds);
    /// The phase as a timeout message says it: "compiling", "first run", "comparing with the
    /// reference", "timing".
    static const char *phase_name(Phase p);
};

class WorkerPool {
public:
    /// Starts `jobs` workers (the executable at `path` with `args`).
    WorkerPool(std::string path, std::vector<std::string> args, int jobs);

    std::vector<Slot> &slots() { return slots_; }
    const std::vector<Slot> &slots() const { return slots_; }
    /// A fresh worker in the slot, idle (the old one, if any, is killed).
    void replace(Slot &s);
    /// Whether any slot is in state `st`.
    bool any(Slot::State st) const;
    /// Whether any slot is building or measuring.
    bool any_busy() const;
    /// The slot whose candidate was built first, or nullptr; nullptr too while one measures (one
    /// measurement at a time).
    Slot *next_to_measure();
    /// Marks the slot built, numbering it in build order (next_to_measure takes the oldest).
    void mark_built(Slot &s);
    /// Whether a slot is in the timing loop of a measurement (Phase::timing).
    bool timing() const;
    /// Measurement hygiene: stops (SIGSTOP) every worker that is building, so that no compile
    /// shares the cores with the candidate being timed; resume_builders continues them
    /// (SIGCONT) and moves their deadlines by the time they stood still.
    void pause_builders();
    void resume_builders();
    /// Waits until a worker writes or dies, or the nearest deadline of a busy slot passes (at
    /// most 250 ms), then for each slot: on_line for every complete line it wrote, on_death when
    /// its worker is gone (after its last lines), on_timeout when it is still busy past its
    /// deadline. Raises RuntimeError when poll fails.
    void wait(const std::function<void(Slot &, const std::string &)> &on_line,
              const std::function<void(Slot &)> &on_death,
              const std::function<void(Slot &)> &on_timeout);
    /// Stops every worker (closing their pipes; each exits).
    void stop();

private:
    std::string path;
    std::vector<std::string> args;
    std::vector<Slot> slots_;
    int64_t built_counter = 0;
};

} // namespace kiln::autotune
