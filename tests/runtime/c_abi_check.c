/* Compiled as C99 to prove that the public runtime header is plain C. */
#include "runtime/kiln_runtime.h"

#include <string.h>

int main(void) {
    float data[12];
    kiln_dimension_t dims[2] = {{0, 4, 1, 0}, {0, 3, 4, 0}};
    kiln_buffer_t buffer;
    kiln_type_t float32 = {kiln_type_float, 32, 1};
    kiln_memory_stats_t stats;
    void *block;

    memset(&buffer, 0, sizeof(buffer));
    buffer.host = (uint8_t *)data;
    buffer.type = float32;
    buffer.dimensions = 2;
    buffer.dim = dims;
    if (kiln_buffer_check(&buffer, "in", float32, 2) != kiln_success) return 1;
    if (kiln_buffer_size_in_bytes(&buffer) != sizeof(data)) return 2;
    if (kiln_buffer_check_region(&buffer, "in", 0, 0, 5) != kiln_error_access_out_of_bounds)
        return 3;
    if (strlen(kiln_last_error_message()) == 0) return 4;

    block = kiln_malloc(100);
    if (!block || ((uintptr_t)block % 64) != 0) return 5;
    kiln_free(block);
    kiln_get_memory_stats(&stats);
    if (stats.allocations == 0) return 6;
    kiln_release_cached_memory();

    if (kiln_error(kiln_error_bad_type, "x %d", 1) != kiln_error_bad_type) return 7;
    kiln_clear_error();
    if (strcmp(kiln_error_code_name(kiln_error_internal), "kiln_error_internal") != 0) return 8;
    if (kiln_get_num_threads() < 1) return 9;
    kiln_profiler_record("c", kiln_current_time_ns() % 2);
    return 0;
}
