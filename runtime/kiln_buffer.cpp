// Buffer checks run at a pipeline's entry, so a wrong argument is a message naming the buffer and
// the values, never a crash inside the kernel.
#include "runtime/kiln_runtime.h"

#include <cstdio>

namespace {

// The spelling of kiln::Type::to_string ("int32", "uint8x16", "float32", "bool"), so messages
// read the same as those of the compiler.
struct TypeName {
    char text[64];
};

TypeName type_name(kiln_type_t t) {
    static const char *const prefixes[] = {"int", "uint", "float", "bool", "bfloat"};
    TypeName name;
    if (t.code > kiln_type_bfloat) {
        std::snprintf(name.text, sizeof(name.text), "<type code %d, %d bits, %d lanes>", t.code,
                      t.bits, t.lanes);
        return name;
    }
    int n = t.code == kiln_type_bool
                ? std::snprintf(name.text, sizeof(name.text), "bool")
                : std::snprintf(name.text, sizeof(name.text), "%s%d", prefixes[t.code], t.bits);
    if (t.lanes != 1) std::snprintf(name.text + n, sizeof(name.text) - n, "x%d", t.lanes);
    return name;
}

bool same_type(kiln_type_t a, kiln_type_t b) {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

const char *or_unnamed(const char *name) {
    return name ? name : "<unnamed>";
}

} // namespace

extern "C" {

size_t kiln_buffer_size_in_bytes(const kiln_buffer_t *b) {
    if (!b || (b->dimensions > 0 && !b->dim)) return 0;
    // Offsets in elements of the lowest and highest addressed elements, relative to host.
    int64_t lowest = 0, highest = 0;
    for (int i = 0; i < b->dimensions; i++) {
        const kiln_dimension_t &d = b->dim[i];
        if (d.extent <= 0) return 0;
        int64_t reach = int64_t(d.stride) * (d.extent - 1);
        if (reach < 0)
            lowest += reach;
        else
            highest += reach;
    }
    size_t element_bytes = size_t((b->type.bits + 7) / 8) * b->type.lanes;
    return size_t(highest - lowest + 1) * element_bytes;
}

int kiln_buffer_check(const kiln_buffer_t *b, const char *name, kiln_type_t expected_type,
                      int expected_dims) {
    name = or_unnamed(name);
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "buffer '%s' is null", name);
    if (!same_type(b->type, expected_type))
        return kiln_error(kiln_error_bad_type,
                          "buffer '%s' has type %s but the pipeline expects %s", name,
                          type_name(b->type).text, type_name(expected_type).text);
    if (b->dimensions != expected_dims)
        return kiln_error(kiln_error_bad_dimensions,
                          "buffer '%s' has %d dimensions but the pipeline expects %d", name,
                          b->dimensions, expected_dims);
    if (b->dimensions > 0 && !b->dim)
        return kiln_error(kiln_error_bad_dimensions,
                          "buffer '%s' has %d dimensions but a null dim array", name,
                          b->dimensions);
    for (int i = 0; i < b->dimensions; i++) {
        if (b->dim[i].extent < 0)
            return kiln_error(kiln_error_bad_dimensions,
                              "buffer '%s' dimension %d has negative extent %d", name, i,
                              b->dim[i].extent);
    }
    if (!b->host)
        return kiln_error(kiln_error_buffer_argument_null,
                          "buffer '%s' has no host memory (host is null)", name);
    return kiln_success;
}

int kiln_buffer_check_region(const kiln_buffer_t *b, const char *name, int dim, int32_t needed_min,
                             int32_t needed_extent) {
    name = or_unnamed(name);
    if (!b) return kiln_error(kiln_error_buffer_argument_null, "buffer '%s' is null", name);
    if (dim < 0 || dim >= b->dimensions || !b->dim)
        return kiln_error(kiln_error_bad_dimensions,
                          "buffer '%s' has no dimension %d (it has %d dimensions)", name, dim,
                          b->dimensions);
    if (needed_extent <= 0) return kiln_success;
    const kiln_dimension_t &d = b->dim[dim];
    int64_t needed_max = int64_t(needed_min) + needed_extent - 1;
    int64_t covered_max = int64_t(d.min) + d.extent - 1;
    if (needed_min >= d.min && needed_max <= covered_max) return kiln_success;
    if (d.extent <= 0)
        return kiln_error(kiln_error_access_out_of_bounds,
                          "buffer '%s' dimension %d: the schedule needs [%d, %lld] but the buffer "
                          "is empty (extent %d)",
                          name, dim, needed_min, static_cast<long long>(needed_max), d.extent);
    return kiln_error(kiln_error_access_out_of_bounds,
                      "buffer '%s' dimension %d: the schedule needs [%d, %lld] but the buffer "
                      "covers [%d, %lld]",
                      name, dim, needed_min, static_cast<long long>(needed_max), d.min,
                      static_cast<long long>(covered_max));
}

} // extern "C"
