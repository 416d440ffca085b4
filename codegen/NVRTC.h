// CUDA C to PTX or cubin with NVRTC, the CUDA toolkit's run-time compiler. libnvrtc is loaded with
// dlopen when first needed ("libnvrtc.so.13", then "libnvrtc.so.12", then "libnvrtc.so"), never
// linked, so kiln builds and runs where the toolkit is absent; only these functions then fail.
//
// Every compilation uses the same options: --std=c++17 --fmad=false --ftz=false --prec-div=true
// --prec-sqrt=true and the architecture. No fast math and no contraction of a * b + c into fma,
// as lang/IR.h's semantics require (see codegen/CodeGenDevice.h).
#pragma once

#include <string>
#include <vector>

namespace kiln {

/// Whether libnvrtc can be loaded; otherwise *why_not (when given) says why.
bool nvrtc_available(std::string *why_not = nullptr);

/// The NVRTC options for an architecture ("sm_90" compiles with --gpu-architecture=sm_90, to PTX
/// with --gpu-architecture=compute_90).
std::vector<std::string> nvrtc_options(const std::string &gpu_architecture);

/// Compiles CUDA source to PTX for arch ("sm_90", "sm_90a" or "compute_90": the PTX is for the
/// virtual architecture compute_90). Raises CompileError with NVRTC's log and the offending source
/// lines quoted when the source does not compile, when arch is malformed, or when NVRTC cannot be
/// loaded.
std::string compile_cuda_to_ptx(const std::string &source, const std::string &arch,
                                const std::string &program_name = "kiln.cu");

/// Compiles CUDA source to a cubin (machine code) for a real architecture ("sm_90"). Errors as
/// compile_cuda_to_ptx; a virtual architecture ("compute_90") is a CompileError.
std::vector<char> compile_cuda_to_cubin(const std::string &source, const std::string &arch,
                                        const std::string &program_name = "kiln.cu");

} // namespace kiln
