// The automatic search space: knobs derived from the structure of any operator's pipeline, for
// operators without a hand-written template (autotune/Templates.h). For the output Func it tiles
// the two innermost dimensions at two levels (an inner tile and an outer multiple of it), picks
// which of the two tile loops is outer (row strips or column panels), a vector width and whether
// to unroll the tile rows and to parallelize the outermost loop; each update of the output may
// vectorize its innermost pure loop, split its first reduction variable and, for a large
// reduction, rfactor it. Every other Func of the pipeline (OperatorInstance::stages) gets a
// placement knob: inline (pure Funcs only), root, or computed at the strip, the outer tile or the
// tile loop of the output, and whether to vectorize it; a reduction may be a register tile, per
// tile or per outer tile with its reduction blocked outside the register tiles (SSRSRS). On a
// target with a matrix unit (AMX), an update the unit computes (asked of the tensorize pass on a
// probe instance) may be tensorized in blocks of rows and columns, with panels and k chunks
// around them. For a target with a GPU API, auto_gpu_space (autotune/AutoGPUSpace.cpp) derives GPU
// schedules the same way.
#pragma once

#include "autotune/SearchSpace.h"
#include "autotune/Templates.h"

namespace kiln::autotune {

/// The automatic space of one instance of an operator (built with op.make(shape)) for a CPU
/// target, whose vector width gives the natural vector lanes.
SearchSpace auto_space(const apps::Operator &op, const std::vector<int64_t> &shape,
                       const Target &target);

/// The automatic GPU space of one instance of an operator: the output tiled over blocks and
/// threads (block_x, block_y, out_x by out_y outputs per thread, unroll), each other Func inlined,
/// computed at root as its own kernels, or computed per block into shared memory where its region
/// per block follows from the algorithm; the output's reduction optionally in an intermediate of
/// sums per block (rfactor({})) in shared memory or in each thread's registers; a per-block
/// reduction stepped r_step values at a time with the inputs of each step staged in shared memory
/// (in() wrappers); every point within `limits` (and kiln's portable 1024 threads, 48 KiB). Raises
/// CompileError when the output has no dimensions.
SearchSpace auto_gpu_space(const apps::Operator &op, const std::vector<int64_t> &shape,
                           const GpuLimits &limits = {});

} // namespace kiln::autotune
