// Generators as operators: a generator registered in this program (driver/Generator.h), with its
// parameters, becomes an apps::Operator the tuner, the worker and the simulator use like a
// built-in one. The shape is the extents of the generator's output (`--shape 4096x4096`), or
// the shape the generator declares (ctx.shape({"M", "N", "K"}, ...): `--shape 512x512x256`),
// whose output region is then its Func::set_estimates.
//
//   make(shape)     runs the generator, removes the schedule it wrote (remove_schedule: the
//                   algorithm is what is tuned), sizes each input image by the region the output
//                   region reads (schedule/InputRegions.h) and fills it with pseudo-random data;
//                   scalar Params take the value of the parameter of their name (`gain=2`) or
//                   their own (Param<float>("gain", 1.0f));
//   hand_schedule   the generator's own schedule (its knobs at their defaults), as a trace;
//   reference       none: candidates are checked against the reference evaluator
//                   (autotune/Checker.h), within ctx.set_tolerance's tolerance (1e-4);
//   work            bytes read and written (GB/s);
//   search space    the generator's knobs when it declares any (space "template"), else the
//                   automatic space.
//
// The operator's name is the generator's, with its parameters when there are any:
// "brighten[gain=2,vector=16]". It is the workload key's operator name, and what the tuner sends
// the worker, which resolves it in its own copy of the generator executable (`EXE --kiln-worker`).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "apps/Operator.h"
#include "autotune/SearchSpace.h"

namespace kiln::autotune {

/// A generator of this program and the parameters it is run with.
struct GeneratorSpec {
    std::string generator;
    std::map<std::string, std::string> params;
};

/// "brighten", or "brighten[gain=2,vector=16]" (parameters sorted by key).
std::string generator_operator_name(const GeneratorSpec &spec);
/// The inverse of generator_operator_name; nullopt when the name does not have that form.
std::optional<GeneratorSpec> parse_generator_operator_name(const std::string &name);

/// The operator of a generator, registered on first use. Runs the generator once (learning its
/// output's dimensions and its knobs); raises CompileError for an unknown generator, an output
/// that is not one single-valued Func, or a generator that fails while building its algorithm
/// (naming it and quoting its error). Unknown parameters are refused by make().
const apps::Operator &generator_operator(const GeneratorSpec &spec);

/// Makes apps::find_operator resolve generator operator names: the worker mode of a generator
/// executable (`EXE --kiln-worker`), whose requests name operators.
void resolve_generator_operators();

/// The space a generator declares with knobs when built at `shape` for `target` (its knobs may
/// differ by shape and target): nullopt for an operator that is not a generator's, or a
/// generator without knobs there. A knob given as a parameter keeps
/// that one value; configs that break a ctx.constraint are invalid.
/// On a GPU target `gpu_limits` (the device's) reach the generator (ctx.gpu_max_threads_per_block,
/// ctx.gpu_shared_memory_bytes), and the space's name ends in "_gpu".
std::optional<SearchSpace> generator_knob_space(const apps::Operator &op,
                                                const std::vector<int64_t> &shape,
                                                const Target &target,
                                                const GpuLimits *gpu_limits = nullptr);

} // namespace kiln::autotune
