// The CUDA kernel bundle of an ahead-of-time object: the kernels' CUDA C source plus, for each
// architecture of Target::cuda_archs, their PTX (compiled by NVRTC for compute_<arch>) and a cubin
// (sm_<arch>) where NVRTC makes one. Generated host code passes the bundle to the runtime's CUDA
// interface, which loads the cubin matching the device, else the newest PTX the device can JIT,
// else compiles the source with NVRTC (runtime/kiln_runtime.h describes the byte layout).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// One image of a bundle.
struct CUDAImage {
    enum class Kind : uint32_t { Source = 0, PTX = 1, Cubin = 2 };
    Kind kind = Kind::Source;
    int arch = 0; ///< major * 10 + minor; 0 for the source
    std::string bytes;
};

/// Compiles source for every arch (PTX for each; a cubin for each where NVRTC can make one) and
/// packs them with the source. Raises CompileError with NVRTC's log when the source does not
/// compile or NVRTC cannot be loaded (an object for gpu=cuda needs the CUDA toolkit's NVRTC at
/// build time, never at run time).
std::string make_cuda_bundle(const std::string &source, const std::vector<int> &archs);

/// The images of a bundle made by make_cuda_bundle (in order: PTX and cubin of each arch, then
/// the source). Raises CompileError for bytes that are not a well-formed bundle.
std::vector<CUDAImage> read_cuda_bundle(const std::string &bundle);

/// "sm_90 PTX (12345 bytes)": one line per image, for inspection.
std::string describe_cuda_bundle(const std::string &bundle);

} // namespace kiln
