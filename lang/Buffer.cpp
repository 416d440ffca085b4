#include "lang/Buffer.h"

#include <cstdlib>

#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Var.h"

namespace kiln {

namespace {
/// "1 argument", "2 arguments": a count with its noun, for messages.
std::string count(size_t n, const std::string &noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

constexpr int max_dimensions = 8;

std::vector<BufferDim> dense_dims(const std::vector<int> &extents, const std::string &name) {
    if (extents.size() > max_dimensions) {
        user_error("buffer '", name, "' has ", extents.size(), " dimensions; at most ",
                   max_dimensions, " are supported");
    }
    std::vector<BufferDim> dims;
    int64_t stride = 1;
    for (size_t i = 0; i < extents.size(); i++) {
        if (extents[i] < 0) {
            user_error("buffer '", name, "' dimension ", i, ": extent must be >= 0, got ",
                       extents[i]);
        }
        if (stride > INT32_MAX) user_error("buffer '", name, "' is too large for int32 strides");
        dims.push_back({0, extents[i], int(stride)});
        stride *= std::max(extents[i], 1);
    }
    return dims;
}
} // namespace

int64_t BufferContents::number_of_elements() const {
    int64_t n = 1;
    for (const BufferDim &d : dims)
        n *= d.extent;
    return n;
}

int64_t BufferContents::offset_of(const int *coords, int n) const {
    if (n != int(dims.size())) {
        std::string access;
        for (int j = 0; j < n; j++)
            access += (j ? ", " : "") + std::to_string(coords[j]);
        runtime_error("buffer '", name, "': access (", access, ") gives ", count(n, "coordinate"),
                      ", but the buffer has ", count(dims.size(), "dimension"));
    }
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const BufferDim &d = dims[i];
        if (coords[i] < d.min || int64_t(coords[i]) >= int64_t(d.min) + d.extent) {
            std::string access;
            for (int j = 0; j < n; j++)
                access += (j ? ", " : "") + std::to_string(coords[j]);
            runtime_error("buffer '", name, "': access (", access, ") is out of bounds: dimension ",
                          i, " covers [", d.min, ", ", int64_t(d.min) + d.extent - 1, "], got ",
                          coords[i]);
        }
        offset += int64_t(coords[i] - d.min) * d.stride;
    }
    return offset * type.bytes();
}

BufferBase::BufferBase(Type t, const std::vector<int> &extents, const std::string &name) {
    contents = std::make_shared<BufferContents>();
    contents->name = name.empty() ? unique_name("buffer") : name;
    contents->type = t;
    contents->dims = dense_dims(extents, contents->name);
    size_t bytes = size_t(std::max<int64_t>(contents->number_of_elements(), 1)) * t.bytes();
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = std::aligned_alloc(64, rounded);
    if (!p)
        runtime_error("buffer '", contents->name, "': out of memory allocating ", bytes, " bytes");
    std::memset(p, 0, rounded);
    contents->allocation = std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p), std::free);
    contents->host = contents->allocation.get();
}

BufferBase::BufferBase(Type t, void *data, const std::vector<int> &extents, const std::string &name)
    : BufferBase(t, data, dense_dims(extents, name), name) {}

BufferBase::BufferBase(Type t, void *data, const std::vector<BufferDim> &dims,
                       const std::string &name) {
    contents = std::make_shared<BufferContents>();
    contents->name = name.empty() ? unique_name("buffer") : name;
    if (!data) user_error("buffer '", contents->name, "': cannot wrap a null pointer");
    contents->type = t;
    contents->dims = dims;
    contents->host = static_cast<uint8_t *>(data);
}

const BufferDim &BufferBase::dim(int i) const {
    if (i < 0 || i >= dimensions()) {
        user_error("dimension ", i, " of buffer '", name(), "' does not exist; it has ",
                   count(dimensions(), "dimension"));
    }
    return get()->dims[i];
}

void BufferBase::set_min(const std::vector<int> &mins) {
    if (int(mins.size()) != dimensions()) {
        user_error("set_min of buffer '", name(), "' got ", count(mins.size(), "min"),
                   ", but the buffer has ", count(dimensions(), "dimension"));
    }
    for (size_t i = 0; i < mins.size(); i++)
        get()->dims[i].min = mins[i];
}

void BufferBase::for_each_offset(const std::function<void(int64_t)> &fn) const {
    const std::vector<BufferDim> &dims = get()->dims;
    for (const BufferDim &d : dims) {
        if (d.extent <= 0) return;
    }
    std::vector<int> pos(dims.size(), 0);
    int64_t offset = 0;
    while (true) {
        fn(offset);
        // Advance the innermost dimension, carrying into outer ones like an odometer.
        size_t i = 0;
        for (; i < dims.size(); i++) {
            offset += dims[i].stride;
            if (++pos[i] < dims[i].extent) break;
            offset -= int64_t(dims[i].stride) * dims[i].extent;
            pos[i] = 0;
        }
        if (i == dims.size()) return;
    }
}

uint8_t *BufferBase::address_of(const std::vector<int> &coords) const {
    return raw_data() + get()->offset_of(coords.data(), int(coords.size()));
}

Expr BufferBase::call(const std::vector<Expr> &args) const {
    std::string site = name() + "(";
    for (size_t i = 0; i < args.size(); i++)
        site += (i ? ", " : "") + to_string(args[i]);
    site += ")";
    if (int(args.size()) != dimensions()) {
        user_error("call ", site, " gives ", count(args.size(), "argument"), ", but buffer '",
                   name(), "' has ", count(dimensions(), "dimension"));
    }
    std::vector<Expr> int_args;
    for (size_t i = 0; i < args.size(); i++) {
        const Expr &a = args[i];
        if (!a.defined() || !a.type().is_int_or_uint() || a.type().is_vector()) {
            user_error("argument ", i, " of ", site, " (buffer '", name(),
                       "') must be a scalar integer, got ",
                       a.defined() ? to_string(a) : "(undefined)", " of type ",
                       a.defined() ? a.type().to_string() : "none",
                       "; convert it with cast<int>(...), or cast<int>(floor(...)) to round down");
        }
        int_args.push_back(cast(Int(32), a));
    }
    return Call::make(type(), name(), std::move(int_args), Call::Image, nullptr, 0, nullptr,
                      contents);
}

} // namespace kiln
