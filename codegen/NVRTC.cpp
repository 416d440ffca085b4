#include "codegen/NVRTC.h"

#include <dlfcn.h>

#include <regex>
#include <set>
#include <sstream>

#include "lang/Error.h"

namespace kiln {

namespace {

// The part of nvrtc.h that kiln uses, declared here so that kiln builds without the toolkit.
using nvrtcResult = int;
using nvrtcProgram = struct kiln_nvrtc_program *;
constexpr nvrtcResult NVRTC_SUCCESS = 0; // NOLINT(readability-identifier-naming): nvrtc.h's name

struct NvrtcLibrary {
    std::string error; ///< empty when every function was found
    nvrtcResult (*create_program)(nvrtcProgram *, const char *, const char *, int,
                                  const char *const *, const char *const *) = nullptr;
    nvrtcResult (*destroy_program)(nvrtcProgram *) = nullptr;
    nvrtcResult (*compile_program)(nvrtcProgram, int, const char *const *) = nullptr;
    nvrtcResult (*get_program_log_size)(nvrtcProgram, size_t *) = nullptr;
    nvrtcResult (*get_program_log)(nvrtcProgram, char *) = nullptr;
    nvrtcResult (*get_ptx_size)(nvrtcProgram, size_t *) = nullptr;
    nvrtcResult (*get_ptx)(nvrtcProgram, char *) = nullptr;
    nvrtcResult (*get_cubin_size)(nvrtcProgram, size_t *) = nullptr;
    nvrtcResult (*get_cubin)(nvrtcProgram, char *) = nullptr;
    const char *(*get_error_string)(nvrtcResult) = nullptr;
};

template <typename F>
bool resolve(void *handle, const char *name, F *f, std::string *error) {
    *f = reinterpret_cast<F>(dlsym(handle, name));
    if (!*f && error->empty()) *error = std::string("libnvrtc has no symbol ") + name;
    return *f != nullptr;
}

NvrtcLibrary load_nvrtc() {
    NvrtcLibrary lib;
    void *handle = nullptr;
    std::string tried;
    for (const char *name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
        handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (handle) break;
        const char *why = dlerror();
        tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
    }
    if (!handle) {
        lib.error = "cannot load libnvrtc (is the CUDA toolkit's lib folder on the library "
                    "path?): " +
                    tried;
        return lib;
    }
    // The library stays loaded for the life of the process.
    resolve(handle, "nvrtcCreateProgram", &lib.create_program, &lib.error);
    resolve(handle, "nvrtcDestroyProgram", &lib.destroy_program, &lib.error);
    resolve(handle, "nvrtcCompileProgram", &lib.compile_program, &lib.error);
    resolve(handle, "nvrtcGetProgramLogSize", &lib.get_program_log_size, &lib.error);
    resolve(handle, "nvrtcGetProgramLog", &lib.get_program_log, &lib.error);
    resolve(handle, "nvrtcGetPTXSize", &lib.get_ptx_size, &lib.error);
    resolve(handle, "nvrtcGetPTX", &lib.get_ptx, &lib.error);
    resolve(handle, "nvrtcGetCUBINSize", &lib.get_cubin_size, &lib.error);
    resolve(handle, "nvrtcGetCUBIN", &lib.get_cubin, &lib.error);
    resolve(handle, "nvrtcGetErrorString", &lib.get_error_string, &lib.error);
    return lib;
}

const NvrtcLibrary &nvrtc() {
    static const NvrtcLibrary lib = load_nvrtc();
    return lib;
}

const NvrtcLibrary &nvrtc_or_error(const std::string &program_name) {
    const NvrtcLibrary &lib = nvrtc();
    if (!lib.error.empty()) user_error("cuda: cannot compile ", program_name, ": ", lib.error);
    return lib;
}

/// "sm_90a" -> {"sm", "90a"}; CompileError for anything else.
std::pair<std::string, std::string> parse_arch(const std::string &arch) {
    std::smatch m;
    static const std::regex form("(sm|compute)_([0-9]+[a-z]?)");
    if (!std::regex_match(arch, m, form)) {
        user_error("cuda: architecture '", arch,
                   "' is not of the form sm_XX or compute_XX (e.g. sm_90)");
    }
    return {m[1], m[2]};
}

/// The source lines that NVRTC's log names ("kiln.cu(12): error: ..."), quoted with numbers.
std::string quote_lines(const std::string &log, const std::string &source,
                        const std::string &program_name) {
    std::set<int> numbers;
    std::string escaped =
        std::regex_replace(program_name, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
    std::regex where(escaped + R"(\((\d+)\))");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), where);
         it != std::sregex_iterator(); ++it) {
        numbers.insert(std::stoi((*it)[1]));
    }
    std::vector<std::string> lines;
    std::istringstream in(source);
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    std::string quoted;
    for (int n : numbers) {
        if (n < 1 || n > int(lines.size())) continue;
        quoted += "\n  " + program_name + ":" + std::to_string(n) + ": " + lines[size_t(n - 1)];
    }
    return quoted.empty() ? "" : "\nthe offending source line(s):" + quoted;
}

