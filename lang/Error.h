// Errors are part of the product. Three kinds, each with its own helper:
//  - CompileError: a bad algorithm or schedule written by the user;
//  - RuntimeError: a bad buffer or parameter at run time;
//  - InternalError: a bug in kiln.
// Messages are lowercase, without a final period, and name the Func, the variable and the value.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

/// A user error in an algorithm or schedule, raised while defining or compiling a pipeline.
struct CompileError : std::runtime_error {
    explicit CompileError(const std::string &msg) : std::runtime_error(msg) {}
};

/// A user error detected while running a pipeline (a wrong buffer, a parameter out of range).
struct RuntimeError : std::runtime_error {
    explicit RuntimeError(const std::string &msg) : std::runtime_error(msg) {}
};

/// A bug in kiln itself; the message says where.
struct InternalError : std::logic_error {
    explicit InternalError(const std::string &msg) : std::logic_error(msg) {}
};

namespace detail {
/// Concatenates any streamable values into one string.
template <typename... Args>
std::string str(const Args &...args) {
    std::ostringstream s;
    (s << ... << args);
    return s.str();
}
[[noreturn]] void throw_internal_error(const char *file, int line, const char *cond,
                                       const std::string &msg);
} // namespace detail

/// Raises a CompileError whose message is the concatenation of the arguments.
template <typename... Args>
[[noreturn]] void user_error(const Args &...args) {
    throw CompileError(detail::str(args...));
}

/// Raises a RuntimeError whose message is the concatenation of the arguments.
template <typename... Args>
[[noreturn]] void runtime_error(const Args &...args) {
    throw RuntimeError(detail::str(args...));
}

} // namespace kiln

/// Checks an invariant of kiln itself; a failure is a kiln bug, reported with file and line.
#define internal_assert(cond, ...)                                                                 \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ::kiln::detail::throw_internal_error(__FILE__, __LINE__, #cond,                        \
                                                 ::kiln::detail::str(__VA_ARGS__));                \
    } while (0)

#define internal_error(...)                                                                        \
    ::kiln::detail::throw_internal_error(__FILE__, __LINE__, "unreachable",                        \
                                         ::kiln::detail::str(__VA_ARGS__))
