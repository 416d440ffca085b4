#include "codegen/AOT.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "codegen/CUDABundle.h"
#include "codegen/CodeGenDevice.h"
#include "codegen/CodeGenLLVM.h"
#include "codegen/MultiTarget.h"
#include "codegen/ObjectEmitter.h"
#include "lang/Error.h"
#include "lang/IRPrinter.h"

namespace kiln {

namespace {

struct KindInfo {
    OutputKind kind;
    const char *name;
    const char *suffix;
};

const KindInfo kind_table[] = {
    {OutputKind::Object, "object", ".o"},
    {OutputKind::StaticLibrary, "static_library", ".a"},
    {OutputKind::CHeader, "c_header", ".h"},
    {OutputKind::Assembly, "assembly", ".s"},
    {OutputKind::LLVMIR, "llvm_ir", ".ll"},
    {OutputKind::LoweredStmt, "lowered_stmt", ".stmt"},
    {OutputKind::Metadata, "metadata", ".json"},
    {OutputKind::OpenCLSource, "opencl_source", ".cl"},
    {OutputKind::CUDASource, "cuda_source", ".cu"},
};

const KindInfo &info(OutputKind k) {
    for (const KindInfo &i : kind_table) {
        if (i.kind == k) return i;
    }
    internal_error("unknown output kind ", int(k));
}

// C99 and C++ keywords and the names a header would clash with: an argument or function called
// one of these cannot be declared.
const std::set<std::string> &keywords() {
    static const std::set<std::string> k = {
        "alignas",   "alignof",   "and",      "asm",      "auto",     "bool",         "break",
        "case",      "catch",     "char",     "class",    "const",    "constexpr",    "const_cast",
        "continue",  "default",   "delete",   "do",       "double",   "dynamic_cast", "else",
        "enum",      "explicit",  "export",   "extern",   "false",    "float",        "for",
        "friend",    "goto",      "if",       "inline",   "int",      "long",         "mutable",
        "namespace", "new",       "noexcept", "not",      "nullptr",  "operator",     "or",
        "private",   "protected", "public",   "register", "restrict", "return",       "short",
        "signed",    "sizeof",    "static",   "struct",   "switch",   "template",     "this",
        "throw",     "true",      "try",      "typedef",  "typeid",   "typename",     "union",
        "unsigned",  "using",     "virtual",  "void",     "volatile", "while",        "xor",
        "_Bool",     "main",
    };
    return k;
}

bool is_identifier_char(char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
}

/// The C type of a scalar argument, as the typed entry point takes it.
std::string scalar_c_type(const LoweredArgument &a) {
    const Type &t = a.type;
    bool ok = t.lanes == 1 && (t.is_bool() ||
                               ((t.is_int() || t.is_uint()) &&
                                (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64)) ||
                               (t.is_float() && (t.bits == 32 || t.bits == 64)));
    if (!ok) {
        user_error("param '", a.name, "' has type ", t,
                   ", which has no C type for an ahead-of-time entry point; use an integer of "
                   "8 to 64 bits, float32, float64 or bool");
    }
    return t.c_name();
}

/// The header names of f's arguments: sanitized and made unique.
std::vector<std::string> c_argument_names(const LoweredFunc &f) {
    std::vector<std::string> names;
    std::set<std::string> used;
    for (const LoweredArgument &a : f.args) {
        std::string base = c_argument_name(a.name), n = base;
        for (int i = 2; used.count(n); i++)
            n = base + "_" + std::to_string(i);
        used.insert(n);
        names.push_back(n);
    }
    return names;
}

std::string describe(const LoweredArgument &a) {
    std::ostringstream s;
    if (a.kind == LoweredArgument::Scalar) {
        s << "scalar param, " << a.type;
    } else {
        s << (a.is_output ? "output" : "input") << " buffer, " << a.type << ", " << a.dimensions
          << "-D";
    }
    return s.str();
}

std::string json_string(const std::string &text) {
    std::string r = "\"";
    for (char c : text) {
        switch (c) {
        case '"':
            r += "\\\"";
            break;
        case '\\':
            r += "\\\\";
            break;
        case '\n':
            r += "\\n";
            break;
        case '\t':
            r += "\\t";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                r += buf;
            } else {
                r += c;
            }
        }
    }
    return r + "\"";
}

void make_parent_directory(const std::string &path) {
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (parent.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) {
        runtime_error("cannot create the output directory '", parent.string(), "' for '", path,
                      "': ", ec.message());
    }
}

} // namespace

