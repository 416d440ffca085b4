// Tuning templates: a space whose knobs are the numbers and choices of an operator's hand
// schedule, so that the hand schedule is one point of the space and tuning searches around it.
// The template is the knobs of the operator's generator (ctx.knob) at the shape, for the target
// (CPU or GPU): apps/*.cpp for the built-in operators, whose knobs' defaults are their hand
// schedules; autotune/GeneratorOperator.h's generator_knob_space builds the space. Operators
// without one use the automatic space (space_for, autotune/SearchSpace.h).
#pragma once

#include <cstdint>

#include "autotune/SearchSpace.h"

namespace kiln::autotune {

/// The device limits a GPU template's constraints keep to (the device interface's
/// device_limits; kiln's portable limits, 1024 threads and 48 KiB, apply on top). The generator
/// sees them as ctx.gpu_max_threads_per_block() and ctx.gpu_shared_memory_bytes().
struct GpuLimits {
    int64_t max_threads_per_block = 1024;
    int64_t shared_memory_bytes = int64_t(48) * 1024;
};

} // namespace kiln::autotune
