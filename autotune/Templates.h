// Tuning templates: a space whose knobs are the numbers and choices of an operator's hand
// schedule, so that the hand schedule is one point of the space and tuning searches around it.
// On CPU targets the template is the knobs of the operator's generator (apps/*.cpp for the
// built-in operators, ctx.knob; autotune/GeneratorOperator.h's generator_knob_space); the GPU
// templates of the built-in operators are written here as spaces (autotune/GPUTemplates.cpp).
// Operators without a template use the automatic space.
#pragma once

#include <cstdint>
#include <optional>

#include "autotune/SearchSpace.h"

namespace kiln::autotune {

/// The device limits a GPU template's constraints keep to (the device interface's
/// device_limits; kiln's portable limits, 1024 threads and 48 KiB, apply on top).
struct GpuLimits {
    int64_t max_threads_per_block = 1024;
    int64_t shared_memory_bytes = int64_t(48) * 1024;
};

/// The GPU template of `op` (autotune/GPUTemplates.cpp: matmul, conv2d, blur, blur_u16,
/// softmax, layernorm) for a target with a GPU API, or empty when `op` has none. Each space's
/// name ends in "_gpu" (so its config hashes differ from the CPU template's), and the operator's
/// GPU hand schedule is one of its points.
std::optional<SearchSpace> gpu_template_space(const apps::Operator &op,
                                              const std::vector<int64_t> &shape,
                                              const GpuLimits &limits = {});

} // namespace kiln::autotune