std::vector<OutputKind> all_output_kinds() {
    std::vector<OutputKind> r;
    for (const KindInfo &i : kind_table)
        r.push_back(i.kind);
    return r;
}

std::string output_suffix(OutputKind k) {
    return info(k).suffix;
}

std::string output_kind_name(OutputKind k) {
    return info(k).name;
}

OutputKind parse_output_kind(const std::string &name) {
    std::string known;
    for (const KindInfo &i : kind_table) {
        if (name == i.name) return i.kind;
        known += std::string(known.empty() ? "" : ", ") + i.name;
    }
    user_error("unknown output kind '", name, "' (known: ", known, ")");
}

std::vector<OutputKind> parse_output_kinds(const std::string &names) {
    std::vector<OutputKind> kinds;
    std::stringstream stream(names);
    std::string name;
    while (std::getline(stream, name, ',')) {
        if (name.empty()) continue;
        OutputKind kind = parse_output_kind(name);
        if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
    }
    if (kinds.empty()) user_error("no output kind named in '", names, "'");
    return kinds;
}

OutputSet OutputSet::in_directory(const std::string &dir, const std::string &base,
                                  const std::vector<OutputKind> &kinds) {
    OutputSet s;
    for (OutputKind k : kinds) {
        s.paths[k] = (std::filesystem::path(dir) / (base + output_suffix(k))).string();
    }
    return s;
}

const std::string &OutputSet::path(OutputKind k) const {
    auto it = paths.find(k);
    if (it == paths.end()) {
        user_error("the output set has no path for ", output_kind_name(k));
    }
    return it->second;
}

void check_c_identifier(const std::string &name, const std::string &what) {
    bool ok = !name.empty();
    for (size_t i = 0; i < name.size() && ok; i++)
        ok = is_identifier_char(name[i], i == 0);
    if (!ok) {
        user_error(what, " '", name,
                   "' is not a C identifier; use letters, digits and '_', not starting with a "
                   "digit");
    }
    if (keywords().count(name)) {
        user_error(what, " '", name, "' is a C or C++ keyword; choose another name");
    }
}

std::string c_argument_name(const std::string &name) {
    std::string r;
    for (size_t i = 0; i < name.size(); i++) {
        r += is_identifier_char(name[i], false) ? name[i] : '_';
    }
    if (r.empty() || !is_identifier_char(r[0], true) || keywords().count(r)) r = "_" + r;
    return r;
}

std::string c_signature(const LoweredFunc &f) {
    check_c_identifier(f.name, "function name");
    std::vector<std::string> names = c_argument_names(f);
    std::ostringstream s;
    s << "int " << f.name << "(";
    for (size_t i = 0; i < f.args.size(); i++) {
        const LoweredArgument &a = f.args[i];
        if (i) s << ", ";
        if (a.kind == LoweredArgument::Buffer) {
            s << "kiln_buffer_t *" << names[i];
        } else {
            s << scalar_c_type(a) << " " << names[i];
        }
    }
    if (f.args.empty()) s << "void";
    s << ")";
    return s.str();
}

std::string c_header_text(const LoweredFunc &f, const Target &t, const std::string &guard_name) {
    return c_header_text(f, std::vector<Target>{t}, guard_name);
}

