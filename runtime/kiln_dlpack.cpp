// DLPack conversions. Both directions describe the same memory; nothing is copied or owned.
#include "runtime/kiln_dlpack.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// kDLBool joined DLPack in version 0.8; the installed header may predate it, but the value is
// fixed by the standard, and frameworks store bools as one byte.
constexpr uint8_t dlpack_bool_code = 6;
constexpr uint8_t dlpack_bool_bits = 8;

const char *device_name(int type) {
    switch (type) {
    case kDLCPU:
        return "CPU";
    case kDLCUDA:
        return "CUDA";
    case kDLCUDAHost:
        return "CUDA host";
    case kDLOpenCL:
        return "OpenCL";
    case kDLVulkan:
        return "Vulkan";
    case kDLMetal:
        return "Metal";
    case kDLROCM:
        return "ROCm";
    case kDLCUDAManaged:
        return "CUDA managed";
    default:
        return "unknown";
    }
}

const char *dlpack_code_name(int code) {
    switch (code) {
    case kDLOpaqueHandle:
        return "opaque handle";
    case kDLComplex:
        return "complex";
    default:
        return "unknown";
    }
}

// The CUDA device kiln uses (KILN_CUDA_DEVICE, default 0; see kiln_cuda_device_interface).
int cuda_device_ordinal() {
    const char *text = std::getenv("KILN_CUDA_DEVICE");
    return text && *text ? std::atoi(text) : 0;
}

// The CUDA interface when its driver loads and has a device, else NULL; a failed probe leaves
// this thread's last error message as it was (the conversion itself succeeds).
const kiln_device_interface_t *cuda_interface_if_available() {
    char saved[1024];
    std::snprintf(saved, sizeof(saved), "%s", kiln_last_error_message());
    const kiln_device_interface_t *cuda = kiln_cuda_device_interface();
    if (cuda->device_limits(nullptr, nullptr) == kiln_success) return cuda;
    if (saved[0])
        kiln_error(kiln_success, "%s", saved);
    else
        kiln_clear_error();
    return nullptr;
}

} // namespace

