// Tuning the generators of a user's executable. The tuning loop needs the generator's code (to
// build its algorithm, apply candidates' knobs and capture their traces), so it runs in the
// user's executable, and so do the workers:
//
//   kiln tune --generator ./my_gens brighten --shape 4096x4096 --param gain=2 --time 8h
//     └─ kiln parses and validates every option, then starts
//        ./my_gens --kiln-tune '<the options as JSON>'    (tune() or simulate() in process)
//          └─ ./my_gens --kiln-worker   (x --jobs: autotune::run_worker, one candidate at a time)
//
// Both modes are part of kiln::generator's main() (tools/kiln_generator_main.cpp), so every
// generator executable has them. kiln waits for the executable and reports how it ended when it
// did not exit normally (a generator crashing while building its algorithm).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autotune/Simulator.h"
#include "autotune/Tuner.h"

namespace kiln {

/// What `kiln tune --generator` hands the executable.
struct GeneratorTuneRequest {
    std::string generator;
    std::map<std::string, std::string> params; ///< --param key=value
    autotune::TuneOptions options;             ///< options.op and options.shape are ignored
    std::vector<int64_t> shape;                ///< the output's extents
    bool simulate = false;
    bool strategy_given = false; ///< simulate only the strategy of --strategy
};

/// "key=value" -> (key, value); CompileError naming the text otherwise or for a key given twice.
void add_param(std::map<std::string, std::string> &params, const std::string &text);

/// The kiln side: runs `exe --kiln-tune JSON` and waits; returns its exit status. Raises
/// RuntimeError when exe cannot be started, or for an exit by a signal (naming it and the
/// generator).
int run_generator_tune(const std::string &exe, const GeneratorTuneRequest &request);

/// The executable's side of --kiln-tune: reads the request, registers the generator's operator,
/// tunes (workers: this executable with --kiln-worker) or simulates. Prints errors as
/// "<program>: error: ..." and returns the exit status.
int generator_tune_main(const char *program, const std::string &request_json);

/// The executable's side of --kiln-worker: autotune::run_worker on stdin and stdout, resolving
/// the names of this executable's generators.
int generator_worker_main(const char *program);

} // namespace kiln
