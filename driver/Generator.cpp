#include "driver/Generator.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "lang/Error.h"

namespace kiln {

namespace {

struct Registry {
    std::mutex mutex;
    std::map<std::string, GeneratorFunction> generators;
    /// Errors raised while registering at program start, reported by kiln_generator_main.
    std::vector<std::string> startup_errors;
};

Registry &registry() {
    static Registry r;
    return r;
}

std::string known_generators() {
    std::vector<std::string> names = generator_names();
    if (names.empty()) return "none is registered; define one with KILN_REGISTER_GENERATOR";
    std::string r = "known: ";
    for (size_t i = 0; i < names.size(); i++)
        r += (i ? ", " : "") + names[i];
    return r;
}

std::vector<std::string> split(const std::string &text, char sep) {
    std::vector<std::string> r;
    size_t start = 0;
    while (true) {
        size_t end = text.find(sep, start);
        r.push_back(text.substr(start, end - start));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return r;
}

const char *usage =
    "usage: %s -o DIR [-g GENERATOR] [-f FUNCTION] [-n FILE_BASE] [-t TARGET ...] [-e KINDS] "
    "[key=value ...]\n"
    "       %s --list\n"
    "       %s --kiln-worker   (the tuner's measuring worker, started by kiln tune --generator)\n"
    "  -o DIR        where to write the files (created if missing)\n"
    "  -g GENERATOR  which registered generator to run (optional when there is one)\n"
    "  -f FUNCTION   the C name of the entry point (default: the generator name)\n"
    "  -n FILE_BASE  the files' base name (default: the function name)\n"
    "  -t TARGET     host (this machine), an x86-64 level (x86-64-v2, x86-64-v3, x86-64-v4) or\n"
    "                a CPU name (skylake-avx512, znver4, ...), each with -cuda or -opencl and\n"
    "                ;key=value (host;fast_math=1), or a full target string (default: host).\n"
    "                Several -t make one multi-target library: the generator runs once per\n"
    "                target and each call runs the first variant whose CPU features the CPU\n"
    "                has, else the last (list the most portable target last)\n"
    "  -e KINDS      comma-separated: object, static_library, c_header, assembly, llvm_ir,\n"
    "                lowered_stmt, metadata (default: static_library,c_header,metadata)\n"
    "  key=value     parameters the generator reads from its GeneratorContext\n"
    "  --shapes A,B  with --db DB and/or --lock kiln.lock.json: one kernel with a schedule per\n"
    "                output shape (the database's best record, else the lockfile's) and the\n"
    "                generator's own for any other shape (kiln_add_kernel SHAPES)\n";

} // namespace

bool GeneratorContext::has(const std::string &key) const {
    read.insert(key);
    return params.count(key) != 0;
}

std::string GeneratorContext::get(const std::string &key, const std::string &fallback) const {
    read.insert(key);
    auto it = params.find(key);
    return it == params.end() ? fallback : it->second;
}

int64_t GeneratorContext::get_int(const std::string &key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const std::string &v = params.at(key);
    char *end = nullptr;
    errno = 0;
    long long r = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno == ERANGE) {
        user_error("generator parameter '", key, "' must be an integer, got '", v, "'");
    }
    return r;
}

double GeneratorContext::get_float(const std::string &key, double fallback) const {
    if (!has(key)) return fallback;
    const std::string &v = params.at(key);
    char *end = nullptr;
    double r = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') {
        user_error("generator parameter '", key, "' must be a number, got '", v, "'");
    }
    return r;
}

bool GeneratorContext::get_bool(const std::string &key, bool fallback) const {
    if (!has(key)) return fallback;
    const std::string &v = params.at(key);
    if (v == "1" || v == "true" || v == "on") return true;
    if (v == "0" || v == "false" || v == "off") return false;
    user_error("generator parameter '", key, "' must be 1/0, true/false or on/off, got '", v, "'");
}

