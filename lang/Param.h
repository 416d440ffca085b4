// Inputs bound at run time: Param<T> (a scalar) and ImageParam (a typed buffer of known
// dimensionality). Both appear in algorithms as symbols; their values are given when a pipeline
// is realized or called.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lang/Buffer.h"
#include "lang/IR.h"

namespace kiln {

class Func;

/// The shared state of a Param or ImageParam.
struct ParameterContents {
    std::string name;
    Type type;
    bool is_buffer = false;
    int dimensions = 0;
    Expr scalar_value;         ///< the bound value of a scalar (a constant), if set
    Expr min_value, max_value; ///< optional range a scalar must lie in
    BufferBase buffer;         ///< the bound buffer of an image, if set
    /// Creation order in this process (1, 2, ...): a pipeline's default argument order is the
    /// order in which its ImageParams and Params were declared. Copies share the contents.
    uint64_t serial = 0;
    /// ImageParam::set_estimate: the (min, extent) a tuner sizes this image with, by dimension.
    std::map<int, std::pair<int64_t, int64_t>> estimates;
    /// ImageParam::in: the wrappers of this image by consumer name ("" for the wrapper read by
    /// every consumer), as FunctionContents::wrappers. Their calls to the image do not own it.
    std::map<std::string, std::shared_ptr<FunctionContents>> wrappers;
    /// ImageParam::dim(d).set_min / set_extent / set_stride: what a caller promises about the
    /// bound buffer, by dimension. The pipeline checks each at entry (a runtime error naming the
    /// image, the dimension and both values) and uses the value in place of the buffer's field
    /// everywhere else, so a stride known when compiling is a constant in every index.
    std::map<int, Expr> min_constraint, extent_constraint, stride_constraint;
    /// An output's buffer (Func::output_buffer), not an input: its fields are the output's own
    /// symbols, and messages call it an output buffer.
    bool is_output = false;
};

/// Names of the symbols that describe an image parameter's shape in algorithms and lowered code.
std::string buffer_min_name(const std::string &buffer, int dim);
std::string buffer_extent_name(const std::string &buffer, int dim);
std::string buffer_stride_name(const std::string &buffer, int dim);

/// A type-erased scalar parameter.
class Parameter {
public:
    Parameter() = default;
    Parameter(Type t, bool is_buffer, int dimensions, const std::string &name);
    const std::string &name() const { return contents->name; }
    Type type() const { return contents->type; }
    const std::shared_ptr<ParameterContents> &get_contents() const { return contents; }

protected:
    std::shared_ptr<ParameterContents> contents;
};

/// A scalar input of type T; `Param<float> alpha("alpha")` then `f(x) = alpha * in(x)`.
template <typename T>
class Param : public Parameter {
public:
    explicit Param(const std::string &name = "") : Parameter(type_of<T>(), false, 0, name) {}
    Param(const std::string &name, T value) : Param(name) { set(value); }
    void set(T value);
    /// Restricts the values a caller may bind; checked when the pipeline runs.
    void set_range(T min, T max);
    operator Expr() const { return Variable::make(type(), name(), contents); }
};

class ImageParam;
class OutputImageParam;

/// One dimension of an ImageParam or of an output's buffer (Func::output_buffer), as Halide's
/// `Dimension`: its symbolic min, extent and stride, and the promises a caller makes about them.
/// `in.dim(1).set_stride(256)` lets the compiler use 256 wherever the row pitch appears (the
/// broadcasts of a convolution's pixels are then constant offsets from one pointer, not a chain
/// of adds of a run-time stride); a buffer that breaks a promise is refused when the pipeline
/// runs, with a message naming the buffer, the dimension, the promised and the actual value. The
/// values are int32 expressions of constants and Params (and of other dimensions' fields).
/// CompileError for a value of another type or a stride other than 1 for dimension 0 (always dense
/// in kiln).
class Dimension {
public:
    Expr min() const;
    Expr extent() const;
    Expr stride() const;
    /// min() + extent() - 1.
    Expr max() const;
    Dimension set_min(const Expr &min);
    Dimension set_extent(const Expr &extent);
    Dimension set_stride(const Expr &stride);
    /// set_min(min) and set_extent(extent).
    Dimension set_bounds(const Expr &min, const Expr &extent);

private:
    friend class ImageParam;
    friend class OutputImageParam;
    Dimension(std::shared_ptr<ParameterContents> image, int dim)
        : image(std::move(image)), d(dim) {}
    std::shared_ptr<ParameterContents> image;
    int d;
};

/// A buffer input of a given element type and dimensionality.
class ImageParam : public Parameter {
public:
    ImageParam() = default;
    ImageParam(Type t, int dimensions, const std::string &name = "");
    /// A handle to the contents of an existing image (a trace's replay finds images by name).
    explicit ImageParam(std::shared_ptr<ParameterContents> image);
    bool defined() const { return contents != nullptr; }
    int dimensions() const { return contents->dimensions; }
    /// Binds a buffer for evaluation; its type and dimensionality must match.
    void set(const BufferBase &b);
    const BufferBase &get() const { return contents->buffer; }

