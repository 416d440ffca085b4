// Reading CUDA kernel bundles and choosing the image a device loads (see kiln_cuda_bundle.h). The
// bundle comes from generated code, but it may be damaged or built by another kiln version, so
// every count, offset and size is checked before it is used.
#include "runtime/kiln_cuda_bundle.h"

#include <cstdio>
#include <cstring>

namespace kiln_runtime_internal {

const char *kiln_internal_cuda_image_kind_name(uint32_t kind) {
    switch (kind) {
    case kiln_cuda_image_source:
        return "source";
    case kiln_cuda_image_ptx:
        return "ptx";
    case kiln_cuda_image_cubin:
        return "cubin";
    default:
        return "unknown";
    }
}

bool kiln_internal_is_cuda_bundle(const char *data, size_t size) {
    size_t magic = sizeof(KILN_CUDA_BUNDLE_MAGIC) - 1;
    return size >= magic && std::memcmp(data, KILN_CUDA_BUNDLE_MAGIC, magic) == 0;
}

int kiln_internal_choose_cuda_image(const char *bundle, size_t size, int arch,
                                    const char *device_name, const char *kernel_name,
                                    kiln_cuda_bundle_entry_t *chosen) {
    const size_t header = sizeof(KILN_CUDA_BUNDLE_MAGIC) - 1 + 8;
    uint32_t count = 0, reserved = 0;
    if (size < header)
        return kiln_error(kiln_error_device_compile,
                          "kernel '%s': the CUDA bundle has %zu bytes, fewer than its %zu-byte "
                          "header",
                          kernel_name, size, header);
    std::memcpy(&count, bundle + header - 8, 4);
    std::memcpy(&reserved, bundle + header - 4, 4);
    if (reserved != 0 || count == 0 || count > (size - header) / sizeof(kiln_cuda_bundle_entry_t))
        return kiln_error(kiln_error_device_compile,
                          "kernel '%s': the CUDA bundle is malformed: it claims %u entries "
                          "(reserved word %u) but has %zu bytes",
                          kernel_name, count, reserved, size);
    int cubin = -1, ptx = -1, source = -1;
    uint32_t cubin_arch = 0, ptx_arch = 0;
    char held[256] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        kiln_cuda_bundle_entry_t e;
        std::memcpy(&e, bundle + header + i * sizeof(e), sizeof(e));
        if (e.kind > kiln_cuda_image_cubin || e.size == 0 || e.offset > size ||
            e.size > size - e.offset || e.offset < header + count * sizeof(e))
            return kiln_error(kiln_error_device_compile,
                              "kernel '%s': the CUDA bundle is malformed: entry %u (kind %u, "
                              "arch %u, offset %llu, size %llu) lies outside its %zu bytes",
                              kernel_name, i, e.kind, e.arch,
                              static_cast<unsigned long long>(e.offset),
                              static_cast<unsigned long long>(e.size), size);
        if (used < sizeof(held)) {
            int n =
                e.kind == kiln_cuda_image_source
                    ? std::snprintf(held + used, sizeof(held) - used, "%ssource", used ? ", " : "")
                    : std::snprintf(held + used, sizeof(held) - used, "%s%s sm_%u",
                                    used ? ", " : "", kiln_internal_cuda_image_kind_name(e.kind),
                                    e.arch);
            if (n > 0) used += size_t(n);
        }
        uint32_t a = e.arch;
        if (e.kind == kiln_cuda_image_cubin && int(a / 10) == arch / 10 && int(a) <= arch &&
            (cubin < 0 || a > cubin_arch)) {
            cubin = int(i);
            cubin_arch = a;
        } else if (e.kind == kiln_cuda_image_ptx && int(a) <= arch && (ptx < 0 || a > ptx_arch)) {
            ptx = int(i);
            ptx_arch = a;
        } else if (e.kind == kiln_cuda_image_source && source < 0) {
            source = int(i);
        }
    }
    int pick = cubin >= 0 ? cubin : ptx >= 0 ? ptx : source;
    if (pick < 0)
        return kiln_error(kiln_error_device_compile,
                          "kernel '%s': the CUDA bundle has no image for the device '%s' (sm_%d) "
                          "and no source to compile: it holds %s; build the kernel for sm_%d or "
                          "an older architecture, or keep its source",
                          kernel_name, device_name, arch, held, arch);
    std::memcpy(chosen, bundle + header + size_t(pick) * sizeof(*chosen), sizeof(*chosen));
    return kiln_success;
}

} // namespace kiln_runtime_internal