extern "C" {

int kiln_buffer_from_dltensor(const DLTensor *t, kiln_buffer_t *out, kiln_dimension_t *dims_storage,
                              int max_dims) {
    const char *fn = "kiln_buffer_from_dltensor";
    if (!t || !out)
        return kiln_error(kiln_error_buffer_argument_null, "%s: the %s is null", fn,
                          t ? "output buffer" : "tensor");
    int device_type = t->device.device_type;
    bool on_device = device_type == kDLOpenCL || device_type == kDLCUDA;
    if (device_type != kDLCPU && !on_device)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: only CPU, CUDA and OpenCL tensors are supported, got device type "
                          "%d (%s)",
                          fn, device_type, device_name(device_type));
    if (device_type == kDLOpenCL && t->device.device_id != 0)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the %s tensor is on device %d; kiln uses device 0 only", fn,
                          device_name(device_type), static_cast<int>(t->device.device_id));
    if (device_type == kDLCUDA && t->device.device_id != cuda_device_ordinal())
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the CUDA tensor is on device %d; kiln uses CUDA device %d "
                          "(KILN_CUDA_DEVICE)",
                          fn, static_cast<int>(t->device.device_id), cuda_device_ordinal());
    if (device_type == kDLOpenCL && t->byte_offset != 0)
        return kiln_error(kiln_error_device_unavailable,
                          "%s: the OpenCL tensor has byte_offset %llu; a cl_mem cannot be offset, "
                          "so it must be 0",
                          fn, static_cast<unsigned long long>(t->byte_offset));
    if (t->ndim < 0 || t->ndim > max_dims || (t->ndim > 0 && (!dims_storage || !t->shape)))
        return kiln_error(kiln_error_bad_dimensions,
                          "%s: the tensor has %d dimensions but dims_storage has room for %d", fn,
                          t->ndim, dims_storage ? max_dims : 0);

    kiln_type_t type = {0, t->dtype.bits, t->dtype.lanes};
    switch (t->dtype.code) {
    case kDLInt:
        type.code = kiln_type_int;
        break;
    case kDLUInt:
        type.code = kiln_type_uint;
        break;
    case kDLFloat:
        type.code = kiln_type_float;
        break;
    case kDLBfloat:
        type.code = kiln_type_bfloat;
        break;
    case dlpack_bool_code:
        if (t->dtype.bits != dlpack_bool_bits)
            return kiln_error(kiln_error_bad_type, "%s: bool tensors must have 8 bits, got %d", fn,
                              t->dtype.bits);
        type = {kiln_type_bool, 1, t->dtype.lanes};
        break;
    default:
        return kiln_error(kiln_error_bad_type, "%s: DLPack type code %d (%s) is not supported", fn,
                          t->dtype.code, dlpack_code_name(t->dtype.code));
    }
    if (t->dtype.bits == 0 || t->dtype.lanes == 0)
        return kiln_error(kiln_error_bad_type, "%s: the tensor type has %d bits and %d lanes", fn,
                          t->dtype.bits, t->dtype.lanes);

    // The row-major stride, capped once it no longer fits in 32 bits so that it cannot overflow.
    int64_t compact_stride = 1;
    for (int i = 0; i < t->ndim; i++) {
        int axis = t->ndim - 1 - i;
        int64_t extent = t->shape[axis];
        int64_t stride = t->strides ? t->strides[axis] : compact_stride;
        if (extent < 0 || extent > INT32_MAX)
            return kiln_error(kiln_error_bad_dimensions,
                              "%s: axis %d has extent %lld; extents must be in [0, %d]", fn, axis,
                              static_cast<long long>(extent), INT32_MAX);
        if (stride < INT32_MIN || stride > INT32_MAX)
            return kiln_error(kiln_error_bad_stride,
                              "%s: axis %d has stride %lld, which does not fit in 32 bits", fn,
                              axis, static_cast<long long>(stride));
        // A device copy starts at the element with the lowest address (see kiln_runtime.h).
        if (on_device && stride < 0 && extent > 1)
            return kiln_error(kiln_error_bad_stride,
                              "%s: axis %d of the %s tensor has stride %lld; device tensors need "
                              "non-negative strides",
                              fn, axis, device_name(device_type), static_cast<long long>(stride));
        dims_storage[i] = {0, static_cast<int32_t>(extent), static_cast<int32_t>(stride), 0};
        compact_stride = std::min<int64_t>(compact_stride * extent, int64_t(INT32_MAX) + 1);
    }
    const kiln_device_interface_t *cuda_interface =
        device_type == kDLCUDA ? cuda_interface_if_available() : nullptr;
    *out = kiln_buffer_t{};
    if (on_device) {
        // CUDA device pointers can be offset; a cl_mem cannot (byte_offset is 0, checked above).
        uintptr_t handle = reinterpret_cast<uintptr_t>(t->data);
        if (handle) handle += uintptr_t(t->byte_offset);
        out->device = handle;
        // A CUDA pointer is borrowed on the CUDA interface (not owned: device_free forgets it).
        // Without a CUDA driver the buffer has no interface, so kiln can pass it around and hand
        // it back to DLPack but not launch kernels on it or copy it.
        if (device_type == kDLOpenCL) {
            out->device_interface = kiln_opencl_device_interface();
        } else {
            out->device_interface = cuda_interface;
            if (cuda_interface) out->flags |= kiln_buffer_flag_device_not_owned;
        }
        if (handle) out->flags |= kiln_buffer_flag_device_dirty;
    } else {
        out->host = t->data ? static_cast<uint8_t *>(t->data) + t->byte_offset : nullptr;
    }
    out->type = type;
    out->dimensions = t->ndim;
    out->dim = t->ndim > 0 ? dims_storage : nullptr;
    return kiln_success;
}