    /// The region of dimension `dim` the pipeline is expected to be given, as in Halide: what a
    /// tuner allocates for this input, where the region the output reads does not say (an
    /// RDom over the input's own extent). CompileError naming the image for a dimension out of
    /// range or an extent below 1.
    ImageParam &set_estimate(int dim, int64_t min, int64_t extent);
    /// One (min, extent) per dimension, dimension 0 first.
    ImageParam &set_estimates(const std::vector<std::pair<int64_t, int64_t>> &region);

    /// Wrappers (Halide's in()): a Func `B_in_g(_0, _1, ...) = B(_0, _1, ...)`, named after the
    /// image and the consumer, that the consumer reads instead of the image. Its pure Vars are
    /// `_0, _1, ...` (kiln::_0 and on, as in Halide). Unscheduled it is inlined, so nothing
    /// changes; scheduled (compute_at a tile, vectorize, reorder_storage) it copies the part of
    /// the image a tile reads into a buffer of its own, as a packed panel of a matrix. The same
    /// consumer(s) always get the same wrapper. See Func::in for the rules and errors.
    Func in(const Func &consumer);
    /// One wrapper read by each of the consumers (named `B_in_g_h`).
    Func in(const std::vector<Func> &consumers);
    /// A wrapper read by every Func that calls the image (named `B_in`), except the image's
    /// other wrappers and any consumer with a wrapper of its own.
    Func in();

    /// A call at the given coordinates.
    Expr call(const std::vector<Expr> &args) const;
    template <typename... Args>
    Expr operator()(Args... args) const {
        return call(std::vector<Expr>{Expr(args)...});
    }

    /// Symbolic shape of the bound buffer, for use in algorithms and boundary conditions.
    Expr min(int dim) const;
    Expr extent(int dim) const;
    Expr stride(int dim) const;
    Expr width() const { return extent(0); }
    Expr height() const { return extent(1); }
    Expr channels() const { return extent(2); }
    /// Dimension `dim` (0 .. dimensions() - 1): its fields and the promises about them.
    Dimension dim(int dim) const;
};

/// The buffer an output Func is written into (Func::output_buffer, Halide's OutputImageParam):
/// its dimensions, with the same promises an ImageParam takes. `C.output_buffer().dim(1)
/// .set_stride(N)` makes C's row pitch the constant N in every store (no register holding the
/// pitch read at run time); a caller's buffer that breaks the promise is refused when the
/// pipeline runs, with nothing written, naming the buffer, the dimension and both values.
class OutputImageParam : public Parameter {
public:
    OutputImageParam() = default;
    explicit OutputImageParam(std::shared_ptr<ParameterContents> buffer);
    bool defined() const { return contents != nullptr; }
    int dimensions() const { return contents->dimensions; }
    /// Dimension `dim`; CompileError naming the buffer where it has no such dimension.
    Dimension dim(int dim) const;
};

/// Makes the constant of a scalar Param from a C++ value.
Expr make_param_value(Type t, double v, int64_t i, bool is_float);

template <typename T>
void Param<T>::set(T value) {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16_t>) {
        contents->scalar_value = make_param_value(type(), double(value), 0, true);
    } else {
        contents->scalar_value = make_param_value(type(), 0, int64_t(value), false);
    }
}

template <typename T>
void Param<T>::set_range(T min, T max) {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16_t>) {
        contents->min_value = make_param_value(type(), double(min), 0, true);
        contents->max_value = make_param_value(type(), double(max), 0, true);
    } else {
        contents->min_value = make_param_value(type(), 0, int64_t(min), false);
        contents->max_value = make_param_value(type(), 0, int64_t(max), false);
    }
}

} // namespace kiln
