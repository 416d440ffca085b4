#include "autotune/Templates.h"

#include "autotune/AutoSpace.h"
#include "autotune/GeneratorOperator.h"
#include "codegen/Target.h"
#include "lang/Error.h"

namespace kiln::autotune {

SearchSpace space_for(const apps::Operator &op, const std::vector<int64_t> &shape,
                      const std::string &kind, const Target &target, const GpuLimits *gpu_limits) {
    if (kind != "template" && kind != "auto")
        throw CompileError("search space kind must be 'template' or 'auto', got '" + kind + "'");
    const GpuLimits limits = gpu_limits ? *gpu_limits : GpuLimits{};
    if (kind == "template") {
        if (auto knobs = generator_knob_space(op, shape, target, &limits)) return std::move(*knobs);
    }
    if (target.has_gpu()) {
        std::string api = gpu_api_name(target.gpu);
        if (kind == "auto") return auto_gpu_space(op, shape, limits);
        throw CompileError("operator '" + op.name + "' has no GPU template (gpu=" + api +
                           "); GPU templates: matmul, conv2d, blur, blur_u16, softmax, layernorm; "
                           "or tune it with --space auto (the automatic GPU space)");
    }
    return auto_space(op, shape, target);
}

} // namespace kiln::autotune
