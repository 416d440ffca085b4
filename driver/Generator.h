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

/// What a generator is run with: the target and the key=value parameters.
class GeneratorContext {
public:
    GeneratorContext(Target target, std::map<std::string, std::string> params)
        : target_(std::move(target)), params(std::move(params)) {}

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

    /// The order of the kernel's inputs (ImageParam and Param names); see
    /// Pipeline::compile_to. Empty: the order lowering lists them (with_argument_order).
    void set_argument_order(std::vector<std::string> inputs) { order = std::move(inputs); }
    const std::vector<std::string> &argument_order() const { return order; }

    /// CompileError naming every given parameter that was never read, with the ones that were.
    void check_all_used(const std::string &generator_name) const;

private:
    Target target_;
    std::map<std::string, std::string> params;
    mutable std::set<std::string> read;
    std::vector<std::string> order;
};

using GeneratorFunction = std::function<Pipeline(GeneratorContext &)>;

/// Registers a generator under a name (a C identifier); a second one with the same name is a
/// CompileError.
void register_generator(const std::string &name, GeneratorFunction fn);
/// The registered generator names, sorted.
std::vector<std::string> generator_names();
/// Runs a registered generator; CompileError listing the known names when there is none.
Pipeline run_generator(const std::string &name, GeneratorContext &context);

/// "host" (this machine), "host;key=value;..." (this machine with some fields replaced, e.g.
/// "host;fast_math=1") or Target::to_string()'s form.
Target parse_target_string(const std::string &text);

/// The command line of a generator executable (what kiln::generator's main() calls):
///   gen -o DIR [-g GENERATOR] [-f FUNCTION] [-n FILE_BASE] [-t TARGET] [-e KIND,KIND,...]
///       [key=value ...]
///   gen --list
/// -g may be left out when exactly one generator is registered; -f defaults to the generator
/// name and -n to the function name; -e defaults to static_library,c_header,metadata. Prints
/// errors to stderr and returns 1 on failure, 0 on success.
int kiln_generator_main(int argc, char **argv);

/// Registers a generator at program start (use in the generator's .cpp file).
struct GeneratorRegistration {
    GeneratorRegistration(const char *name, GeneratorFunction fn);
};

} // namespace kiln

#define KILN_REGISTER_GENERATOR(NAME, ...)                                                         \
    static const ::kiln::GeneratorRegistration kiln_generator_registration_##NAME(#NAME,           \
                                                                                  __VA_ARGS__)
