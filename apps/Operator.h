// The operator registry: each operator in apps/ describes its algorithm, a hand schedule for this
// CPU, a reference made of plain loops, and how much work one run does. The command line, the
// benchmarks and the tuner find operators here by name.
//
//   const apps::Operator &op = apps::find_operator("matmul");
//   apps::OperatorInstance inst = op.make({1024, 1024, 1024});   // algorithm + random inputs
//   op.hand_schedule(inst, Target::host());                      // or apply a ScheduleTrace
//   Buffer<> out = inst.realize();                               // compile, bind inputs, run
//   double err = apps::max_relative_error(out, op.reference(inst));
//
// Layouts: kiln indexes x first (dimension 0 is innermost), so a row-major matrix X[r][c] is
// X(c, r). matmul's A(k, i) is A[i][k] (dim 0 = k), B(j, k) is B[k][j] and its output C(j, i) is
// C[i][j]; NCHW tensors are in(x, y, c) and OIHW weights w(kx, ky, ci, co). Each operator's file
// in apps/ states its algorithm, borders, schedule and tolerance.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/Target.h"
#include "driver/Generator.h"
#include "driver/Pipeline.h"
#include "lang/Buffer.h"
#include "lang/Func.h"
#include "lang/Param.h"

namespace kiln::apps {

/// One operator built at one shape: a fresh algorithm (its Funcs carry no schedule but the
/// defaults until one is applied), its inputs and deterministic pseudo-random input data.
struct OperatorInstance {
    std::vector<int64_t> shape;         ///< one value per Operator::shape_names
    std::vector<ImageParam> inputs;     ///< the algorithm's buffer inputs, in argument order
    std::vector<BufferBase> input_data; ///< the data bound to `inputs` by bind_inputs()
    Func output;                        ///< the single output Func
    std::vector<int> output_extents;    ///< the region computed, from 0 in each dimension
    /// Intermediate Funcs a schedule may name (e.g. "blur_x"), for hand schedules and the tuner.
    std::vector<Func> stages;

    /// Binds input_data to inputs.
    void bind_inputs() const;
    /// A fresh output buffer of the right type and extents.
    BufferBase make_output() const;
    /// Compiles the pipeline as scheduled now (JIT cache), binds inputs and evaluates.
    BufferBase realize(const Target &target = Target::host()) const;
    Pipeline pipeline() const { return Pipeline(output); }
};

struct Operator {
    std::string name;                     ///< e.g. "matmul"
    std::string description;              ///< one line
    std::vector<std::string> shape_names; ///< e.g. {"M", "N", "K"}
    std::vector<int64_t> default_shape;   ///< the shape used when none is given
    /// Builds the algorithm at a shape, with inputs filled from a fixed seed.
    std::function<OperatorInstance(const std::vector<int64_t> &shape)> make;
    /// Applies the hand schedule written for this kind of CPU to a fresh instance.
    std::function<void(OperatorInstance &, const Target &)> hand_schedule;
    /// The expected output, computed with plain C++ loops (not kiln) from the instance's inputs.
    /// Optional: without one, the tuner checks candidates against the reference evaluator at
    /// sampled points (autotune/Checker.h).
    std::function<BufferBase(const OperatorInstance &)> reference;
    /// Work per run: floating-point operations (for GF/s) or bytes moved (for GB/s).
    std::function<double(const std::vector<int64_t> &shape)> work;
    std::string work_unit = "GF/s"; ///< "GF/s", "GOP/s" (integer operations) or "GB/s"
    /// Largest accepted relative error against the reference, justified where it is set.
    double tolerance = 1e-4;
    /// Test-only operators (crash, hang, wrong answer) are hidden from listings.
    bool test_only = false;
    /// The generator that defines the operator (driver/Generator.h), run with
    /// `generator_params`: built at a shape (the one it declares with ctx.shape, else its
    /// output's extents), it returns the algorithm with the schedule for ctx.target() written
    /// from its knobs (ctx.knob) at their defaults. So the hand schedule is the knobs' defaults,
    /// and the knobs are the template the tuner searches (autotune/GeneratorOperator.h). Every
    /// built-in operator and every user generator the tuner loads has one; an operator made by
    /// hand without one (a test's) has no knob space.
    GeneratorFunction generator;
    std::map<std::string, std::string> generator_params;
};

/// The generator's schedule for `target` at the instance's shape (its knobs at their defaults,
/// or at `knob_values`), run with `params` and replayed onto the instance: the hand_schedule of
/// an operator defined by a generator. Raises what the generator raises.
void schedule_from_generator(const GeneratorFunction &generator,
                             const std::map<std::string, std::string> &params,
                             OperatorInstance &inst, const Target &target,
                             const std::map<std::string, std::string> &knob_values = {});

/// Knob values written "knob=value,knob=value" (the benchmarks' --knobs): a CompileError
/// naming an item that is not knob=value with both sides non-empty.
std::map<std::string, std::string> parse_knob_values(const std::string &text);

/// Refuses knob values for names the operator's generator does not declare for `target` at
/// `shape` (built with its defaults), e.g. a misspelt `--knobs` in the benchmarks: a CompileError
/// naming the operator, the knob and the knobs it has. A generator that declares a knob only for
/// some values of another sees it refused unless those values are the defaults.
void check_knob_names(const Operator &op, const std::vector<int64_t> &shape, const Target &target,
                      const std::map<std::string, std::string> &knob_values);

/// Registers an operator; a second one with the same name is an error.
void register_operator(Operator op);
/// Registers the operators that ship with kiln (idempotent). Called by the functions below.
void register_builtin_operators();
/// The operator with this name; raises CompileError listing the known names when there is none.
/// A name no registered operator has is first offered to the resolver, when one is set.
const Operator &find_operator(const std::string &name);
/// Called by find_operator with an unknown name: registers the operator of that name (and
/// returns true) or returns false. A generator executable serving the tuner resolves the names
/// of its generators (autotune/GeneratorOperator.h). Errors it raises reach find_operator's caller.
void set_operator_resolver(std::function<bool(const std::string &name)> resolver);
/// All registered operators, sorted by name (test-only ones only when asked).
std::vector<const Operator *> all_operators(bool include_test_only = false);

/// Parses "1024x1024x512" or "1024,1024,512" into a shape for `op`; raises CompileError naming the
/// operator and its shape names when the count or a value is wrong. An empty string gives the
/// default shape.
std::vector<int64_t> parse_shape(const Operator &op, const std::string &text);
std::string shape_to_string(const std::vector<int64_t> &shape);

/// The bytes of the buffers one run of `op` at `shape` uses: its inputs and its output, each its
/// element count times its element type's size. Builds the algorithm but neither allocates nor
/// fills the inputs made by the operator's random data, so it answers for a shape that does not
/// fit in memory (a tuner checks the shape with it before anything is allocated). Raises what
/// op.make raises for a bad shape.
int64_t buffer_bytes(const Operator &op, const std::vector<int64_t> &shape);

/// op.make(shape) without the inputs' pseudo-random data: the algorithm, its inputs and its
/// output extents, with input_data's entries undefined for the inputs op.make fills at random
/// (all of them for the built-in operators). Cheap at any shape: for a tuner that lowers a
/// schedule per candidate and takes the input shapes from one instance made with data.
OperatorInstance make_without_data(const Operator &op, const std::vector<int64_t> &shape);

/// max |a - b| / max(1, |b|) over all elements; +infinity when the shapes or types differ.
double max_relative_error(const BufferBase &got, const BufferBase &expected);

} // namespace kiln::apps
