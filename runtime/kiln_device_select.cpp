// Picks the device interface of a GPU API for generated host code and the C++ API.
#include "kiln_runtime.h"

#include <cstdio>

extern "C" const kiln_device_interface_t *kiln_device_interface(int api) {
    switch (api) {
    case kiln_gpu_api_opencl:
        return kiln_opencl_device_interface();
    case kiln_gpu_api_cuda: {
        // The CUDA interface is only handed out when it can work: the first query loads the
        // driver, runs cuInit and finds the device, and says why not otherwise.
        const kiln_device_interface_t *cuda = kiln_cuda_device_interface();
        if (cuda->device_limits(nullptr, nullptr) == kiln_success) return cuda;
        char message[1024];
        std::snprintf(message, sizeof(message), "%s", kiln_last_error_message());
        kiln_error(kiln_error_no_device, "%s", message);
        return nullptr;
    }
    default:
        kiln_error(kiln_error_no_device, "no device interface for GPU API %d", api);
        return nullptr;
    }
}
