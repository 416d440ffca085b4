// ScheduleTrace: a pipeline's whole schedule as data. A schedule is nothing but the directives
// recorded by the scheduling calls (lang/Directive.h), so the trace is every directive of every
// Func reachable from the outputs, in call order, plus a hash of the algorithm it was recorded on.
// It saves to JSON (the tuning database stores it), prints as C++ (to paste into a hand-written
// schedule) and replays on a freshly built pipeline of the same algorithm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lang/Directive.h"
#include "lang/Func.h"

namespace kiln {

/// A structural hash of the algorithm as the user wrote it: every Func reachable from the outputs
/// that the user defined (not the intermediates made by rfactor; in() wrappers are never called
/// by the definitions, so they are not reached), taken in name order, with its
/// name, pure arguments, output types, compute() shape, pure definition and update definitions
/// (with their RDom bounds). For a Func that rfactor rewrote, the updates as written before the
/// rewrite are hashed, so scheduling never changes the hash. Exprs are hashed structurally
/// (lang/IREquality.h): by names, types and constants, never by pointer.
///
/// The hash is stable within a build of kiln, across processes. Caveat: it includes names, so a
/// pipeline whose Funcs, Vars, RDoms, Params or Buffers took implicit names from unique_name
/// ("f12", "v3", "r7", "sum4" for an unnamed inline reducer) hashes differently when those counters
/// differ (another process, or the same process after building other pipelines). Name everything in
/// pipelines that are tuned or replayed. (Boundary conditions and rfactor intermediates have
/// deterministic default names: "in_repeat_edge", "f_intm".) Raises CompileError for a pipeline
/// that reachable_functions rejects.
uint64_t algorithm_hash(const std::vector<Func> &outputs);

/// The schedule of a pipeline as data.
///
/// JSON form (to_json), schema version 1:
///   {"schema_version": 1, "algorithm_hash": "0x0123456789abcdef",
///    "directives": [{"func": "blur_y", "stage": 0, "primitive": "split",
///                    "vars": ["x", "xo", "xi"], "rvars": [false, false, false],
///                    "ints": [8], "target": "", "option": "ShiftInwards"}, ...]}
/// A wrapper made by in() is {"func": "B", "stage": 0, "primitive": "in", "vars": ["C"],
/// "rvars": [false], "ints": [], "target": "B_in_C", "option": ""} (no vars: every consumer).
/// The hash is a hex string because JSON numbers lose precision past 2^53. Writing always emits
/// every field; reading requires "func" and "primitive" in each directive and defaults the others
/// ("stage" 0, empty lists and strings, "rvars" all false).
struct ScheduleTrace {
    static constexpr int schema_version = 1;

    uint64_t algorithm_hash = 0; ///< kiln::algorithm_hash of the pipeline it was recorded on
    /// In call order. Within a trace, Directive::sequence is the 1-based position, so a trace does
    /// not depend on what else the process scheduled before it.
    std::vector<Directive> directives;

    /// All directives of all Funcs reachable from the outputs (including intermediates made by
    /// rfactor, and in() wrappers: lang/Function.h scheduled_functions), ordered by the order of
    /// the calls. The in directive that made a wrapper names what it wraps (a Func or an
    /// ImageParam) as its Func, its consumers as its variables and the wrapper as its target.
    static ScheduleTrace capture(const std::vector<Func> &outputs);

    nlohmann::json to_json() const;
    /// Raises CompileError naming the field for a missing field or a wrong type, naming the
    /// version for an unsupported schema version, and naming the directive for a directive that
    /// does not fit its primitive's row of lang/Directives.def (unknown primitive, wrong number
    /// of variables, bad option).
    static ScheduleTrace from_json(const nlohmann::json &json);
    std::string to_json_string(int indent = 2) const;
    /// from_json of the text; also raises CompileError for text that is not JSON.
    static ScheduleTrace parse(const std::string &text);

    /// The scheduling calls, one per line, ready to paste. Each Func is assumed to be held in a
    /// C++ variable named like the Func (characters other than letters, digits and '_' become
    /// '_'), and so is each ImageParam that in() wraps; rfactor and in declare the variable of
    /// the Func they make (`Func B_in = B.in();`, `Func f_in_g = f.in(g);`,
    /// `Func f_in_g_h = f.in({g, h});`). Tail strategies are always
    /// spelled out. A split followed by vectorize (or unroll) of its inner loop, as recorded by
    /// vectorize(x, factor) and unroll(x, factor), prints as that one call; tile prints as the
    /// splits and the reorder it records, gpu_tile as its splits, reorder, gpu_blocks and
    /// gpu_threads. Pasting the text records the same directives. Raises
    /// CompileError, as from_json does, for a directive that does not fit its primitive.
    std::string to_cpp() const;

    /// Replays the trace on a freshly built pipeline of the same algorithm by calling the same
    /// public Func, Stage and ImageParam methods in order (an in directive finds what it wraps
    /// among the pipeline's Funcs, then among the ImageParams they call, by name). Raises
    /// CompileError when the algorithm hash differs, when a Func of the pipeline already has
    /// directives, or when a directive names a Func (or an in directive an ImageParam) the
    /// pipeline does not have; these are checked before anything is applied. An error raised by a
    /// scheduling method itself (say a split of a loop that does not exist) leaves the pipeline
    /// partly scheduled: rebuild it before trying again.
    void apply(const std::vector<Func> &outputs) const;
};

/// Removes the schedule of a pipeline: every directive of every Func reachable from the outputs,
/// what rfactor did (the updates as written come back; its intermediates are no longer
/// called) and the in() wrappers of those Funcs and of the ImageParams they call. What is left is
/// the algorithm as written, with the same algorithm_hash, on which ScheduleTrace::apply replays
/// another schedule. The tuner uses it to tune a generator whose function also schedules
/// (autotune/GeneratorOperator.h).
void remove_schedule(const std::vector<Func> &outputs);

/// Same hash and the same directives, field by field (sequence included).
bool operator==(const ScheduleTrace &a, const ScheduleTrace &b);
inline bool operator!=(const ScheduleTrace &a, const ScheduleTrace &b) {
    return !(a == b);
}

} // namespace kiln
