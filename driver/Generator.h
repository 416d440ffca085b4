// Generators: programs that build a pipeline and compile it ahead of time, run at build time by
// the CMake function kiln_add_kernel (cmake/KilnKernel.cmake).
//
//   // my_gen.cpp, linked with kiln::generator (which supplies main())
//   #include "driver/Generator.h"   // includes the front end (what kiln.h has)
//   KILN_REGISTER_GENERATOR(brighten, [](kiln::GeneratorContext &ctx) -> kiln::Pipeline {
//       kiln::ImageParam in(kiln::Float(32), 2, "in");
//       kiln::Param<float> gain("gain");
//       kiln::Func out("out");
//       kiln::Var x, y;
//       out(x, y) = in(x, y) * gain;
//       out.vectorize(x, int(ctx.get_int("vector", 8)));
//       ctx.set_argument_order({"in", "gain"});   // brighten(in, gain, out)
//       return out;
//   });
//
//   $ my_gen -g brighten -o out/ -f brighten vector=16   ->  out/brighten.a, out/brighten.h
//
// A generator reads its parameters (PARAMS key=value in CMake, key=value on the command line)
// through the context; a parameter given but never read is an error, so typos do not pass
// silently.
//
// Tuning (`kiln tune --generator ./my_gen brighten --shape 4096x4096`, see autotune/
// GeneratorOperator.h): the tuner runs the generator, removes whatever schedule it wrote (the
// algorithm is what is tuned; the generator's own schedule is the "hand" baseline) and searches
// either the automatic space or the space the generator declares with knobs:
//
//   int tile = int(ctx.knob("tile", {16, 32, 64}));         // 16 when building normally
//   std::string order = ctx.knob_choice("order", {"xy", "yx"});
//   ctx.constraint("tile fits the vector", tile % 8 == 0);
//
// When building normally a knob is its first value, or the value of the parameter of its name
// (`tile=32`); when tuning it is the value of the candidate being built.
//
// The tuned shape is the output's extents, unless the generator declares one (matmul's K is no
// extent of C) and says where its output lies at it, with Halide's estimates:
//
//   std::vector<int64_t> s = ctx.shape({"M", "N", "K"}, {1024, 1024, 1024});
//   C.set_estimates({{0, s[1]}, {0, s[0]}});
//   A.set_estimates({{0, s[2]}, {0, s[0]}});   // an input the output's region does not size
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

// Generators define pipelines: the whole front end (what kiln.h has but this header).
#include "codegen/AOT.h"
#include "codegen/Target.h"
#include "driver/Pipeline.h"
#include "lang/BoundaryConditions.h"
#include "lang/Buffer.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IR.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "lang/Reduce.h"
#include "lang/ReferenceEvaluator.h"
#include "lang/Var.h"
#include "schedule/Lower.h"
#include "schedule/ScheduleTrace.h"

namespace kiln {

/// A knob a generator declared (GeneratorContext::knob): the search space it writes for its
/// own schedule. Integer knobs list `integers`, choices list `choices`.
struct GeneratorKnob {
    enum class Kind { integer, choice };
    std::string name;
    Kind kind = Kind::integer;
    std::vector<int64_t> integers;
    std::vector<std::string> choices;
};

/// What a generator is run with: the target and the key=value parameters.
class GeneratorContext {
public:
    GeneratorContext(Target target, std::map<std::string, std::string> params)
        : target_(std::move(target)), params(std::move(params)) {}

    /// The target the pipeline is compiled for: its vector width, features and, where set,
    /// `threads` (the thread count to plan tasks for, `-t "host;threads=32"`; 0 when unset).
    const Target &target() const { return target_; }

    /// Whether the parameter was given.
    bool has(const std::string &key) const;
    /// The parameter's text, or fallback when it was not given.
    std::string get(const std::string &key, const std::string &fallback) const;
    /// The parameter as an integer; CompileError naming it when it is not one.
    int64_t get_int(const std::string &key, int64_t fallback) const;
    /// The parameter as a number; CompileError naming it when it is not one.
    double get_float(const std::string &key, double fallback) const;
    /// The parameter as a flag: 1/0, true/false, on/off; CompileError otherwise.
    bool get_bool(const std::string &key, bool fallback) const;
    /// The parameter as a shape, "4096x4096" or "4096,4096" (positive integers below 2^31);
    /// CompileError naming it otherwise.
    std::vector<int64_t> get_shape(const std::string &key, std::vector<int64_t> fallback) const;

    /// The shape the generator is built and tuned at, for one whose shape is not its output's
    /// extents (matmul's M, N, K: K is no extent of C): one name per value and the values used
    /// when none is given. Returns the shape being tuned when tuning (`kiln tune --generator EXE
    /// mm --shape 512x512x256`), else the parameters of those names (`K=256`) over the
    /// defaults. Such a generator gives its output's region with Func::set_estimates, and the
    /// region of an input the output's does not fix (an RDom over the input's extent) with
    /// ImageParam::set_estimates. CompileError for a name that is not a C identifier, a count
    /// that differs from the names', a value below 1 or a second declaration.
    std::vector<int64_t> shape(const std::vector<std::string> &names,
                               const std::vector<int64_t> &defaults);
    /// The names and defaults shape() was called with (empty when it was not).
    const std::vector<std::string> &shape_names() const { return shape_names_; }
    const std::vector<int64_t> &default_shape() const { return default_shape_; }
    /// Set by the tuner: the shape being tuned, which shape() returns.
    void set_tuning_shape(std::vector<int64_t> shape) { tuning_shape = std::move(shape); }

