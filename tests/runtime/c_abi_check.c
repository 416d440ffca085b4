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

    /* Devices: the OpenCL table exists without loading a driver; a zero-block launch runs
     * nothing; a wrapped intermediate allocation is a 1-D byte buffer. */
    {
        const kiln_device_interface_t *cl = kiln_opencl_device_interface();
        const int32_t blocks[3] = {0, 1, 1};
        const int32_t threads[3] = {1, 1, 1};
        uint8_t bytes[16];
        kiln_buffer_t *wrapped;
        int64_t to_device = -1, to_host = -1;
        if (!cl || strcmp(cl->name, "opencl") != 0 || !cl->run) return 10;
        if (kiln_device_launch(cl, "", 0, "k", blocks, threads, 0, NULL, NULL, NULL) !=
            kiln_success)
            return 11;
        wrapped = kiln_device_buffer_wrap(bytes, sizeof(bytes));
        if (!wrapped || kiln_buffer_size_in_bytes(wrapped) != sizeof(bytes)) return 12;
        kiln_buffer_set_host_dirty(wrapped, 1);
        if (!kiln_buffer_host_dirty(wrapped) || kiln_buffer_device_dirty(wrapped)) return 13;
        if (kiln_buffer_copy_to_host(wrapped) != kiln_success) return 14;
        kiln_device_buffer_release(wrapped);
        kiln_device_reset_copy_counts();
        kiln_device_copy_counts(&to_device, &to_host);
        if (to_device != 0 || to_host != 0) return 15;
        if (kiln_error_device_memory != -15) return 16;
    }
    return 0;
}
