// Operators that fail on purpose, for the tuner's failure tests (hidden from listings):
//  - test_crash: its input buffer's data pointer points into a reserved, inaccessible region of
//    address space (mmap PROT_NONE). The descriptor's mins, extents and strides are sane, so
//    kiln's entry checks pass, and the first load of any schedule raises SIGSEGV. The reference
//    never reads the input: it returns what the algorithm would compute (zeros) from the shape.
//  - test_hang: each output adds its input R * R times, R = 2^20 by default (10^12 dependent
//    float adds per point): any schedule runs for hours. At a small R it finishes and matches its
//    reference.
//  - test_wrong: the reference doubles the input where the algorithm triples it, so every
//    schedule gives a wrong answer.
#include <sys/mman.h>

#include "apps/Builtin.h"
#include "lang/IROperator.h"

namespace kiln::apps {

namespace {

/// A buffer whose data cannot be read: a PROT_NONE mapping kept alive by the buffer.
BufferBase unreadable_buffer(const std::vector<int> &extents, const std::string &name) {
    size_t bytes = sizeof(float);
    for (int e : extents)
        bytes *= size_t(e);
    bytes = std::max<size_t>(bytes, 4096);
    void *p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) runtime_error("test_crash: cannot reserve ", bytes, " bytes");
    BufferBase b(Float(32), p, extents, name);
    auto unmap = [bytes](uint8_t *q) { munmap(q, bytes); };
    b.get_contents()->allocation = std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p), unmap);
    return b;
}

Operator crash_operator() {
    Operator op;
    op.name = "test_crash";
    op.description = "test only: every schedule segfaults (its input is unreadable memory)";
    op.shape_names = {"W", "H"};
    op.default_shape = {256, 256};
    op.make = [](const std::vector<int64_t> &shape) {
        int W = shape_extent("test_crash", "W", shape[0]);
        int H = shape_extent("test_crash", "H", shape[1]);
        OperatorInstance inst;
        inst.shape = shape;
        ImageParam in(Float(32), 2, "in");
        Var x("x"), y("y");
        Func out("test_crash");
        out(x, y) = in(x, y) * 0.f;
        inst.inputs = {in};
        inst.input_data = {unreadable_buffer({W, H}, "in")};
        inst.output = out;
        inst.output_extents = {W, H};
        return inst;
    };
    op.hand_schedule = [](OperatorInstance &inst, const Target &) {
        Var x("x"), y("y");
        inst.output.vectorize(x, 16).parallel(y);
    };
    op.reference = [](const OperatorInstance &inst) {
        return BufferBase(Float(32), inst.output_extents, "test_crash");
    };
    op.work = [](const std::vector<int64_t> &s) { return 8.0 * double(s[0]) * double(s[1]); };
    op.work_unit = "GB/s";
    op.tolerance = 0; // never reached: the kernel crashes
    op.test_only = true;
    return op;
}

Operator hang_operator() {
    Operator op;
    op.name = "test_hang";
    op.description = "test only: every schedule runs for hours (R * R dependent adds per output)";
    op.shape_names = {"W", "R"};
    op.default_shape = {16, 1 << 20};
    op.make = [](const std::vector<int64_t> &shape) {
        int W = shape_extent("test_hang", "W", shape[0]);
        int R = shape_extent("test_hang", "R", shape[1]);
        OperatorInstance inst;
        inst.shape = shape;
        ImageParam in(Float(32), 1, "in");
        Var x("x");
        RDom r({{0, R}, {0, R}}, "r");
        Func out("test_hang");
        // Strict float addition is not associative, so neither kiln nor LLVM may turn the R * R
        // additions into a multiplication: they run one after the other.
        out(x) = 0.f;
        out(x) = out(x) + (in(x) + cast(Float(32), (r.x + r.y) % 2));
        inst.inputs = {in};
        inst.input_data = {random_buffer(Float(32), {W}, "in", 61, 0, 1)};
        inst.output = out;
        inst.output_extents = {W};
        return inst;
    };
    op.hand_schedule = [](OperatorInstance &inst, const Target &) {
        Var x("x");
        inst.output.update(0).parallel(x);
    };
    op.reference = [](const OperatorInstance &inst) {
        int W = int(inst.shape[0]);
        int64_t R = inst.shape[1];
        const float *in = reinterpret_cast<const float *>(inst.input_data[0].raw_data());
        BufferBase out(Float(32), {W}, "test_hang");
        float *o = reinterpret_cast<float *>(out.raw_data());
        for (int x = 0; x < W; x++) {
            float acc = 0;
            for (int64_t ry = 0; ry < R; ry++) {
                for (int64_t rx = 0; rx < R; rx++)
                    acc = acc + (in[x] + float((rx + ry) % 2));
            }
            o[x] = acc;
        }
        return out;
    };
    op.work = [](const std::vector<int64_t> &s) {
        return double(s[0]) * double(s[1]) * double(s[1]) * 1.0;
    };
    op.work_unit = "GF/s";
    // The same float additions in the same order: exact.
    op.tolerance = 0;
    op.test_only = true;
    return op;
}

Operator wrong_operator() {
    Operator op;
    op.name = "test_wrong";
    op.description = "test only: the reference disagrees with the algorithm (every run is wrong)";
    op.shape_names = {"W", "H"};
    op.default_shape = {256, 256};
    op.make = [](const std::vector<int64_t> &shape) {
        int W = shape_extent("test_wrong", "W", shape[0]);
        int H = shape_extent("test_wrong", "H", shape[1]);
        OperatorInstance inst;
        inst.shape = shape;
        ImageParam in(Float(32), 2, "in");
        Var x("x"), y("y");
        Func out("test_wrong");
        out(x, y) = in(x, y) * 3.f + 1.f;
        inst.inputs = {in};
        inst.input_data = {random_buffer(Float(32), {W, H}, "in", 71, 0, 1)};
        inst.output = out;
        inst.output_extents = {W, H};
        return inst;
    };
    op.hand_schedule = [](OperatorInstance &inst, const Target &target) {
        Var x("x"), y("y");
        inst.output.vectorize(x, std::max(1, target.vector_bits / 32)).parallel(y);
    };
    // Deliberately not the algorithm: 2 * in where the algorithm computes 3 * in + 1, so every
    // output differs by at least 1.
    op.reference = [](const OperatorInstance &inst) {
        const BufferBase &in = inst.input_data[0];
        BufferBase out(Float(32), inst.output_extents, "test_wrong");
        const float *i = reinterpret_cast<const float *>(in.raw_data());
        float *o = reinterpret_cast<float *>(out.raw_data());
        for (int64_t p = 0; p < out.number_of_elements(); p++)
            o[p] = 2.f * i[p];
        return out;
    };
    op.work = [](const std::vector<int64_t> &s) { return 8.0 * double(s[0]) * double(s[1]); };
    op.work_unit = "GB/s";
    op.tolerance = 1e-6;
    op.test_only = true;
    return op;
}

} // namespace

std::vector<Operator> test_only_operators() {
    return {crash_operator(), hang_operator(), wrong_operator()};
}

} // namespace kiln::apps
