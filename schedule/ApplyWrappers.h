// Applies the in() wrappers of a pipeline (lang/FuncWrappers.cpp) for lowering: a call in a
// consumer's definitions (pure and updates) to a Func or ImageParam that has a wrapper for that
// consumer, or one for every consumer, reads the wrapper instead, and a wrapper's own wrapper for
// the same consumer after that (f.in(g).in(g)). A wrapper for every consumer is not read by the
// wrapped Func's other wrappers. The user's Funcs are not changed: a Func whose calls move is
// replaced by a copy with the new definitions, so every lower() sees the pipeline the same way.
// Requires: outputs that reachable_functions accepts. Guarantees: the Funcs lowering sees, by
// name, reachable from the outputs through the redirected calls (a wrapper no consumer of this
// pipeline reads is left out), each wrapper's call to what it wraps owning it again.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lang/Function.h"

namespace kiln {

/// The pipeline's Funcs with their calls redirected to the wrappers they read, by name.
std::map<std::string, FunctionPtr> apply_wrappers(const std::vector<FunctionPtr> &outputs);

} // namespace kiln
