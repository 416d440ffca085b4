#include "lang/Error.h"

namespace kiln::detail {

void throw_internal_error(const char *file, int line, const char *cond, const std::string &msg) {
    throw InternalError(str("internal error at ", file, ":", line, ": condition '", cond,
                            "' failed", msg.empty() ? "" : ": ", msg));
}

} // namespace kiln::detail
