// Hand-written tuning templates: for the operators whose fast schedules have a known shape (a
// register-blocked matmul, a tiled direct convolution, a two-stage stencil), a space whose knobs
// are the numbers and choices of the hand schedule, so that the hand schedule is one point of the
// space and tuning searches around it. Operators without a template use the automatic space.
#pragma once

#include <cstdint>
#include <optional>

#include "autotune/SearchSpace.h"

namespace kiln::autotune {

/// The template of `op` at `shape` for a CPU target (its vector width sets the lanes knob), or
/// empty when `op` has none.
std::optional<SearchSpace> template_space(const apps::Operator &op,
                                          const std::vector<int64_t> &shape, const Target &target);

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
