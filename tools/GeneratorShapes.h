// Kernels specialized per output shape from the tuning database (issue 11, item 5):
//
//   my_gens -g brighten -o DIR --shapes 4096x4096,1920x1080 --db tuning_db/kiln.db
//           --lock kiln.lock.json [-t TARGET ...] [--threads N] [-f FUNCTION] [-n FILE_BASE]
//           [key=value ...]
//
// writes one static library whose entry point (the generator's C signature) runs, at each call,
// the schedule of the output's extents, or the generator's own (hand) schedule for any other
// shape (codegen/AOT.h, compile_shape_dispatched). For each shape the schedule is, in order:
//   1. the best ok record of the workload (the generator operator "brighten[gain=2]" at that
//      shape, autotune/GeneratorOperator.h) on this target's key (with --threads, the thread
//      count it was tuned with; default: the machine's) in the database, replayed on a fresh
//      copy of the algorithm;
//   2. else the lockfile's schedule for that kernel and shape (kiln.lock.json, committed with
//      the project, so a build without the database gives the same kernel);
//   3. else the hand schedule, and the header says why.
// With several -t, each target's variant is chosen this way with its own target key's records
// (codegen/AOT.h, the multi-target compile_shape_dispatched), and the entry point picks the
// target by CPU features, then the shape.
// A database that holds the workload only for other target keys is an error naming them, as is
// a lockfile schedule that no longer replays (naming the shape and the fix) and a shape whose
// length is not the output's dimension count. kiln_add_kernel(... SHAPES ... DB ... LOCKFILE)
// runs this mode at build time.
//
//   my_gens --kiln-lock-update -g brighten --shapes 4096x4096,1920x1080 --db DB --lock LOCK ...
//
// (run by `kiln lock update --generator ./my_gens brighten --shape ... --shape ...`) writes the
// database's best schedule of each shape into the lockfile, keeping its other entries.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln {

/// Whether the command line asks for this mode (--shapes or --kiln-lock-update).
bool is_generator_shapes_command(int argc, char **argv);

/// Runs the mode; prints errors as "<program>: error: ..." and returns the exit status.
int generator_shapes_main(int argc, char **argv);

/// kiln's side of `kiln lock update`: runs `exe --kiln-lock-update -g generator --shapes ...
/// --db db --lock lock -t target [--threads N] key=value...` and returns its exit status
/// (RuntimeError when it cannot be started or dies of a signal).
int run_generator_lock_update(const std::string &exe, const std::string &generator,
                              const std::vector<std::string> &shapes,
                              const std::map<std::string, std::string> &params,
                              const std::string &db, const std::string &lock,
                              const std::string &target, int threads);

} // namespace kiln
