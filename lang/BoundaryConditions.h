// Boundary conditions: Funcs that extend a bounded source (a Buffer, an ImageParam or a Func with
// explicit bounds) to the whole integer grid. Accesses are clamped inside the source, so a
// boundary condition never reads outside it.
#pragma once

#include <vector>

#include "lang/Buffer.h"
#include "lang/Func.h"
#include "lang/Param.h"

namespace kiln {

/// Outside the bounds, the value of the nearest edge.
Func repeat_edge(const Func &source, const std::vector<Range> &bounds);
Func repeat_edge(const BufferBase &source);
Func repeat_edge(const ImageParam &source);

/// Outside the bounds, the given value.
Func constant_exterior(const Func &source, const Expr &value, const std::vector<Range> &bounds);
Func constant_exterior(const BufferBase &source, const Expr &value);
Func constant_exterior(const ImageParam &source, const Expr &value);

/// Outside the bounds, the mirror image without repeating the edge: ..., 2, 1, [0, 1, 2], 1, 0,
/// ... (a one-element dimension repeats its element).
Func mirror_interior(const Func &source, const std::vector<Range> &bounds);
Func mirror_interior(const BufferBase &source);
Func mirror_interior(const ImageParam &source);

} // namespace kiln
