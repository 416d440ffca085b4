/* Conversions between kiln_buffer_t and DLPack's DLTensor, for exchanging CPU tensors with other
 * frameworks without copying. DLPack lists axes outermost first (shape[0] varies slowest) while
 * kiln's dim[0] is the innermost dimension, so the order of dimensions is reversed. */
#ifndef KILN_DLPACK_H
#define KILN_DLPACK_H

#include <dlpack/dlpack.h>

#include "runtime/kiln_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Describes a CPU DLTensor as a kiln buffer over the same memory: dim[i] is the tensor's axis
/// ndim - 1 - i, every min is 0, NULL strides mean compact row-major, and host is data plus
/// byte_offset. The dimensions are written to dims_storage (room for max_dims), which out->dim
/// then points to. int, uint, float and bool (code 6, 8 bits) types are supported. Returns
/// kiln_success or an error code with a message; out is untouched on error (dims_storage may not
/// be).
int kiln_buffer_from_dltensor(const DLTensor *t, kiln_buffer_t *out, kiln_dimension_t *dims_storage,
                              int max_dims);

/// Describes a kiln buffer's host memory as a CPU DLTensor: axis i is dim[dimensions - 1 - i],
/// strides are always written, data is the host pointer and byte_offset is 0. DLPack indices
/// start at 0, so the buffer's mins are dropped. shape_storage and strides_storage (room for
/// max_dims each) receive the shape and strides. Returns kiln_success or an error code with a
/// message; out is untouched on error.
int kiln_buffer_to_dltensor(const kiln_buffer_t *b, DLTensor *out, int64_t *shape_storage,
                            int64_t *strides_storage, int max_dims);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_DLPACK_H */
