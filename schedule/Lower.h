// Lowering: from a pipeline's Funcs and their schedules to a LoweredFunc (a flat loop nest over
// C-ABI arguments). Lower.cpp is the table of contents of the passes, in order.
//   KILN_DEBUG=2        prints the IR after every pass (or "(unchanged)")
//   KILN_TIME_PASSES=1  prints a table of pass times
#pragma once

#include <string>
#include <vector>

#include "lang/Func.h"
#include "schedule/LoweredFunc.h"

namespace kiln {

struct LowerOptions {
    bool print_passes = false; ///< print IR after each pass (also KILN_DEBUG=2)
    bool time_passes = false;  ///< print pass times (also KILN_TIME_PASSES=1)
};

/// Lowers the outputs (computed together) into a function named `name`.
LoweredFunc lower(const std::vector<Func> &outputs, const std::string &name,
                  const LowerOptions &options = {});

/// The IR after every pass, as text, for inspection.
std::string lower_to_text(const std::vector<Func> &outputs, const std::string &name);

} // namespace kiln
