// The reference evaluator: computes a pipeline point by point straight from its definitions,
// ignoring any schedule. It shares no lowering code with the compiler, so it is the oracle that
// every compiled schedule is checked against. It is slow by design; use it on small sizes.
#pragma once

#include <vector>

#include "lang/Buffer.h"
#include "lang/Func.h"

namespace kiln {

/// Evaluates `output` over the region with the given extents (and mins, zero by default).
/// Params and ImageParams take the values bound with set(). Returns one buffer per value of the
/// output (a single-valued Func gives one). Raises CompileError for an undefined or recursive
/// Func and RuntimeError for an unbound Param or an access outside an input buffer.
std::vector<BufferBase> reference_realize_all(const Func &output, const std::vector<int> &extents,
                                              const std::vector<int> &mins = {});

/// The single-valued form: evaluates into a new buffer of the output's type.
BufferBase reference_realize(const Func &output, const std::vector<int> &extents,
                             const std::vector<int> &mins = {});

/// Evaluates into an existing buffer, over the region it covers.
void reference_realize_into(const Func &output, BufferBase &out);

/// The single-valued output at scattered points (coordinates, dimension 0 first), in one pass
/// that computes every intermediate value once for all of them: a 1-D buffer of the output's
/// type whose element i is the value at points[i]. For checking samples of a large output.
BufferBase reference_realize_points(const Func &output,
                                    const std::vector<std::vector<int>> &points);

} // namespace kiln
