// Operators written as kiln's users write them, for tests of the automatic spaces.
#pragma once

#include "apps/Builtin.h"
#include "apps/Operator.h"
#include "lang/Buffer.h"
#include "lang/Func.h"
#include "lang/Param.h"

namespace kiln::autotune_test {

// A matmul written as its users write one, with no packing Func: C(j, i) = sum over k of
// A(k, i) * B(j, k). The automatic space packs the inputs the reduction reads with wrappers.
inline apps::Operator plain_matmul() {
    apps::Operator op;
    op.name = "plain_matmul";
    op.shape_names = {"M", "N", "K"};
    op.make = [](const std::vector<int64_t> &shape) {
        apps::OperatorInstance inst;
        inst.shape = shape;
        const int m = int(shape[0]), n = int(shape[1]), k_extent = int(shape[2]);
        ImageParam A(Float(32), 2, "A"), B(Float(32), 2, "B");
        Var j("j"), i("i");
        RDom k(0, k_extent, "k");
        Func C("C");
        C(j, i) = 0.f;
        C(j, i) += A(k, i) * B(j, k);
        inst.inputs = {A, B};
        inst.input_data = {apps::random_buffer(Float(32), {k_extent, m}, "A", 1, -1, 1),
                           apps::random_buffer(Float(32), {n, k_extent}, "B", 2, -1, 1)};
        inst.output = C;
        inst.output_extents = {n, m};
        return inst;
    };
    op.reference = [](const apps::OperatorInstance &inst) {
        Buffer<float> A(inst.input_data[0]), B(inst.input_data[1]);
        const int m = int(inst.shape[0]), n = int(inst.shape[1]), k_extent = int(inst.shape[2]);
        Buffer<float> C({n, m}, "C");
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                float acc = 0.f;
                for (int k = 0; k < k_extent; k++)
                    acc += A(k, i) * B(j, k);
                C(j, i) = acc;
            }
        }
        return BufferBase(C);
    };
    return op;
}

} // namespace kiln::autotune_test