/// Compiles and returns PTX (or, when cubin is set, the cubin's bytes).
std::vector<char> compile(const std::string &source, const std::string &architecture,
                          const std::string &program_name, bool cubin) {
    const NvrtcLibrary &lib = nvrtc_or_error(program_name);
    nvrtcProgram program = nullptr;
    nvrtcResult r =
        lib.create_program(&program, source.c_str(), program_name.c_str(), 0, nullptr, nullptr);
    if (r != NVRTC_SUCCESS) {
        user_error("cuda: nvrtcCreateProgram failed for ", program_name, ": ",
                   lib.get_error_string(r));
    }
    struct Destroy {
        const NvrtcLibrary &lib;
        nvrtcProgram *program;
        ~Destroy() { lib.destroy_program(program); }
    } destroy{lib, &program};

    std::vector<std::string> options = nvrtc_options(architecture);
    std::vector<const char *> pointers;
    for (const std::string &o : options)
        pointers.push_back(o.c_str());
    r = lib.compile_program(program, int(pointers.size()), pointers.data());
    size_t log_size = 0;
    lib.get_program_log_size(program, &log_size);
    std::string log(log_size, '\0');
    if (log_size) lib.get_program_log(program, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
        log.pop_back();
    if (r != NVRTC_SUCCESS) {
        user_error("cuda: nvrtc could not compile ", program_name, " for ", architecture, " (",
                   lib.get_error_string(r), "):\n", log, quote_lines(log, source, program_name));
    }
    size_t size = 0;
    std::vector<char> result;
    if (cubin) {
        lib.get_cubin_size(program, &size);
        result.resize(size);
        if (size) lib.get_cubin(program, result.data());
    } else {
        lib.get_ptx_size(program, &size);
        result.resize(size);
        if (size) lib.get_ptx(program, result.data());
    }
    internal_assert(!result.empty(), "nvrtc returned no ", cubin ? "cubin" : "PTX", " for ",
                    program_name);
    return result;
}

} // namespace

bool nvrtc_available(std::string *why_not) {
    const NvrtcLibrary &lib = nvrtc();
    if (why_not) *why_not = lib.error;
    return lib.error.empty();
}

std::vector<std::string> nvrtc_options(const std::string &gpu_architecture) {
    return {"--gpu-architecture=" + gpu_architecture,
            "--std=c++17",
            "--fmad=false",
            "--ftz=false",
            "--prec-div=true",
            "--prec-sqrt=true"};
}

std::string compile_cuda_to_ptx(const std::string &source, const std::string &arch,
                                const std::string &program_name) {
    auto [kind, number] = parse_arch(arch);
    std::vector<char> ptx = compile(source, "compute_" + number, program_name, false);
    // NVRTC's PTX size counts the terminating NUL.
    std::string s(ptx.begin(), ptx.end());
    while (!s.empty() && s.back() == '\0')
        s.pop_back();
    return s;
}

std::vector<char> compile_cuda_to_cubin(const std::string &source, const std::string &arch,
                                        const std::string &program_name) {
    auto [kind, number] = parse_arch(arch);
    if (kind != "sm") {
        user_error("cuda: a cubin needs a real architecture such as sm_", number, ", got '", arch,
                   "' (compile_cuda_to_ptx takes virtual ones)");
    }
    return compile(source, arch, program_name, true);
}

} // namespace kiln