std::string c_header_text(const LoweredFunc &f, const std::vector<Target> &targets,
                          const std::string &guard_name) {
    internal_assert(!targets.empty(), "c_header_text: no target");
    std::string signature = c_signature(f);
    std::vector<std::string> names = c_argument_names(f);
    bool has_bool = false;
    for (const LoweredArgument &a : f.args) {
        has_bool |= a.kind == LoweredArgument::Scalar && a.type.is_bool();
    }
    std::string guard = "KILN_KERNEL_";
    for (char c : guard_name.empty() ? f.name : guard_name) {
        guard +=
            is_identifier_char(c, false) ? char(std::toupper(static_cast<unsigned char>(c))) : '_';
    }
    guard += "_H";

    std::ostringstream s;
    s << "/* " << f.name << ": a kiln kernel compiled ahead of time. Generated; do not edit.\n";
    if (targets.size() == 1) {
        s << " * Target: " << targets[0].to_string() << "\n";
    } else {
        std::vector<std::string> names = target_variant_names(targets);
        s << " * Multi-target: one variant per target. Each call runs the first variant whose CPU\n"
          << " * features this CPU has, else the last; KILN_FORCE_TARGET=<name or index> or\n"
          << " * kiln_force_target() picks one. Variants, in order:\n";
        for (size_t i = 0; i < targets.size(); i++) {
            s << " *   " << i << " " << names[i] << ": " << targets[i].to_string() << "\n";
        }
    }
    s << " *\n"
      << " * Arguments, in order:\n";
    for (size_t i = 0; i < f.args.size(); i++) {
        s << " *   " << names[i] << ": " << describe(f.args[i]) << "\n";
    }
    s << " *\n"
      << " * Buffers are checked at entry (type, dimensions, and that the region the kernel reads\n"
      << " * or writes lies inside each buffer). Returns kiln_success (0) or a kiln_error_code_t;\n"
      << " * kiln_last_error_message() then says what went wrong. Link with libkiln_runtime.a,\n"
      << " * OpenMP (-fopenmp) and libm. */\n"
      << "#ifndef " << guard << "\n"
      << "#define " << guard << "\n\n"
      << "#include \"kiln_runtime.h\"\n";
    if (has_bool) {
        s << "#ifndef __cplusplus\n#include <stdbool.h>\n#endif\n";
    }
    s << "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
      << signature << ";\n\n"
      << "/* The same entry point with args[i] pointing at the i-th argument (the buffer pointer\n"
      << " * or the scalar). */\n"
      << "int " << f.name << "_argv(void **args);\n\n"
      << "#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n"
      << "#endif /* " << guard << " */\n";
    return s.str();
}

std::string metadata_json(const LoweredFunc &f, const Target &t) {
    std::vector<std::string> names = c_argument_names(f);
    std::ostringstream s;
    s << "{\n"
      << "  \"name\": " << json_string(f.name) << ",\n"
      << "  \"target\": " << json_string(t.to_string()) << ",\n"
      << "  \"signature\": " << json_string(c_signature(f)) << ",\n"
      << "  \"arguments\": [";
    for (size_t i = 0; i < f.args.size(); i++) {
        const LoweredArgument &a = f.args[i];
        bool buffer = a.kind == LoweredArgument::Buffer;
        std::ostringstream type;
        type << a.type;
        s << (i ? ",\n" : "\n") << "    {\"name\": " << json_string(a.name)
          << ", \"c_name\": " << json_string(names[i])
          << ", \"kind\": " << (buffer ? "\"buffer\"" : "\"scalar\"")
          << ", \"direction\": " << (a.is_output ? "\"output\"" : "\"input\"")
          << ", \"type\": " << json_string(type.str())
          << ", \"dimensions\": " << (buffer ? a.dimensions : 0) << "}";
    }
    s << (f.args.empty() ? "]\n" : "\n  ]\n") << "}\n";
    return s.str();
}

std::string lowered_stmt_text(const LoweredFunc &f) {
    std::ostringstream s;
    s << "// " << c_signature(f) << "\n";
    for (size_t i = 0; i < f.args.size(); i++) {
        s << "//   " << f.args[i].name << ": " << describe(f.args[i]) << "\n";
    }
    s << to_string(f.body);
    for (const DeviceKernel &k : f.kernels)
        s << describe_kernel(k);
    std::string r = s.str();
    if (r.empty() || r.back() != '\n') r += "\n";
    return r;
}

LoweredFunc with_argument_order(LoweredFunc f, const std::vector<std::string> &inputs) {
    if (inputs.empty()) return f;
    std::vector<LoweredArgument> ordered, outputs;
    std::string known;
    for (const LoweredArgument &a : f.args) {
        if (!a.is_output) known += (known.empty() ? "" : ", ") + a.name;
    }
    std::set<std::string> seen;
    for (const std::string &name : inputs) {
        if (!seen.insert(name).second) {
            user_error("argument order of '", f.name, "': '", name, "' is given twice");
        }
        auto it = std::find_if(f.args.begin(), f.args.end(), [&](const LoweredArgument &a) {
            return !a.is_output && a.name == name;
        });
        if (it == f.args.end()) {
            user_error("argument order of '", f.name, "': '", name,
                       "' is not an input of the pipeline (inputs: ", known, ")");
        }
        ordered.push_back(*it);
    }
    for (const LoweredArgument &a : f.args) {
        if (a.is_output) {
            outputs.push_back(a);
        } else if (!seen.count(a.name)) {
            user_error("argument order of '", f.name, "' leaves out the input '", a.name,
                       "' (inputs: ", known, ")");
        }
    }
    ordered.insert(ordered.end(), outputs.begin(), outputs.end());
    f.args = std::move(ordered);
    return f;
}

