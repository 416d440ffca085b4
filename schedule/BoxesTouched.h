// The box (one interval per dimension) of a Func or buffer that a statement reads or writes, with
// loop variables ranging over their loops and lets bound to the bounds of their values. Variables
// defined outside the statement stay symbolic. Guards `if (likely(v <= e))` narrow v inside.
// This is the interval-arithmetic core of bounds inference and of the entry checks.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lang/IR.h"
#include "lang/Interval.h"

namespace kiln {

using Box = std::vector<Interval>;

/// The box of `name` touched by s: by Func or image calls when `calls` is set, by Provides when
/// `provides` is set. Empty when s does not touch it.
Box boxes_touched(const Stmt &s, const std::string &name, bool calls, bool provides,
                  const Scope &scope = {});

/// The boxes of several Funcs or buffers in one walk: read by calls (names in `calls`) or written
/// by Provides (names in `provides`). Names that s does not touch are absent.
std::map<std::string, Box> boxes_touched(const Stmt &s, const std::set<std::string> &calls,
                                         const std::set<std::string> &provides);

/// The box of calls to `name` inside an expression.
Box boxes_touched(const Expr &e, const std::string &name, const Scope &scope = {});

} // namespace kiln
