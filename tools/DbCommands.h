// `kiln db`: list, best, show, export, import and report over the tuning database.
//
//   kiln db list   [--db FILE]                         workloads with counts and best times
//   kiln db best   [--db FILE] OP [--shape S] [--top K] the fastest configs of a workload
//   kiln db show   [--db FILE] OP [--shape S]           runs, statistics and history
//   kiln db export [--db FILE] OUT.json [--op OP]
//   kiln db import [--db FILE] IN.json                  idempotent
//   kiln db report [--db FILE] [-o report.html]         HTML page with SVG progress plots and
//                                                       the saved cost models' ranking quality
//
// --db defaults to tuning_db/kiln.db relative to the working directory. Library target:
// kiln_db_commands (defined in tuning_db/CMakeLists.txt); link it into the kiln executable.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kiln {

/// Adds the `db` subcommand with its subcommands to `app`. Each runs from a CLI11 callback during
/// parsing; a failure prints "kiln: <message>" to `err` and raises CLI::RuntimeError(1), which
/// CLI11_PARSE turns into exit status 1 without printing anything more.
void add_db_commands(CLI::App &app, std::ostream &out = std::cout, std::ostream &err = std::cerr);

/// Runs `kiln <args...>` with only the db commands registered, printing to `out` and `err`;
/// returns the exit status. For tests.
int run_db_command_line(const std::vector<std::string> &args, std::ostream &out, std::ostream &err);

} // namespace kiln
