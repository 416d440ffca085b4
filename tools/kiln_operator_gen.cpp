// A generator for the operators that ship with kiln (apps/): builds one at a shape, applies its
// hand schedule for the target (or leaves the default schedule) and compiles it ahead of time.
//
//   kiln_add_kernel(NAME mm GENERATOR kiln::operator_gen
//                   PARAMS op=matmul shape=256x256x256 schedule=hand)
//
// Parameters: op (required; `kiln list` shows the names), shape (the operator's default when
// absent; "MxNxK" or "M,N,K"), schedule (hand or default; hand when absent).
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
    kiln::apps::OperatorInstance inst = op.make(kiln::apps::parse_shape(op, shape));
    if (schedule == "hand") {
        op.hand_schedule(inst, ctx.target());
    } else if (schedule != "default") {
        kiln::user_error("operator generator: schedule must be hand or default, got '", schedule,
                         "'");
    }
    // The kernel takes the inputs in the operator's argument order, then the output.
    std::vector<std::string> order;
    for (const kiln::ImageParam &in : inst.inputs)
        order.push_back(in.name());
    ctx.set_argument_order(order);
    return inst.pipeline();
}

} // namespace

KILN_REGISTER_GENERATOR(kiln_operator, make_operator);
