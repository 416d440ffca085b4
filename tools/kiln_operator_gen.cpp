// A generator for the operators that ship with kiln (apps/): runs the operator's own generator
// (apps::Operator::generator) at a shape for the target, with its hand schedule (its knobs at
// their defaults, or as given) or the default schedule, and compiles it ahead of time.
//
//   kiln_add_kernel(NAME mm GENERATOR kiln::operator_gen
//                   PARAMS op=matmul shape=256x256x256 schedule=hand tile_j=64)
//
// Parameters: op (required; `kiln list` shows the names), shape (the operator's default when
// absent; "MxNxK" or "M,N,K", or each value by its name: M=256), schedule (hand or default;
// hand when absent), and any of the operator's knobs (tile_j=64; `kiln tune` lists them).
#include "apps/Operator.h"
#include "driver/Generator.h"
#include "lang/Error.h"

namespace {

kiln::Pipeline make_operator(kiln::GeneratorContext &ctx) {
    std::string name = ctx.get("op", "");
    std::string shape = ctx.get("shape", "");
    std::string schedule = ctx.get("schedule", "hand");
    if (name.empty()) {
        std::string known;
        for (const kiln::apps::Operator *op : kiln::apps::all_operators()) {
            known += (known.empty() ? "" : ", ") + op->name;
        }
        kiln::user_error("the operator generator needs op=<name> (known: ", known, ")");
    }
    const kiln::apps::Operator &op = kiln::apps::find_operator(name);
    if (!shape.empty()) ctx.set_tuning_shape(kiln::apps::parse_shape(op, shape));
    if (schedule != "hand" && schedule != "default") {
        kiln::user_error("operator generator: schedule must be hand or default, got '", schedule,
                         "'");
    }
    if (!op.generator)
        kiln::user_error("operator '", name, "' is a test's and has no generator to build");
    // The operator's generator gives the inputs' order (the operator's), then the output.
    kiln::Pipeline p = op.generator(ctx);
    if (schedule == "default") kiln::remove_schedule(p.output_funcs());
    return p;
}

} // namespace

KILN_REGISTER_GENERATOR(kiln_operator, make_operator);