int kiln_buffer_to_dltensor(const kiln_buffer_t *b, DLTensor *out, int64_t *shape_storage,
                            int64_t *strides_storage, int max_dims) {
    const char *fn = "kiln_buffer_to_dltensor";
    if (!b || !out)
        return kiln_error(kiln_error_buffer_argument_null, "%s: the %s is null", fn,
                          b ? "output tensor" : "buffer");
    // A buffer with a device copy exports that copy, so the device type comes from its interface.
    DLDevice device = {kDLCPU, 0};
    if (b->device) {
        const char *name = b->device_interface ? b->device_interface->name : nullptr;
        if (!name)
            return kiln_error(kiln_error_device_unavailable,
                              "%s: the buffer has a device handle but no device interface, so its "
                              "device type is unknown",
                              fn);
        if (std::strcmp(name, "opencl") == 0) {
            device.device_type = kDLOpenCL;
        } else if (std::strcmp(name, "cuda") == 0) {
            device.device_type = kDLCUDA;
            device.device_id = cuda_device_ordinal();
        } else {
            return kiln_error(kiln_error_device_unavailable,
                              "%s: the buffer's device interface '%s' has no DLPack device type",
                              fn, name);
        }
        if (b->flags & kiln_buffer_flag_host_dirty)
            return kiln_error(kiln_error_device_unavailable,
                              "%s: the buffer's host copy is newer than its device copy "
                              "(host_dirty); call kiln_buffer_copy_to_device first",
                              fn);
    }
    if (!b->host && !b->device)
        return kiln_error(kiln_error_buffer_argument_null,
                          "%s: the buffer has no host memory (host is null)", fn);
    if (b->dimensions < 0 || b->dimensions > max_dims ||
        (b->dimensions > 0 && (!b->dim || !shape_storage || !strides_storage)))
        return kiln_error(kiln_error_bad_dimensions,
                          "%s: the buffer has %d dimensions but the shape and stride storage have "
                          "room for %d",
                          fn, b->dimensions, shape_storage && strides_storage ? max_dims : 0);

    DLDataType dtype = {0, b->type.bits, b->type.lanes};
    switch (b->type.code) {
    case kiln_type_int:
        dtype.code = kDLInt;
        break;
    case kiln_type_uint:
        dtype.code = kDLUInt;
        break;
    case kiln_type_float:
        dtype.code = kDLFloat;
        break;
    case kiln_type_bfloat:
        dtype.code = kDLBfloat;
        break;
    case kiln_type_bool:
        dtype = {dlpack_bool_code, dlpack_bool_bits, b->type.lanes};
        break;
    default:
        return kiln_error(kiln_error_bad_type, "%s: the buffer has unknown type code %d", fn,
                          b->type.code);
    }

    for (int i = 0; i < b->dimensions; i++) {
        if (b->device && b->dim[i].stride < 0 && b->dim[i].extent > 1)
            return kiln_error(kiln_error_bad_stride,
                              "%s: dimension %d of the buffer has stride %d; device tensors need "
                              "non-negative strides",
                              fn, i, b->dim[i].stride);
    }
    for (int i = 0; i < b->dimensions; i++) {
        int axis = b->dimensions - 1 - i;
        shape_storage[axis] = b->dim[i].extent;
        strides_storage[axis] = b->dim[i].stride;
    }
    *out = DLTensor{};
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the descriptor stores device handles as integers
    out->data = b->device ? reinterpret_cast<void *>(static_cast<uintptr_t>(b->device))
                          : static_cast<void *>(b->host);
    out->device = device;
    out->ndim = b->dimensions;
    out->dtype = dtype;
    out->shape = b->dimensions > 0 ? shape_storage : nullptr;
    out->strides = b->dimensions > 0 ? strides_storage : nullptr;
    out->byte_offset = 0;
    return kiln_success;
}

} // extern "C"
