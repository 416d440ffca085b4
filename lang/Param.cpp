#include "lang/Param.h"

#include <atomic>
#include <cstdint>

#include "lang/Error.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Simplify.h"
#include "lang/Var.h"

namespace kiln {

namespace {
/// "1 argument", "2 arguments": a count with its noun, for messages.
std::string count(size_t n, const std::string &noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}
} // namespace

std::string buffer_min_name(const std::string &buffer, int dim) {
    return buffer + ".min." + std::to_string(dim);
}
std::string buffer_extent_name(const std::string &buffer, int dim) {
    return buffer + ".extent." + std::to_string(dim);
}
std::string buffer_stride_name(const std::string &buffer, int dim) {
    return buffer + ".stride." + std::to_string(dim);
}

Parameter::Parameter(Type t, bool is_buffer, int dimensions, const std::string &name) {
    contents = std::make_shared<ParameterContents>();
    contents->name = name.empty() ? unique_name(is_buffer ? "input" : "p") : name;
    contents->type = t;
    contents->is_buffer = is_buffer;
    contents->dimensions = dimensions;
    static std::atomic<uint64_t> next_serial{1};
    contents->serial = next_serial++;
}

Expr make_param_value(Type t, double v, int64_t i, bool is_float) {
    return is_float ? make_const(t, v) : make_const(t, i);
}

ImageParam::ImageParam(Type t, int dimensions, const std::string &name)
    : Parameter(t, true, dimensions, name) {
    if (dimensions < 0 || dimensions > 8) {
        user_error("dimensions of ImageParam '", contents->name, "' must be in [0, 8], got ",
                   dimensions);
    }
}

ImageParam::ImageParam(std::shared_ptr<ParameterContents> image) {
    internal_assert(image && image->is_buffer, "ImageParam made from the contents of a scalar");
    contents = std::move(image);
}

ImageParam &ImageParam::set_estimate(int dim, int64_t min, int64_t extent) {
    if (dim < 0 || dim >= dimensions()) {
        user_error("set_estimate: ImageParam '", name(), "' has ", dimensions(),
                   " dimensions, so there is no dimension ", dim, "; give 0..", dimensions() - 1);
    }
    if (extent < 1 || extent > INT32_MAX || min < INT32_MIN || min > INT32_MAX - extent) {
        user_error("set_estimate: the estimate of dimension ", dim, " of ImageParam '", name(),
                   "' is min ", min, " extent ", extent,
                   "; give an extent of at least 1 and a region inside 32-bit coordinates");
    }
    contents->estimates[dim] = {min, extent};
    return *this;
}

ImageParam &ImageParam::set_estimates(const std::vector<std::pair<int64_t, int64_t>> &region) {
    if (int(region.size()) != dimensions()) {
        user_error("set_estimates: ImageParam '", name(), "' has ", dimensions(),
                   " dimensions, but ", region.size(),
                   " estimates were given; give one {min, extent} per dimension");
    }
    for (size_t d = 0; d < region.size(); d++)
        set_estimate(int(d), region[d].first, region[d].second);
    return *this;
}

void ImageParam::set(const BufferBase &b) {
    if (!b.defined()) user_error("cannot bind an undefined buffer to ImageParam '", name(), "'");
    if (b.type() != type()) {
        user_error("cannot bind buffer '", b.name(), "' of ", b.type(), " to ImageParam '", name(),
                   "' of ", type(), "; bind a buffer of ", type());
    }
    if (b.dimensions() != dimensions()) {
        user_error("cannot bind buffer '", b.name(), "' with ", b.dimensions(),
                   " dimensions to ImageParam '", name(), "', which has ", dimensions(),
                   "; bind a buffer with ", dimensions(), " dimensions");
    }
    contents->buffer = b;
}

Expr ImageParam::call(const std::vector<Expr> &args) const {
    if (!contents) user_error("use of an undefined ImageParam");
    std::string site = name() + "(";
    for (size_t i = 0; i < args.size(); i++)
        site += (i ? ", " : "") + to_string(args[i]);
    site += ")";
    if (int(args.size()) != dimensions()) {
        user_error("call ", site, " gives ", count(args.size(), "argument"), ", but ImageParam '",
                   name(), "' has ", count(dimensions(), "dimension"));
    }
    std::vector<Expr> int_args;
    for (size_t i = 0; i < args.size(); i++) {
        const Expr &a = args[i];
        if (!a.defined() || !a.type().is_int_or_uint() || a.type().is_vector()) {
            user_error("argument ", i, " of ", site, " must be a scalar integer, got ",
                       a.defined() ? to_string(a) : "(undefined)", " of type ",
                       a.defined() ? a.type().to_string() : "none",
                       "; convert it with cast<int>(...), or cast<int>(floor(...)) to round down");
        }
        int_args.push_back(cast(Int(32), a));
    }
    return Call::make(type(), name(), std::move(int_args), Call::Image, nullptr, 0, contents);
}

namespace {
void check_dim(const ImageParam &p, int dim) {
    if (dim < 0 || dim >= p.dimensions()) {
        user_error("dimension ", dim, " of ImageParam '", p.name(), "' does not exist; it has ",
                   count(p.dimensions(), "dimension"));
    }
}
} // namespace

Expr ImageParam::min(int dim) const {
    check_dim(*this, dim);
    return Variable::make(Int(32), buffer_min_name(name(), dim), contents);
}

Expr ImageParam::extent(int dim) const {
    check_dim(*this, dim);
    return Variable::make(Int(32), buffer_extent_name(name(), dim), contents);
}

Expr ImageParam::stride(int dim) const {
    check_dim(*this, dim);
    return Variable::make(Int(32), buffer_stride_name(name(), dim), contents);
}

Dimension ImageParam::dim(int dim) const {
    check_dim(*this, dim);
    return Dimension(contents, dim);
}

OutputImageParam::OutputImageParam(std::shared_ptr<ParameterContents> buffer) {
    internal_assert(buffer && buffer->is_buffer && buffer->is_output,
                    "OutputImageParam made from the contents of an input");
    contents = std::move(buffer);
}

Dimension OutputImageParam::dim(int dim) const {
    if (dim < 0 || dim >= dimensions()) {
        user_error("dimension ", dim, " of the output buffer '", name(),
                   "' does not exist; it has ", count(dimensions(), "dimension"));
    }
    return Dimension(contents, dim);
}

namespace {
/// What a buffer is, in messages: "ImageParam 'in'" or "output buffer 'C'".
std::string describe(const ParameterContents &image) {
    return (image.is_output ? "output buffer '" : "ImageParam '") + image.name + "'";
}

/// A promise's value as an int32 expression; CompileError naming the field otherwise.
Expr promise(const ParameterContents &image, int dim, const char *what, const Expr &value) {
    if (!value.defined() || !value.type().is_int_or_uint() || value.type().is_vector()) {
        user_error("set_", what, ": the ", what, " of dimension ", dim, " of ", describe(image),
                   " must be a scalar integer, got ",
                   value.defined() ? to_string(value) : "(undefined)", " of type ",
                   value.defined() ? value.type().to_string() : "none");
    }
    return simplify(cast(Int(32), value));
}
} // namespace

// An output's fields are symbols of the pipeline's output argument, not of an input image to
// collect: their Variables carry no parameter.
Expr Dimension::min() const {
    return Variable::make(Int(32), buffer_min_name(image->name, d),
                          image->is_output ? nullptr : image);
}
Expr Dimension::extent() const {
    return Variable::make(Int(32), buffer_extent_name(image->name, d),
                          image->is_output ? nullptr : image);
}
Expr Dimension::stride() const {
    return Variable::make(Int(32), buffer_stride_name(image->name, d),
                          image->is_output ? nullptr : image);
}
Expr Dimension::max() const {
    return min() + extent() - 1;
}

Dimension Dimension::set_min(const Expr &min) {
    image->min_constraint[d] = promise(*image, d, "min", min);
    return *this;
}

Dimension Dimension::set_extent(const Expr &extent) {
    Expr e = promise(*image, d, "extent", extent);
    if (auto v = as_const_int(e); v && *v < 1) {
        user_error("set_extent: the extent of dimension ", d, " of ", describe(*image),
                   " must be at least 1, got ", *v);
    }
    image->extent_constraint[d] = e;
    return *this;
}

Dimension Dimension::set_stride(const Expr &stride) {
    Expr s = promise(*image, d, "stride", stride);
    if (d == 0 && !is_const(s, 1)) {
        user_error("set_stride: dimension 0 of ", describe(*image),
                   " always has stride 1 in kiln (its elements are dense), so it cannot be ",
                   to_string(s), "; make the dense dimension the first");
    }
    image->stride_constraint[d] = s;
    return *this;
}

Dimension Dimension::set_bounds(const Expr &min, const Expr &extent) {
    set_min(min);
    return set_extent(extent);
}

} // namespace kiln
