// Prints IR as readable pseudo-code, one statement per line, indented by nesting.
#pragma once

#include <ostream>
#include <string>

#include "lang/IR.h"

namespace kiln {

std::ostream &operator<<(std::ostream &s, const Expr &e);
std::ostream &operator<<(std::ostream &s, const Stmt &st);
std::ostream &operator<<(std::ostream &s, const Range &r);

/// The printed form of an expression or statement.
std::string to_string(const Expr &e);
std::string to_string(const Stmt &s);

} // namespace kiln