std::vector<int64_t> parse_shape_text(const std::string &text, const std::string &what) {
    std::vector<int64_t> shape;
    for (const std::string &piece : split(text, text.find(',') != std::string::npos ? ',' : 'x')) {
        bool digits =
            !piece.empty() && piece.size() <= 10 &&
            std::all_of(piece.begin(), piece.end(), [](char c) { return c >= '0' && c <= '9'; });
        long long v = digits ? std::stoll(piece) : 0;
        if (!digits || v <= 0 || v > 0x7fffffffLL) {
            user_error(what, " '", text, "': '", piece,
                       "' is not a positive integer below 2^31; write extents like 4096x4096");
        }
        shape.push_back(v);
    }
    return shape;
}

std::vector<int64_t> GeneratorContext::get_shape(const std::string &key,
                                                 std::vector<int64_t> fallback) const {
    if (!has(key)) return fallback;
    return parse_shape_text(params.at(key), "generator parameter '" + key + "'");
}

std::vector<int64_t> GeneratorContext::shape(const std::vector<std::string> &names,
                                             const std::vector<int64_t> &defaults) {
    if (!shape_names_.empty()) user_error("shape: the generator declares its shape twice");
    if (names.empty() || names.size() != defaults.size()) {
        user_error("shape: give one name per default value (", names.size(), " names, ",
                   defaults.size(), " defaults)");
    }
    for (size_t i = 0; i < names.size(); i++) {
        check_c_identifier(names[i], "shape name");
        if (std::find(names.begin(), names.begin() + long(i), names[i]) != names.begin() + long(i))
            user_error("shape: the name '", names[i], "' is listed twice");
        if (defaults[i] < 1 || defaults[i] > INT32_MAX)
            user_error("shape: the default of '", names[i], "' is ", defaults[i],
                       "; give a value in 1..2^31-1");
    }
    shape_names_ = names;
    default_shape_ = defaults;
    std::string listed;
    for (const std::string &n : names)
        listed += (listed.empty() ? "" : ", ") + n;
    if (!tuning_shape.empty()) {
        if (tuning_shape.size() != names.size()) {
            user_error("the shape being tuned has ", tuning_shape.size(),
                       " values, but the generator's shape is ", names.size(), " (", listed, ")");
        }
        return tuning_shape;
    }
    std::vector<int64_t> values = defaults;
    for (size_t i = 0; i < names.size(); i++) {
        values[i] = get_int(names[i], defaults[i]);
        if (values[i] < 1 || values[i] > INT32_MAX)
            user_error("shape: parameter '", names[i], "' is ", values[i],
                       "; give a value in 1..2^31-1");
    }
    return values;
}

void GeneratorContext::set_gpu_limits(int64_t max_threads_per_block, int64_t shared_memory_bytes) {
    gpu_threads = std::clamp<int64_t>(max_threads_per_block, 1, 1024);
    gpu_shared = std::clamp<int64_t>(shared_memory_bytes, 0, int64_t(48) * 1024);
}

std::string GeneratorContext::knob_value(GeneratorKnob declared,
                                         const std::vector<std::string> &texts) {
    const std::string name = declared.name;
    check_c_identifier(name, "knob name");
    if (texts.empty()) user_error("knob '", name, "' has no values; list at least one");
    for (size_t i = 0; i < texts.size(); i++) {
        if (std::find(texts.begin(), texts.begin() + i, texts[i]) != texts.begin() + i)
            user_error("knob '", name, "' lists the value ", texts[i], " twice");
    }
    auto same = std::find_if(knob_list.begin(), knob_list.end(),
                             [&](const GeneratorKnob &k) { return k.name == name; });
    if (same != knob_list.end()) {
        if (same->kind != declared.kind || same->integers != declared.integers ||
            same->choices != declared.choices)
            user_error("knob '", name, "' is declared twice with different values");
        return chosen.at(name);
    }
    std::string value = texts[0];
    auto tuned = knob_values.find(name);
    if (tuned != knob_values.end()) {
        value = tuned->second;
    } else if (has(name)) {
        value = params.at(name);
    }
    if (std::find(texts.begin(), texts.end(), value) == texts.end()) {
        std::string legal;
        for (const std::string &t : texts)
            legal += (legal.empty() ? "" : ", ") + t;
        user_error("knob '", name, "' cannot be ", value, "; its values are ", legal);
    }
    knob_list.push_back(std::move(declared));
    chosen[name] = value;
    return value;
}

