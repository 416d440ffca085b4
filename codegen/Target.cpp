#include "codegen/Target.h"

#include <algorithm>
#include <memory>
#include <sstream>
#include <vector>

#include <llvm/ADT/StringMap.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/LLVMModuleImpl.h"
#include "lang/Error.h"

namespace kiln {

namespace {

std::vector<std::string> split(const std::string &text, char separator) {
    std::vector<std::string> parts;
    std::stringstream stream(text);
    std::string part;
    while (std::getline(stream, part, separator)) {
        if (!part.empty()) parts.push_back(part);
    }
    return parts;
}

int vector_bits_for(const Target &t) {
    if (t.has_feature("avx512f")) return 512;
    if (t.has_feature("avx")) return 256;
    return 128;
}

} // namespace

const char *gpu_api_name(GpuApi api) {
    switch (api) {
    case GpuApi::None:
        return "none";
    case GpuApi::CUDA:
        return "cuda";
    case GpuApi::OpenCL:
        return "opencl";
    }
    return "?";
}

bool parse_gpu_api(const std::string &text, GpuApi *out) {
    for (GpuApi api : {GpuApi::None, GpuApi::CUDA, GpuApi::OpenCL}) {
        if (text == gpu_api_name(api)) {
            *out = api;
            return true;
        }
    }
    return false;
}

Target Target::host() {
    Target t;
    t.triple = llvm::sys::getProcessTriple();
    t.cpu = llvm::sys::getHostCPUName().str();
    // Disabled features are kept too: a virtual machine may hide features the CPU model implies.
    std::vector<std::string> features;
    for (const auto &feature : llvm::sys::getHostCPUFeatures()) {
        features.push_back((feature.getValue() ? "+" : "-") + feature.getKey().str());
    }
    std::sort(features.begin(), features.end(),
              [](const std::string &a, const std::string &b) { return a.substr(1) < b.substr(1); });
    for (const std::string &f : features)
        t.features += (t.features.empty() ? "" : ",") + f;
    t.vector_bits = vector_bits_for(t);
    return t;
}

const char *Target::matrix_unit_feature(Type input) {
    return input.is_bfloat() ? "amx-bf16" : "amx-int8";
}

bool Target::has_matrix_unit(Type input) const {
    return llvm::Triple(triple).isX86() && has_feature("amx-tile") &&
           has_feature(matrix_unit_feature(input));
}

bool Target::has_feature(const std::string &name) const {
    std::vector<std::string> list = split(features, ',');
    return std::find(list.begin(), list.end(), "+" + name) != list.end();
}

namespace {

std::string cuda_arch_list(const std::vector<int> &archs) {
    std::string out;
    for (int a : archs)
        out += (out.empty() ? "sm_" : ",sm_") + std::to_string(a);
    return out;
}

// "sm_80,sm_90": each sm_<major><minor> with a two- or three-digit number from 50 to 199.
std::vector<int> parse_cuda_archs(const std::string &text, const std::string &value) {
    std::vector<int> archs;
    for (const std::string &item : split(value, ',')) {
        bool ok =
            item.size() >= 5 && item.size() <= 6 && item.rfind("sm_", 0) == 0 &&
            std::all_of(item.begin() + 3, item.end(), [](char c) { return c >= '0' && c <= '9'; });
        int arch = ok ? std::stoi(item.substr(3)) : 0;
        if (!ok || arch < 50 || arch > 199) {
            user_error("target '", text,
                       "': cuda_archs must list architectures like sm_80,sm_90 "
                       "(sm_50 to sm_199), got '",
                       item, "'");
        }
        if (std::find(archs.begin(), archs.end(), arch) == archs.end()) archs.push_back(arch);
    }
    if (archs.empty()) {
        user_error("target '", text, "': cuda_archs is empty; list at least one, e.g. sm_90");
    }
    std::sort(archs.begin(), archs.end());
    return archs;
}

} // namespace

std::string Target::to_string() const {
    return "triple=" + triple + ";cpu=" + cpu + ";features=" + features +
           ";vector_bits=" + std::to_string(vector_bits) + ";fast_math=" + (fast_math ? "1" : "0") +
           (gpu == GpuApi::None ? "" : std::string(";gpu=") + gpu_api_name(gpu)) +
           (gpu != GpuApi::CUDA || cuda_archs == default_cuda_archs()
                ? ""
                : ";cuda_archs=" + cuda_arch_list(cuda_archs)) +
           (profile ? ";profile=1" : "") +
           (threads > 0 ? ";threads=" + std::to_string(threads) : "");
}

namespace {

const char *const target_forms =
    "expected host, a named x86-64 level (x86-64-v2, x86-64-v3, x86-64-v4) or a CPU name LLVM "
    "knows, each optionally followed by -cuda or -opencl, by -profile and by ';key=value' "
    "(host-cuda, host-profile, x86-64-v3;fast_math=1), or a full target string "
    "(triple=...;cpu=...)";

// A few CPU names of this triple's architecture LLVM accepts, for messages.
std::string example_cpus(const llvm::MCSubtargetInfo &info) {
    std::vector<std::string> examples;
    for (const char *cpu : {"x86-64-v2", "x86-64-v3", "x86-64-v4", "haswell", "skylake-avx512",
                            "icelake-server", "sapphirerapids", "znver3", "znver4"}) {
        if (info.isCPUStringValid(cpu)) examples.push_back(cpu);
    }
    for (const llvm::SubtargetSubTypeKV &kv : info.getAllProcessorDescriptions()) {
        if (examples.size() >= 6) break;
        if (std::find(examples.begin(), examples.end(), kv.Key) == examples.end())
            examples.push_back(kv.Key);
    }
    std::string out;
    for (const std::string &e : examples)
        out += (out.empty() ? "" : ", ") + e;
    return out;
}

// The host's triple with a CPU LLVM knows for it, and exactly the features that CPU has: code
// for it runs on any machine with those features, whatever machine compiles it.
Target named_cpu(const std::string &text, const std::string &cpu) {
    initialize_llvm();
    Target t;
    t.triple = llvm::sys::getProcessTriple();
    std::string error;
    const llvm::Target *target = llvm::TargetRegistry::lookupTarget(t.triple, error);
    if (!target) user_error("target '", text, "': LLVM does not support ", t.triple, ": ", error);
    std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(t.triple, "", ""));
    if (!info || !info->isCPUStringValid(cpu)) {
        user_error("target '", text, "': unknown CPU '", cpu, "' for ", t.triple, " (",
                   info ? "e.g. " + example_cpus(*info) : std::string("no CPU list"), "); ",
                   target_forms);
    }
    info.reset(target->createMCSubtargetInfo(t.triple, cpu, ""));
    std::vector<std::string> features;
    for (const llvm::SubtargetFeatureKV &kv : info->getAllProcessorFeatures()) {
        if (info->getFeatureBits().test(kv.Value)) features.push_back(kv.Key);
    }
    std::sort(features.begin(), features.end());
    t.cpu = cpu;
    for (const std::string &f : features)
        t.features += (t.features.empty() ? "+" : ",+") + f;
    t.vector_bits = vector_bits_for(t);
    return t;
}

} // namespace

