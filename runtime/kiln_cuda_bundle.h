// Reading a CUDA kernel bundle (the KILN_CUDA_BUNDLE_MAGIC layout of kiln_runtime.h) and choosing
// the image a device loads. Internal to the runtime (kiln_cuda.cpp); no driver is needed, so the
// rules are the same for every device and checked on their own. C linkage, as in
// kiln_device_internal.h: no mangled name among the library's undefined symbols.
#pragma once

#include "runtime/kiln_runtime.h"

namespace kiln_runtime_internal {

/// Whether data starts with KILN_CUDA_BUNDLE_MAGIC (else it is plain CUDA C source).
extern "C" bool kiln_internal_is_cuda_bundle(const char *data, size_t size);

/// "source", "ptx", "cubin" (or "unknown") for a kiln_cuda_image_kind_t.
extern "C" const char *kiln_internal_cuda_image_kind_name(uint32_t kind);

/// Picks the image of a bundle for a device of architecture arch (major * 10 + minor): the cubin
/// of the same major version with the highest architecture <= arch, else the PTX with the highest
/// architecture <= arch (the driver compiles PTX forward), else the source. Every entry is checked
/// to lie inside the bundle's size bytes; a malformed bundle, or one with nothing the device can
/// use, is kiln_error_device_compile with a message naming kernel_name, the device and the
/// bundle's images.
extern "C" int kiln_internal_choose_cuda_image(const char *bundle, size_t size, int arch,
                                               const char *device_name, const char *kernel_name,
                                               kiln_cuda_bundle_entry_t *chosen);

} // namespace kiln_runtime_internal