int64_t GeneratorContext::knob(const std::string &name, const std::vector<int64_t> &values) {
    GeneratorKnob k;
    k.name = name;
    k.integers = values;
    std::vector<std::string> texts;
    for (int64_t v : values)
        texts.push_back(std::to_string(v));
    return std::stoll(knob_value(std::move(k), texts));
}

int64_t GeneratorContext::knob_range(const std::string &name, int64_t lo, int64_t hi,
                                     int64_t step) {
    if (step <= 0 || lo > hi || (hi - lo) / step >= 100000)
        user_error("knob '", name, "': range ", lo, "..", hi, " step ", step,
                   " must have lo <= hi, a positive step and at most 100000 values");
    std::vector<int64_t> values;
    for (int64_t v = lo; v <= hi; v += step)
        values.push_back(v);
    return knob(name, values);
}

std::string GeneratorContext::knob_choice(const std::string &name,
                                          const std::vector<std::string> &values) {
    GeneratorKnob k;
    k.name = name;
    k.kind = GeneratorKnob::Kind::choice;
    k.choices = values;
    return knob_value(std::move(k), values);
}

void GeneratorContext::constraint(const std::string &description, bool holds) {
    if (holds) return;
    std::string values;
    for (const GeneratorKnob &k : knob_list)
        values += (values.empty() ? "" : ", ") + k.name + "=" + chosen.at(k.name);
    user_error("generator constraint '", description, "' does not hold for ",
               values.empty() ? "these parameters" : values);
}

void GeneratorContext::set_tolerance(double tolerance) {
    if (!(tolerance >= 0) || !std::isfinite(tolerance))
        user_error("set_tolerance: ", tolerance, " must be a finite number >= 0");
    tolerance_ = tolerance;
}

std::vector<std::string> GeneratorContext::unused() const {
    std::vector<std::string> r;
    for (const auto &[key, value] : params) {
        if (!read.count(key)) r.push_back(key);
    }
    return r;
}

void GeneratorContext::check_all_used(const std::string &generator_name) const {
    std::string unused, used;
    for (const auto &[key, value] : params) {
        if (!read.count(key)) unused += (unused.empty() ? "'" : ", '") + key + "'";
    }
    if (unused.empty()) return;
    for (const std::string &key : read)
        used += (used.empty() ? "" : ", ") + key;
    user_error("generator '", generator_name, "' does not read the parameter(s) ", unused,
               "; it reads: ", used.empty() ? "no parameters" : used,
               " (check the spelling in PARAMS)");
}

void register_generator(const std::string &name, GeneratorFunction fn) {
    check_c_identifier(name, "generator name");
    if (!fn) user_error("generator '", name, "' has no function");
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.generators.emplace(name, std::move(fn)).second) {
        user_error("generator '", name,
                   "' is registered twice; give each KILN_REGISTER_GENERATOR its own name");
    }
}

GeneratorRegistration::GeneratorRegistration(const char *name, GeneratorFunction fn) {
    try {
        register_generator(name, std::move(fn));
    } catch (const CompileError &e) {
        // Too early to report (static initialization): kiln_generator_main reports it.
        Registry &r = registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        r.startup_errors.push_back(e.what());
    }
}

std::vector<std::string> generator_names() {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::vector<std::string> names;
    for (const auto &entry : r.generators)
        names.push_back(entry.first);
    return names;
}

bool has_generator(const std::string &name) {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return r.generators.count(name) != 0;
}

std::vector<std::string> generator_registration_errors() {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return r.startup_errors;
}

