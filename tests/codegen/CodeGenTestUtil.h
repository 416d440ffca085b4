// Shared pieces of the codegen tests: buffers with real kiln_buffer_t descriptors, and short
// builders for hand-written lowered functions.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "codegen/JIT.h"
#include "lang/IR.h"
#include "lang/IROperator.h"
#include "lang/Param.h"
#include "runtime/kiln_runtime.h"
#include "schedule/LoweredFunc.h"

namespace kiln::test {

/// A buffer of T over owned memory; dimension 0 is dense unless strides are given.
template <typename T>
struct TestBuffer {
    std::vector<T> data;
    std::vector<kiln_dimension_t> dims;
    kiln_buffer_t buffer{};
    kiln_buffer_t *pointer = &buffer; ///< argv slots point at this

    explicit TestBuffer(std::vector<int> extents, std::vector<int> mins = {},
                        std::vector<int> strides = {}) {
        mins.resize(extents.size(), 0);
        int64_t size = 1, stride = 1;
        for (size_t d = 0; d < extents.size(); d++) {
            int s = d < strides.size() ? strides[d] : int(stride);
            dims.push_back({mins[d], extents[d], s, 0});
            stride = int64_t(s) * extents[d];
            size = std::max<int64_t>(size, stride);
        }
        data.resize(size_t(size));
        Type t = type_of<T>();
        buffer.host = reinterpret_cast<uint8_t *>(data.data());
        buffer.type = {uint8_t(t.code), uint8_t(t.bits), 1};
        buffer.dimensions = int(extents.size());
        buffer.dim = dims.data();
    }
    // The descriptor points into this object, so it stays where it was made.
    TestBuffer(const TestBuffer &) = delete;
    TestBuffer &operator=(const TestBuffer &) = delete;

    /// Replaces the contents (and so the host pointer) with values.
    void set(std::vector<T> values) {
        data = std::move(values);
        buffer.host = reinterpret_cast<uint8_t *>(data.data());
    }

    /// The element at absolute coordinates.
    T &operator()(std::initializer_list<int> coords) {
        int64_t offset = 0;
        int d = 0;
        for (int c : coords) {
            offset += int64_t(c - dims[d].min) * dims[d].stride;
            d++;
        }
        return data[size_t(offset)];
    }
    T &operator()(int x) { return (*this)({x}); }
    T &operator()(int x, int y) { return (*this)({x, y}); }
};

inline LoweredArgument buffer_arg(const std::string &name, Type t, int dimensions,
                                  bool is_output = false) {
    LoweredArgument a;
    a.name = name;
    a.kind = LoweredArgument::Buffer;
    a.type = t;
    a.dimensions = dimensions;
    a.is_output = is_output;
    return a;
}

inline LoweredArgument scalar_arg(const std::string &name, Type t) {
    LoweredArgument a;
    a.name = name;
    a.kind = LoweredArgument::Scalar;
    a.type = t;
    return a;
}

inline Expr var(const std::string &name, Type t = Int(32)) {
    return Variable::make(t, name);
}

inline Expr min_of(const std::string &buffer, int d = 0) {
    return var(buffer_min_name(buffer, d));
}
inline Expr extent_of(const std::string &buffer, int d = 0) {
    return var(buffer_extent_name(buffer, d));
}
inline Expr stride_of(const std::string &buffer, int d = 0) {
    return var(buffer_stride_name(buffer, d));
}

/// A serial loop over [min, min + extent).
inline Stmt loop(const std::string &name, Expr min, Expr extent, Stmt body,
                 ForType type = ForType::Serial) {
    return For::make(name, std::move(min), std::move(extent), type, std::move(body));
}

/// Runs m's argv entry point on the given argument slots.
inline int run(const JITModule &m, std::vector<void *> args) {
    return m.call(args.data());
}

/// for i in [0, n of `out`): out[i] = value(i), the 1-D pattern many tests share.
inline Stmt for_each_element(const std::string &out, const std::function<Expr(Expr)> &value) {
    Expr i = var("i");
    return loop("i", 0, extent_of(out), Store::make(out, value(i), i));
}

/// A lowered function from its parts.
inline LoweredFunc make_func(const std::string &name, std::vector<LoweredArgument> args,
                             Stmt body) {
    LoweredFunc f;
    f.name = name;
    f.args = std::move(args);
    f.body = std::move(body);
    return f;
}

/// Distance in units in the last place between two floats (0 when both are NaN).
inline int64_t ulp_distance(float a, float b) {
    if (std::isnan(a) && std::isnan(b)) return 0;
    if (std::isnan(a) || std::isnan(b)) return INT64_MAX;
    auto ordered = [](float f) {
        int32_t i;
        std::memcpy(&i, &f, sizeof(i));
        return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
    };
    int64_t d = ordered(a) - ordered(b);
    return d < 0 ? -d : d;
}

} // namespace kiln::test
