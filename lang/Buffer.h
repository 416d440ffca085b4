// Buffer<T>: a dense array of up to 8 dimensions with a min, extent and stride per dimension,
// either owning aligned memory or wrapping memory the user owns. Used as concrete inputs of an
// algorithm and as outputs of a realization. Dimension 0 is the innermost (fastest varying).
#pragma once

#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "lang/Error.h"
#include "lang/IR.h"

namespace kiln {

struct Target;

struct BufferDim {
    int min = 0;
    int extent = 0;
    int stride = 0; ///< in elements
};

/// The shared state behind a Buffer handle; several handles may view the same memory.
struct BufferContents {
    std::string name;
    Type type;
    std::vector<BufferDim> dims;
    uint8_t *host = nullptr;
    std::shared_ptr<uint8_t> allocation; ///< set when the buffer owns its memory

    /// The device copy, as in the runtime's kiln_buffer_t: handle (0 for none), the
    /// kiln_device_interface_t that owns it, and kiln_buffer_flag_t bits (host/device dirty).
    uint64_t device = 0;
    const void *device_interface = nullptr;
    uint64_t device_flags = 0;
    /// Set by the code that made the device copy (driver/Pipeline.cpp, which links the
    /// runtime): copies a newer device copy back to the host; frees the device copy.
    void (*device_copy_back)(BufferContents *) = nullptr;
    void (*device_release)(BufferContents *) = nullptr;

    BufferContents() = default;
    BufferContents(const BufferContents &) = delete;
    BufferContents &operator=(const BufferContents &) = delete;
    ~BufferContents() {
        if (device && device_release) device_release(this);
    }
    /// Before the host touches the data through Buffer<T>: brings back a newer device copy and
    /// marks the host copy as possibly changed (Halide's rule for non-const element access).
    void host_access() {
        if (!device) return;
        if ((device_flags & 2) && device_copy_back) device_copy_back(this);
        device_flags |= 1;
    }

    /// Number of elements (product of extents).
    int64_t number_of_elements() const;
    /// The byte offset of a coordinate, or a RuntimeError naming the buffer if it is outside.
    int64_t offset_of(const int *coords, int n) const;
};

/// A type-erased buffer handle; Buffer<T> adds typed access.
class BufferBase {
public:
    BufferBase() = default;
    /// A handle to existing buffer contents.
    explicit BufferBase(std::shared_ptr<BufferContents> c) : contents(std::move(c)) {}
    /// A new, zero-filled, 64-byte aligned buffer with the given extents and mins of zero.
    BufferBase(Type t, const std::vector<int> &extents, const std::string &name = "");
    /// Wraps memory owned by the caller; dense strides unless given.
    BufferBase(Type t, void *data, const std::vector<int> &extents, const std::string &name = "");
    BufferBase(Type t, void *data, const std::vector<BufferDim> &dims,
               const std::string &name = "");

    bool defined() const { return contents != nullptr; }
    Type type() const { return get()->type; }
    const std::string &name() const { return get()->name; }
    int dimensions() const { return int(get()->dims.size()); }
    const BufferDim &dim(int i) const;
    int width() const { return dimensions() > 0 ? dim(0).extent : 1; }
    int height() const { return dimensions() > 1 ? dim(1).extent : 1; }
    int channels() const { return dimensions() > 2 ? dim(2).extent : 1; }
    int64_t number_of_elements() const { return get()->number_of_elements(); }
    uint8_t *raw_data() const { return get()->host; }
    /// Sets the min coordinate of each dimension (the data does not move).
    void set_min(const std::vector<int> &mins);
    /// Address of the element at the given coordinates, checked against the bounds.
    uint8_t *address_of(const std::vector<int> &coords) const;
    /// Calls fn with the offset, in elements from raw_data(), of every element, following the
    /// strides (so wrapped, non-dense memory is visited correctly), dimension 0 fastest.
    void for_each_offset(const std::function<void(int64_t)> &fn) const;
    const std::shared_ptr<BufferContents> &get_contents() const { return contents; }

    /// Device copies (defined in driver/Pipeline.cpp; a program calling them links `kiln`).
    /// Allocates a device copy for target's GPU API and copies the host data when the device
    /// copy is missing or stale.
    void copy_to_device(const Target &target);
    /// Copies the device copy back when it is newer than the host's.
    void copy_to_host();
    /// Frees the device copy (without copying it back).
    void device_free();
    bool has_device_allocation() const { return get()->device != 0; }
    bool host_dirty() const { return (get()->device_flags & 1) != 0; }
    bool device_dirty() const { return (get()->device_flags & 2) != 0; }
    /// Marks host data as changed (or not) since the last copy to the device.
    void set_host_dirty(bool dirty = true) {
        get()->device_flags = dirty ? get()->device_flags | 1 : get()->device_flags & ~uint64_t(1);
    }
    /// The buffer as an input of an algorithm: a call at the given coordinates.
    Expr call(const std::vector<Expr> &args) const;

protected:
    std::shared_ptr<BufferContents> contents;
    BufferContents *get() const {
        if (!contents) user_error("use of an undefined Buffer");
        return contents.get();
    }
};

template <typename T = void>
class Buffer : public BufferBase {
public:
    Buffer() = default;
    /// A typed view of a BufferBase; the types must agree.
    Buffer(const BufferBase &b) : BufferBase(b) {
        if constexpr (!std::is_void_v<T>) {
            if (b.defined() && b.type() != type_of<T>()) {
                user_error("buffer '", b.name(), "' holds ", b.type(), ", not ", type_of<T>());
            }
        }
    }
    template <typename... Ints,
              typename = std::enable_if_t<(std::is_integral_v<Ints> && ...) && !std::is_void_v<T>>>
    explicit Buffer(int first, Ints... rest)
        : BufferBase(type_of<T>(), std::vector<int>{first, int(rest)...}) {}
    explicit Buffer(const std::vector<int> &extents, const std::string &name = "")
        : BufferBase(type_of<T>(), extents, name) {}
    /// `Buffer<float> b({w, h})`: without it the braces would also match the copy constructor.
    explicit Buffer(std::initializer_list<int> extents, const std::string &name = "")
        : BufferBase(type_of<T>(), std::vector<int>(extents), name) {}
    Buffer(Type t, const std::vector<int> &extents, const std::string &name = "")
        : BufferBase(t, extents, name) {}
    /// Wraps caller-owned memory laid out densely with dimension 0 innermost.
    Buffer(T *data, const std::vector<int> &extents, const std::string &name = "")
        : BufferBase(type_of<T>(), data, extents, name) {}

    /// The host data; brings back a newer device copy first and marks the host copy dirty.
    T *data() const {
        get()->host_access();
        return reinterpret_cast<T *>(raw_data());
    }

    /// Element access with integer coordinates, or a call in an algorithm with Expr coordinates.
    template <typename... Args>
    decltype(auto) operator()(Args... args) const {
        if constexpr ((std::is_integral_v<Args> && ...)) {
            static_assert(!std::is_void_v<T>, "element access needs a typed Buffer<T>");
            get()->host_access();
            return *reinterpret_cast<T *>(address_of(std::vector<int>{int(args)...}));
        } else {
            return call(std::vector<Expr>{Expr(args)...});
        }
    }
    Expr operator()(const std::vector<Expr> &args) const { return call(args); }

    /// Sets every element to v (only the elements: gaps between strided rows are left alone).
    template <typename U = T>
    requires(!std::is_void_v<U>) void fill(std::type_identity_t<U> v) {
        U *p = data();
        for_each_offset([&](int64_t offset) { p[offset] = v; });
    }
};

} // namespace kiln