namespace {

// The object code of f for t, with the GPU kernels' source (and for CUDA, PTX and cubins).
LLVMModule module_for(const LoweredFunc &f, const Target &t, const std::string &device_source) {
    // A CUDA object carries PTX and cubins for t.cuda_archs beside the source, so it runs
    // without NVRTC on the machine that links it (codegen/CUDABundle.h).
    std::string embedded = t.gpu == GpuApi::CUDA && !device_source.empty()
                               ? make_cuda_bundle(device_source, t.cuda_archs)
                               : device_source;
    return compile_to_llvm_module(f, t, embedded);
}

// Kernels of several variants are a static library with its C header, metadata and lowered
// statements: a CompileError "<kernel>: cannot write <kind>; <what> is a static_library ..." for
// any other kind asked for. Creates the outputs' folders.
void check_library_outputs(const OutputSet &outputs, const std::string &kernel,
                           const std::string &what, const std::string &hint) {
    for (const auto &[kind, path] : outputs.paths) {
        if (kind != OutputKind::StaticLibrary && kind != OutputKind::CHeader &&
            kind != OutputKind::Metadata && kind != OutputKind::LoweredStmt) {
            user_error(kernel, ": cannot write ", output_kind_name(kind), "; ", what,
                       " is a static_library with its c_header (and metadata, lowered_stmt)", hint);
        }
        if (path.empty()) user_error("the output path for ", output_kind_name(kind), " is empty");
        make_parent_directory(path);
    }
}

} // namespace

void compile_lowered_to(const LoweredFunc &f, const std::vector<Target> &targets,
                        const OutputSet &outputs) {
    compile_lowered_to(std::vector<LoweredFunc>(targets.size(), f), targets, outputs);
}

void compile_lowered_to(const std::vector<LoweredFunc> &variants,
                        const std::vector<Target> &targets, const OutputSet &outputs) {
    internal_assert(variants.size() == targets.size(), "compile_lowered_to: ", variants.size(),
                    " lowered variants for ", targets.size(), " targets");
    if (targets.empty()) {
        user_error("a kernel's list of targets is empty; name at least one, e.g. host");
    }
    const LoweredFunc &f = variants.back();
    if (targets.size() == 1) {
        compile_lowered_to(f, targets[0], outputs);
        return;
    }
    check_c_identifier(f.name, "function name");
    for (size_t i = 0; i < variants.size(); i++) {
        if (variants[i].name != f.name || c_signature(variants[i]) != c_signature(f)) {
            user_error("the variants of a multi-target kernel must have one signature: for ",
                       targets[i].cpu, " it is '", c_signature(variants[i]), "', for ",
                       targets.back().cpu, " '", c_signature(f), "'");
        }
    }
    check_library_outputs(
        outputs, "kernel '" + f.name + "' for " + std::to_string(targets.size()) + " targets",
        "a multi-target kernel", "; compile for one target to get the others");
    std::vector<std::string> names = target_variant_names(targets), symbols;
    std::vector<uint64_t> required;
    std::vector<std::pair<std::string, std::string>> members;
    if (outputs.has(OutputKind::StaticLibrary)) {
        for (size_t i = 0; i < targets.size(); i++) {
            LoweredFunc variant = variants[i];
            variant.name = f.name + "_" + c_argument_name(names[i]);
            symbols.push_back(variant.name);
            required.push_back(required_cpu_features(targets[i]));
            members.emplace_back(
                variant.name + ".o",
                module_for(variant, targets[i], kernel_source(variant, targets[i])).object_code());
        }
        members.emplace_back(
            f.name + ".o",
            compile_dispatcher(f, targets.back(), names, symbols, required).object_code());
        write_output_file(outputs.path(OutputKind::StaticLibrary), make_static_library(members),
                          "a static library");
    }
    if (outputs.has(OutputKind::CHeader)) {
        std::string base = std::filesystem::path(outputs.path(OutputKind::CHeader)).stem().string();
        write_output_file(outputs.path(OutputKind::CHeader), c_header_text(f, targets, base),
                          "a C header");
    }
    if (outputs.has(OutputKind::LoweredStmt)) {
        write_output_file(outputs.path(OutputKind::LoweredStmt), lowered_stmt_text(f),
                          "the lowered statement");
    }
    if (outputs.has(OutputKind::Metadata)) {
        write_output_file(outputs.path(OutputKind::Metadata), metadata_json(f, targets.back()),
                          "metadata");
    }
}

