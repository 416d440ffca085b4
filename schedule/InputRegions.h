// The region of each input image that computing the outputs over a given region reads, as the
// pipeline is scheduled now: what a caller must allocate to run it (the tuner sizes the inputs of
// a generator's algorithm with it, autotune/GeneratorOperator.h). Bounds inference on the loop
// nest, with the outputs' region and the bound scalar Params fixed to constants.
// Requires: a pipeline that lowers. Guarantees: one constant box per input image, or an error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lang/Func.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

/// The constant box an input image is read in: its mins and extents, dimension 0 first.
struct InputRegion {
    LoweredArgument argument; ///< the image (its ImageParam in `param`) or a scalar Param
    std::vector<int64_t> mins, extents;
};

/// The pipeline's inputs (images by first use, then scalar Params by name, as lower() lists
/// them; no outputs), from the loop nest after bounds inference.
std::vector<LoweredArgument> pipeline_inputs(const std::vector<Func> &outputs);

/// The pipeline's inputs in argument order (images by first use, then scalar Params by name, as
/// lower() lists them), each image with the region read when the outputs are computed over
/// [mins, mins + extents) (mins empty: 0). Scalar Params must have a value bound with set().
/// A read whose coordinates depend on the input's own shape (a boundary condition's clamp) is
/// taken without the clamp: the input then covers everything the clamp could reach. A dimension
/// with an estimate (ImageParam::set_estimate) is that estimate, also where another input's
/// reads depend on it (an RDom over this input's extent). Raises
/// CompileError naming the input and the dimension when a read is unbounded (coordinates that
/// depend on data) and naming the Param when a scalar has no value.
std::vector<InputRegion> input_regions(const std::vector<Func> &outputs,
                                       const std::vector<int64_t> &extents,
                                       const std::vector<int64_t> &mins = {});

} // namespace kiln
