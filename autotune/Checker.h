// The correctness check of a candidate without a hand-written reference: its output is compared
// with the reference evaluator (lang/ReferenceEvaluator.h, which shares no code with lowering) on
// sampled output points: every corner, points along every edge of the output region (both ends,
// their neighbours, evenly spaced ones) and at least 1,000 uniformly random points. It runs the
// candidate
//   1. on the instance's inputs, the output pre-filled with a NaN (floats) or a sentinel
//      (integers), so a point the schedule never writes is caught wherever it is (every element
//      still holding the fill value is compared with the reference, up to 16 of them);
//   2. on the same inputs with 1 thread, compared element by element with run 1 (N threads);
//   3. on a second, different set of inputs, at other sampled points, also pre-filled.
// The expected values are computed once per checker (per operator and shape in the worker), in one
// pass of the reference evaluator over all the points (reference_realize_points), so a Func
// every point reads (a histogram, a whole-image reduction) is computed once, not once per point.
// Operators that give their own reference (apps/Operator.h) are checked against it instead.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "apps/Operator.h"
#include "lang/Buffer.h"

namespace kiln::autotune {

/// Fills a buffer with deterministic pseudo-random values from `seed` (splitmix64): floats in
/// [-1, 1), integers over their whole range (8 and 16 bits) or in [-1000, 1000] (wider), bools 0/1.
void fill_random(BufferBase &b, uint64_t seed);

/// The points checked in an output of these extents (from 0): all corners, up to 32 points along
/// each edge, then `random_points` other distinct points drawn uniformly from `seed` (fewer when
/// the output is smaller). Deterministic.
std::vector<std::vector<int>> sample_points(const std::vector<int> &extents, int random_points,
                                            uint64_t seed);

struct CheckResult {
    std::string status = "ok"; ///< "ok", "wrong_answer" or "runtime_error"
    std::string error;         ///< for a failure: what differed, where, by how much
    double max_error = 0;      ///< largest relative error seen at the sampled points
};

class ReferenceChecker {
public:
    /// `reference` is an instance of the operator kept for the reference evaluator (its inputs
    /// are input set 1; set 2 is made here); `tolerance` bounds |got - expected| / max(1,
    /// |expected|).
    ReferenceChecker(apps::OperatorInstance reference, double tolerance, int random_points = 1000);

    /// Runs a candidate (an instance of the same operator and shape, whose inputs `run` uses)
    /// through the three runs above. `run` computes into the buffer it is given, with the
    /// candidate's inputs bound now, and returns "" or the runtime's error message. Leaves input
    /// set 1 bound to the candidate.
    CheckResult check(const apps::OperatorInstance &candidate,
                      const std::function<std::string(BufferBase &)> &run);

private:
    struct InputSet {
        std::vector<BufferBase> data;
        std::vector<std::vector<int>> points;
        std::vector<double> expected; ///< at points, computed at the first check
    };
    /// The reference evaluator's values at the points, with the set's inputs (one pass).
    std::vector<double> expected_at(const InputSet &set,
                                    const std::vector<std::vector<int>> &points);

    apps::OperatorInstance reference;
    double tolerance;
    InputSet sets[2];
};

} // namespace kiln::autotune