void compile_shape_dispatched(const std::vector<LoweredFunc> &variants,
                              const std::vector<std::vector<int64_t>> &shapes,
                              const std::vector<std::string> &notes, const Target &t,
                              const OutputSet &outputs) {
    compile_shape_dispatched(std::vector<std::vector<LoweredFunc>>{variants}, shapes,
                             std::vector<std::vector<std::string>>{notes}, std::vector<Target>{t},
                             outputs);
}

void compile_shape_dispatched(const std::vector<std::vector<LoweredFunc>> &variants,
                              const std::vector<std::vector<int64_t>> &shapes,
                              const std::vector<std::vector<std::string>> &notes,
                              const std::vector<Target> &targets, const OutputSet &outputs) {
    if (targets.empty()) {
        user_error("a kernel's list of targets is empty; name at least one, e.g. host");
    }
    internal_assert(variants.size() == targets.size() && notes.size() == targets.size(),
                    "compile_shape_dispatched: ", variants.size(), " variant lists and ",
                    notes.size(), " note lists for ", targets.size(), " targets");
    for (size_t i = 0; i < targets.size(); i++) {
        internal_assert(variants[i].size() == shapes.size() + 1 &&
                            notes[i].size() == variants[i].size(),
                        "compile_shape_dispatched: ", variants[i].size(), " variants, ",
                        shapes.size(), " shapes and ", notes[i].size(), " notes");
    }
    const LoweredFunc &f = variants.back().back();
    check_c_identifier(f.name, "function name");
    for (const std::vector<LoweredFunc> &per_target : variants) {
        for (const LoweredFunc &v : per_target) {
            if (v.name != f.name || c_signature(v) != c_signature(f)) {
                user_error("the variants of a shape-dispatched kernel must have one signature: '",
                           c_signature(v), "' and '", c_signature(f), "'");
            }
        }
    }
    check_library_outputs(outputs,
                          "kernel '" + f.name + "' dispatched on " + std::to_string(shapes.size()) +
                              " shapes",
                          "a shape-dispatched kernel", "");
    std::vector<std::string> shape_names;
    for (const std::vector<int64_t> &shape : shapes) {
        std::string name;
        for (int64_t e : shape)
            name += (name.empty() ? "" : "x") + std::to_string(e);
        shape_names.push_back(name);
    }
    shape_names.push_back("generic");
    // One target: <f>_<shape> variants behind a shape dispatcher named f. Several: per target
    // i, <f>_<target>_<shape> variants behind a shape dispatcher <f>_<target>, and f picks the
    // target by CPU features (compile_dispatcher) as a multi-target kernel does.
    bool multi = targets.size() > 1;
    std::vector<std::string> target_names = target_variant_names(targets);
    auto prefix_of = [&](size_t i) {
        return multi ? f.name + "_" + c_argument_name(target_names[i]) : f.name;
    };
    if (outputs.has(OutputKind::StaticLibrary)) {
        std::vector<std::pair<std::string, std::string>> members;
        std::vector<std::string> target_symbols;
        std::vector<uint64_t> required;
        for (size_t i = 0; i < targets.size(); i++) {
            std::vector<std::string> symbols;
            for (size_t j = 0; j < variants[i].size(); j++) {
                LoweredFunc variant = variants[i][j];
                variant.name = prefix_of(i) + "_" + c_argument_name(shape_names[j]);
                symbols.push_back(variant.name);
                members.emplace_back(
                    variant.name + ".o",
                    module_for(variant, targets[i], kernel_source(variant, targets[i]))
                        .object_code());
            }
            LoweredFunc dispatcher = f;
            dispatcher.name = prefix_of(i);
            members.emplace_back(
                dispatcher.name + ".o",
                compile_shape_dispatcher(dispatcher, targets[i], shape_names, symbols, shapes)
                    .object_code());
            target_symbols.push_back(dispatcher.name);
            required.push_back(required_cpu_features(targets[i]));
        }
        if (multi) {
            members.emplace_back(
                f.name + "_targets.o",
                compile_dispatcher(f, targets.back(), target_names, target_symbols, required)
                    .object_code());
        }
        write_output_file(outputs.path(OutputKind::StaticLibrary), make_static_library(members),
                          "a static library");
    }
    if (outputs.has(OutputKind::CHeader)) {
        std::string base = std::filesystem::path(outputs.path(OutputKind::CHeader)).stem().string();
        std::string text = c_header_text(f, targets, base);
        std::string block = " * Shape-dispatched: each call runs the schedule of the output's "
                            "extents, or the\n * generic one for any other shape "
                            "(kiln_last_shape_variant() names it). Schedules:\n";
        for (size_t i = 0; i < targets.size(); i++) {
            for (size_t j = 0; j < shape_names.size(); j++) {
                block += " *   " + (multi ? target_names[i] + " " : std::string()) +
                         shape_names[j] + ": " + notes[i][j] + "\n";
            }
        }
        size_t at = text.find(" *\n * Arguments, in order:");
        internal_assert(at != std::string::npos, "c_header_text has no argument list");
        text.insert(at, block);
        write_output_file(outputs.path(OutputKind::CHeader), text, "a C header");
    }
    if (outputs.has(OutputKind::LoweredStmt)) {
        std::string text;
        for (size_t i = 0; i < targets.size(); i++) {
            for (size_t j = 0; j < shape_names.size(); j++) {
                text += "// ---- " + (multi ? target_names[i] + " " : std::string()) +
                        shape_names[j] + "\n" + lowered_stmt_text(variants[i][j]);
            }
        }
        write_output_file(outputs.path(OutputKind::LoweredStmt), text, "the lowered statement");
    }
    if (outputs.has(OutputKind::Metadata)) {
        write_output_file(outputs.path(OutputKind::Metadata), metadata_json(f, targets.back()),
                          "metadata");
    }
}