    /// The limits of the GPU a tuner measures on, for the constraints of a generator's GPU
    /// knobs: threads and shared memory per block, never above kiln's portable 1024 threads and
    /// 48 KiB, which they are when building normally or tuning without a device.
    int64_t gpu_max_threads_per_block() const { return gpu_threads; }
    int64_t gpu_shared_memory_bytes() const { return gpu_shared; }
    /// Set by the tuner from the device's limits (each capped at kiln's portable one).
    void set_gpu_limits(int64_t max_threads_per_block, int64_t shared_memory_bytes);

    /// A knob of the generator's schedule with its legal values (at least one, no repeats): the
    /// tuned value when tuning, else the parameter of that name when given, else the first value.
    /// A second call with the same name must list the same values. CompileError otherwise.
    int64_t knob(const std::string &name, const std::vector<int64_t> &values);
    /// An integer knob over lo, lo + step, ... up to hi.
    int64_t knob_range(const std::string &name, int64_t lo, int64_t hi, int64_t step = 1);
    /// A knob choosing one of several names.
    std::string knob_choice(const std::string &name, const std::vector<std::string> &values);
    /// A condition the knob values must meet, e.g. constraint("tile_x * tile_y <= 4096", ...).
    /// A build whose values break it raises CompileError naming it and the knob values; the
    /// tuner proposes only configs that meet every constraint.
    void constraint(const std::string &description, bool holds);
    /// The knobs declared so far, in declaration order.
    const std::vector<GeneratorKnob> &knobs() const { return knob_list; }
    /// Set by the tuner: the value of each knob for the candidate being built (text: an integer
    /// or a choice). Knobs not listed take their default.
    void set_knob_values(std::map<std::string, std::string> values) {
        knob_values = std::move(values);
    }

    /// The largest relative error the tuner accepts against the reference evaluator
    /// (|got - expected| / max(1, |expected|)); 1e-4 unless the generator sets it (for example
    /// when a schedule may reorder a long floating-point sum).
    void set_tolerance(double tolerance);
    double tolerance() const { return tolerance_; }

    /// The order of the kernel's inputs (ImageParam and Param names); see
    /// Pipeline::compile_to. Empty: the order lowering lists them (with_argument_order).
    void set_argument_order(std::vector<std::string> inputs) { order = std::move(inputs); }
    const std::vector<std::string> &argument_order() const { return order; }

    /// CompileError naming every given parameter that was never read, with the ones that were.
    void check_all_used(const std::string &generator_name) const;
    /// The given parameters never read, sorted.
    std::vector<std::string> unused() const;

private:
    /// The value of a knob with these legal values (as text), recording its declaration.
    std::string knob_value(GeneratorKnob declared, const std::vector<std::string> &texts);

    Target target_;
    std::map<std::string, std::string> params;
    mutable std::set<std::string> read;
    std::vector<std::string> order;
    std::vector<GeneratorKnob> knob_list;
    std::map<std::string, std::string> knob_values, chosen;
    double tolerance_ = 1e-4;
    std::vector<std::string> shape_names_;
    std::vector<int64_t> default_shape_, tuning_shape;
    int64_t gpu_threads = 1024, gpu_shared = int64_t(48) * 1024;
};

using GeneratorFunction = std::function<Pipeline(GeneratorContext &)>;

/// Registers a generator under a name (a C identifier); a second one with the same name is a
/// CompileError.
void register_generator(const std::string &name, GeneratorFunction fn);
/// The registered generator names, sorted.
std::vector<std::string> generator_names();
/// Runs a registered generator; CompileError listing the known names when there is none, and
/// (check_all_used) for a parameter it never read.
Pipeline run_generator(const std::string &name, GeneratorContext &context,
                       bool check_unused = true);
/// Whether a generator of that name is registered.
bool has_generator(const std::string &name);
/// The errors raised while registering generators at program start (empty when none).
std::vector<std::string> generator_registration_errors();
/// Parses "4096x4096" or "4096,4096" into positive integers below 2^31; CompileError starting
/// with `what` otherwise.
std::vector<int64_t> parse_shape_text(const std::string &text, const std::string &what);

/// "host" (this machine), "host;key=value;..." (this machine with some fields replaced, e.g.
/// "host;fast_math=1") or Target::to_string()'s form.
Target parse_target_string(const std::string &text);

/// The command line of a generator executable (what kiln::generator's main() calls):
///   gen -o DIR [-g GENERATOR] [-f FUNCTION] [-n FILE_BASE] [-t TARGET ...] [-e KIND,KIND,...]
///       [key=value ...]
///   gen --list
/// -g may be left out when exactly one generator is registered; -f defaults to the generator
/// name and -n to the function name; -e defaults to static_library,c_header,metadata; -t to
/// host. Several -t make a multi-target library (codegen/MultiTarget.h): the generator runs once
/// per target, each run lowered with its own argument order. Prints errors to stderr and returns
/// 1 on failure, 0 on success.
int kiln_generator_main(int argc, char **argv);

/// Registers a generator at program start (use in the generator's .cpp file).
struct GeneratorRegistration {
    GeneratorRegistration(const char *name, GeneratorFunction fn);
};

} // namespace kiln

#define KILN_REGISTER_GENERATOR(NAME, ...)                                                         \
    static const ::kiln::GeneratorRegistration kiln_generator_registration_##NAME(#NAME,           \
                                                                                  __VA_ARGS__)
