// error_of: the message of the error a piece of test code raises, shared by the test modules
// (each may include this header: docs/ARCHITECTURE.md, module table).
#pragma once

#include <string>

#include "lang/Error.h"

namespace kiln::test {

/// Runs fn and returns the what() of the Error it throws (CompileError unless another type is
/// named: error_of<RuntimeError>(...)), or "(no error)" when it throws nothing. Errors of other
/// types propagate (and fail the test).
template <typename Error = CompileError, typename F>
std::string error_of(F &&fn) {
    try {
        fn();
    } catch (const Error &e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace kiln::test