void compile_lowered_to(const LoweredFunc &f, const Target &t, const OutputSet &outputs) {
    check_c_identifier(f.name, "function name");
    // Validate every argument (and build the texts) before writing anything.
    std::string signature = c_signature(f);
    for (const auto &[kind, path] : outputs.paths) {
        if (path.empty()) user_error("the output path for ", output_kind_name(kind), " is empty");
        make_parent_directory(path);
    }
    bool needs_llvm = outputs.has(OutputKind::Object) || outputs.has(OutputKind::StaticLibrary) ||
                      outputs.has(OutputKind::Assembly) || outputs.has(OutputKind::LLVMIR);
    std::string device_source = kernel_source(f, t);
    if (needs_llvm) {
        LLVMModule module = module_for(f, t, device_source);
        if (outputs.has(OutputKind::LLVMIR)) module.write_llvm_ir(outputs.path(OutputKind::LLVMIR));
        if (outputs.has(OutputKind::Assembly)) {
            module.write_assembly(outputs.path(OutputKind::Assembly));
        }
        if (outputs.has(OutputKind::Object) || outputs.has(OutputKind::StaticLibrary)) {
            std::string object = module.object_code();
            if (outputs.has(OutputKind::Object)) {
                write_output_file(outputs.path(OutputKind::Object), object, "an object file");
            }
            if (outputs.has(OutputKind::StaticLibrary)) {
                write_output_file(outputs.path(OutputKind::StaticLibrary),
                                  make_static_library(object, f.name + ".o"), "a static library");
            }
        }
    }
    if (outputs.has(OutputKind::CHeader)) {
        std::string base = std::filesystem::path(outputs.path(OutputKind::CHeader)).stem().string();
        write_output_file(outputs.path(OutputKind::CHeader), c_header_text(f, t, base),
                          "a C header");
    }
    if (outputs.has(OutputKind::LoweredStmt)) {
        write_output_file(outputs.path(OutputKind::LoweredStmt), lowered_stmt_text(f),
                          "the lowered statement");
    }
    if (outputs.has(OutputKind::Metadata)) {
        write_output_file(outputs.path(OutputKind::Metadata), metadata_json(f, t), "metadata");
    }
    // The kernels' source, for reading: the object embeds the same text.
    OutputKind source_kind =
        t.gpu == GpuApi::CUDA ? OutputKind::CUDASource : OutputKind::OpenCLSource;
    if (!device_source.empty() && outputs.has(source_kind)) {
        write_output_file(outputs.path(source_kind), device_source, "the kernels' source");
    }
}

} // namespace kiln