Target Target::parse(const std::string &text) {
    size_t semi = text.find(';');
    std::string head = text.substr(0, semi),
                rest = semi == std::string::npos ? "" : text.substr(semi);
    if (text.empty()) return host();
    if (head.find('=') != std::string::npos) return from_string(text);
    GpuApi api = GpuApi::None;
    auto strip = [&](const std::string &suffix, GpuApi a) {
        if (head.size() > suffix.size() &&
            head.compare(head.size() - suffix.size(), suffix.size(), suffix) == 0) {
            head.resize(head.size() - suffix.size());
            api = a;
        }
    };
    bool profile = false;
    if (head.size() > 8 && head.compare(head.size() - 8, 8, "-profile") == 0) {
        head.resize(head.size() - 8);
        profile = true;
    }
    strip("-cuda", GpuApi::CUDA);
    strip("-opencl", GpuApi::OpenCL);
    if (head.empty()) user_error("target '", text, "': ", target_forms);
    Target base = head == "host" ? host() : named_cpu(text, head);
    base.profile = profile;
    // Later keys win in from_string, so the overrides replace the base's fields. Its errors
    // name the text the user wrote, not the expanded target string.
    const std::string expanded = base.with_gpu(api).to_string() + rest;
    try {
        return from_string(expanded);
    } catch (const CompileError &e) {
        const std::string message = e.what(), prefix = "target '" + expanded + "': ";
        if (message.rfind(prefix, 0) != 0) throw;
        user_error("target '", text, "': ", message.substr(prefix.size()));
    }
}

Target Target::from_string(const std::string &text) {
    Target t;
    for (const std::string &item : split(text, ';')) {
        size_t eq = item.find('=');
        if (eq == std::string::npos) {
            user_error("target '", text, "': expected key=value, got '", item, "'");
        }
        std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "triple") {
            t.triple = value;
        } else if (key == "cpu") {
            t.cpu = value;
        } else if (key == "features") {
            t.features = value;
        } else if (key == "vector_bits") {
            if (value != "128" && value != "256" && value != "512") {
                user_error("target '", text, "': vector_bits must be 128, 256 or 512, got '", value,
                           "'");
            }
            t.vector_bits = std::stoi(value);
        } else if (key == "fast_math") {
            if (value != "0" && value != "1") {
                user_error("target '", text, "': fast_math must be 0 or 1, got '", value, "'");
            }
            t.fast_math = value == "1";
        } else if (key == "gpu") {
            if (!parse_gpu_api(value, &t.gpu)) {
                user_error("target '", text, "': gpu must be none, cuda or opencl, got '", value,
                           "'");
            }
        } else if (key == "cuda_archs") {
            t.cuda_archs = parse_cuda_archs(text, value);
        } else if (key == "profile") {
            if (value != "0" && value != "1") {
                user_error("target '", text, "': profile must be 0 or 1, got '", value, "'");
            }
            t.profile = value == "1";
        } else if (key == "threads") {
            // Digits only, at most 4 of them: no sign, no spaces, no overflow.
            bool digits = !value.empty() && value.size() <= 4 &&
                          std::all_of(value.begin(), value.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
            if (!digits || std::stoi(value) < 1 || std::stoi(value) > 1024) {
                user_error("target '", text,
                           "': threads must be a thread count from 1 to 1024 (what hand schedules "
                           "plan their tasks for; leave it out for the runtime's), got '",
                           value, "'");
            }
            t.threads = std::stoi(value);
        } else {
            user_error("target '", text, "': unknown key '", key,
                       "' (known: triple, cpu, features, vector_bits, fast_math, gpu, cuda_archs, "
                       "profile, threads)");
        }
    }
    return t;
}

} // namespace kiln