Pipeline run_generator(const std::string &name, GeneratorContext &context, bool check_unused) {
    GeneratorFunction fn;
    {
        Registry &r = registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        auto it = r.generators.find(name);
        if (it != r.generators.end()) fn = it->second;
    }
    if (!fn) user_error("no generator called '", name, "' (", known_generators(), ")");
    Pipeline p = fn(context);
    if (check_unused) context.check_all_used(name);
    return p;
}

Target parse_target_string(const std::string &text) {
    return Target::parse(text);
}

int kiln_generator_main(int argc, char **argv) {
    const char *program = argc > 0 ? argv[0] : "generator";
    try {
        {
            Registry &r = registry();
            std::lock_guard<std::mutex> lock(r.mutex);
            if (!r.startup_errors.empty()) {
                for (const std::string &e : r.startup_errors) {
                    std::fprintf(stderr, "%s: error: %s\n", program, e.c_str());
                }
                return 1;
            }
        }
        std::string out_dir, generator, function, file_base;
        std::vector<std::string> targets;
        std::string emit = "static_library,c_header,metadata";
        std::map<std::string, std::string> params;
        for (int i = 1; i < argc; i++) {
            std::string a = argv[i];
            if (a == "--list") {
                for (const std::string &n : generator_names())
                    std::printf("%s\n", n.c_str());
                return 0;
            }
            if (a == "-h" || a == "--help") {
                std::printf(usage, program, program, program);
                return 0;
            }
            if (a == "-o" || a == "-g" || a == "-f" || a == "-n" || a == "-t" || a == "-e") {
                if (i + 1 >= argc) user_error("option ", a, " needs a value");
                std::string v = argv[++i];
                if (a == "-o") out_dir = v;
                if (a == "-g") generator = v;
                if (a == "-f") function = v;
                if (a == "-n") file_base = v;
                if (a == "-t") targets.push_back(v);
                if (a == "-e") emit = v;
                continue;
            }
            size_t eq = a.find('=');
            if (eq == std::string::npos || eq == 0 || a[0] == '-') {
                user_error("unexpected argument '", a,
                           "'; expected an option (-o, -g, -f, -n, -t, -e) or key=value");
            }
            std::string key = a.substr(0, eq);
            if (params.count(key)) user_error("generator parameter '", key, "' is given twice");
            params[key] = a.substr(eq + 1);
        }
        if (out_dir.empty()) user_error("no output directory; pass -o DIR");
        if (generator.empty()) {
            std::vector<std::string> names = generator_names();
            if (names.size() != 1) {
                user_error("this program registers ", names.size(),
                           " generators; choose one with -g (GENERATOR_NAME in kiln_add_kernel) (",
                           known_generators(), ")");
            }
            generator = names[0];
        }
        if (function.empty()) function = generator;
        if (file_base.empty()) file_base = function;
        check_c_identifier(function, "function name");
        std::vector<OutputKind> kinds = parse_output_kinds(emit);
        if (targets.empty()) targets.push_back("host");
        OutputSet outputs = OutputSet::in_directory(out_dir, file_base, kinds);
        if (targets.size() == 1) {
            GeneratorContext context(parse_target_string(targets[0]), params);
            Pipeline p = run_generator(generator, context);
            p.compile_to(outputs, function, context.target(), context.argument_order());
            return 0;
        }
        // A multi-target kernel: the generator runs once per target (its schedule may depend
        // on the target), each run lowered with its own argument order.
        std::vector<Target> parsed;
        std::vector<LoweredFunc> variants;
        for (const std::string &t : targets) {
            GeneratorContext context(parse_target_string(t), params);
            Pipeline p = run_generator(generator, context);
            parsed.push_back(context.target());
            variants.push_back(with_argument_order(p.lower(function), context.argument_order()));
        }
        compile_lowered_to(variants, parsed, outputs);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
        std::fprintf(stderr, "run '%s --help' for the options\n", program);
        return 1;
    }
}

} // namespace kiln
