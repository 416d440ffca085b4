// Boundary conditions: Funcs that extend a bounded source (a Buffer, an ImageParam or a Func with
// explicit bounds) to the whole integer grid. Accesses are clamped inside the source, so a
// boundary condition never reads outside it.
#pragma once

#include <string>
#include <vector>

#include "lang/Buffer.h"
#include "lang/Func.h"
#include "lang/Param.h"

namespace kiln {

// Each boundary condition is a new Func named `name`, or by default "<source>_<condition>"
// ("in_repeat_edge"), with Vars "<name>.d0", "<name>.d1", ...: the same name in every process
// and every rebuild of the algorithm, so that its algorithm_hash and recorded schedules stay
// valid. A second boundary condition of the same kind on the same source object (while the first
// source handle lives) gets a numbered suffix ("in_repeat_edge_2"); pass a name to choose it.

/// Outside the bounds, the value of the nearest edge.
Func repeat_edge(const Func &source, const std::vector<Range> &bounds,
                 const std::string &name = "");
Func repeat_edge(const BufferBase &source, const std::string &name = "");
Func repeat_edge(const ImageParam &source, const std::string &name = "");

/// Outside the bounds, the given value.
Func constant_exterior(const Func &source, const Expr &value, const std::vector<Range> &bounds,
                       const std::string &name = "");
Func constant_exterior(const BufferBase &source, const Expr &value, const std::string &name = "");
Func constant_exterior(const ImageParam &source, const Expr &value, const std::string &name = "");

/// Outside the bounds, the mirror image without repeating the edge: ..., 2, 1, [0, 1, 2], 1, 0,
/// ... (a one-element dimension repeats its element).
Func mirror_interior(const Func &source, const std::vector<Range> &bounds,
                     const std::string &name = "");
Func mirror_interior(const BufferBase &source, const std::string &name = "");
Func mirror_interior(const ImageParam &source, const std::string &name = "");

} // namespace kiln
