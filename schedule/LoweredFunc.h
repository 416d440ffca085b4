// The result of lowering: a function with C-ABI arguments and a flattened loop nest, ready for a
// code generator.
//
// Conventions of the body, which every backend relies on:
//  - Loads and Stores name a buffer argument or an Allocate; indices are in elements of the
//    buffer's type, relative to its host pointer (the element at the minimum coordinate).
//  - For each buffer argument `b` of d dimensions, the Variables `b.min.<i>`, `b.extent.<i>` and
//    `b.stride.<i>` (int32, names from lang/Param.h) are in scope, read from its descriptor.
//  - Scalar arguments are in scope as Variables of their name and type.
//  - AssertStmt failure makes the function return kiln_error_assertion_failed (or the code given
//    by an `error_code` suffix convention of the backend) after recording its message.
//  - Parallel loops run through the runtime's kiln_parallel_for; Heap allocations use
//    kiln_malloc/kiln_free; Stack and Register allocations live on the stack.
#pragma once

#include <string>
#include <vector>

#include "lang/IR.h"
#include "lang/Param.h"

namespace kiln {

/// One argument of a lowered function.
struct LoweredArgument {
    enum Kind { Buffer, Scalar };
    std::string name;
    Kind kind = Buffer;
    Type type;          ///< the element type of a buffer, or the scalar's type
    int dimensions = 0; ///< for buffers
    bool is_output = false;
    /// Where the value comes from when the pipeline is run from C++: an ImageParam or a scalar
    /// Param (param), or a Buffer used directly in the algorithm (buffer).
    std::shared_ptr<ParameterContents> param;
    std::shared_ptr<BufferContents> buffer;
};

struct LoweredFunc {
    std::string name;
    std::vector<LoweredArgument> args; ///< in call order: inputs, scalar params, outputs
    Stmt body;
};

} // namespace kiln
