// Picks the device interface of a GPU API for generated host code and the C++ API.
#include "kiln_runtime.h"

extern "C" const kiln_device_interface_t *kiln_device_interface(int api) {
    switch (api) {
    case kiln_gpu_api_opencl:
        return kiln_opencl_device_interface();
    case kiln_gpu_api_cuda:
        kiln_error(kiln_error_no_device,
                   "this kiln runtime has no CUDA device interface yet: CUDA kernels compile "
                   "(NVRTC) but run only through OpenCL; use GpuApi::OpenCL");
        return nullptr;
    default:
        kiln_error(kiln_error_no_device, "no device interface for GPU API %d", api);
        return nullptr;
    }
}
