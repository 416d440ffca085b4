// Hand-written tuning templates: for the operators whose fast schedules have a known shape (a
// register-blocked matmul, a tiled direct convolution, a two-stage stencil), a space whose knobs
// are the numbers and choices of the hand schedule, so that the hand schedule is one point of the
// space and tuning searches around it. Operators without a template use the automatic space.
#pragma once

#include <optional>

#include "autotune/SearchSpace.h"

namespace kiln::autotune {

/// The template of `op` at `shape`, or empty when `op` has none.
std::optional<SearchSpace> template_space(const apps::Operator &op,
                                          const std::vector<int64_t> &shape);

} // namespace kiln::autotune
