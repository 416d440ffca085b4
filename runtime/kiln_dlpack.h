/* Conversions between kiln_buffer_t and DLPack's DLTensor, for exchanging CPU, OpenCL and CUDA
 * tensors with other frameworks without copying. DLPack lists axes outermost first (shape[0]
 * varies slowest) while kiln's dim[0] is the innermost dimension, so the order of dimensions is
 * reversed.
 *
 * Device tensors: DLTensor.data holds the device handle that kiln_buffer_t.device holds. For
 * kDLOpenCL that is the cl_mem (created in the context of kiln_opencl_device_interface(), or one
 * sharing its device) with byte_offset 0; for kDLCUDA, the device pointer (CUdeviceptr). Both
 * directions use device_id 0 (CUDA: the device KILN_CUDA_DEVICE names, default 0) and need
 * non-negative strides (a device copy starts at the element with the lowest address). The handle is
 * borrowed, never owned: do not call kiln_buffer_device_free on an imported OpenCL buffer (that
 * would release the exporter's cl_mem); set its device to 0 when done with it. An imported CUDA
 * buffer is marked not owned, so kiln_buffer_device_free only forgets it. */
#ifndef KILN_DLPACK_H
#define KILN_DLPACK_H

#include <dlpack/dlpack.h>

#include "runtime/kiln_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Describes a DLTensor as a kiln buffer over the same memory: dim[i] is the tensor's axis
/// ndim - 1 - i, every min is 0, NULL strides mean compact row-major. A CPU tensor gives host =
/// data + byte_offset. A kDLOpenCL tensor gives host NULL, device = the cl_mem,
/// device_interface = kiln_opencl_device_interface() and the device_dirty bit (its data lives on
/// the device; point host at kiln_buffer_size_in_bytes(out) bytes before kiln_buffer_copy_to_host).
/// A kDLCUDA tensor gives the same with device = data + byte_offset on
/// kiln_cuda_device_interface() with kiln_buffer_flag_device_not_owned (device_free only forgets
/// it) when the CUDA driver loads and has a device; otherwise device_interface is NULL (such a
/// buffer can be described but not copied or launched on).
/// Other device types are rejected. The dimensions are written to dims_storage (room for
/// max_dims), which out->dim then points to. int, uint, float and bool (code 6, 8 bits) types are
/// supported. Returns kiln_success or an error code with a message; out is untouched on error
/// (dims_storage may not be).
int kiln_buffer_from_dltensor(const DLTensor *t, kiln_buffer_t *out, kiln_dimension_t *dims_storage,
                              int max_dims);

/// Describes a kiln buffer as a DLTensor: axis i is dim[dimensions - 1 - i], strides are always
/// written and byte_offset is 0. A buffer with a device copy exports that copy: device type
/// kDLOpenCL (interface "opencl") or kDLCUDA (interface "cuda"), data = the device handle; an
/// error if its host_dirty bit is set (the device copy is stale) or it has no interface. Otherwise
/// a CPU tensor with data = the host pointer. DLPack indices start at 0, so the buffer's mins are
/// dropped. shape_storage and strides_storage (room for max_dims each) receive the shape and
/// strides. Returns kiln_success or an error code with a message; out is untouched on error.
int kiln_buffer_to_dltensor(const kiln_buffer_t *b, DLTensor *out, int64_t *shape_storage,
                            int64_t *strides_storage, int max_dims);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_DLPACK_H */
