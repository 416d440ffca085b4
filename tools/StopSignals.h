// How `kiln tune` stops on a signal: Ctrl-C (SIGINT) and SIGTERM (a plain `timeout`, `kill`) are
// one and the same request. The tuner stops proposing, drops the candidates in flight, keeps
// everything committed, prints its summary and how to resume, and the process exits with
// stop_exit_code. A second request quits at once, but the same request delivered twice within
// a second counts once: GNU timeout sends its SIGTERM to the command and then to its whole
// process group, which holds the command too.
#pragma once

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace kiln::tools {

/// The exit status of a tune stopped by SIGINT or SIGTERM (128 + SIGINT, as a shell reports it).
constexpr int stop_exit_code = 130;

/// Set by the handler; give its address to TuneOptions::stop.
inline std::atomic<bool> stop_requested{false};

namespace detail {
inline std::atomic<int64_t> first_stop_ns{0};

inline int64_t monotonic_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t); // async-signal-safe
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

inline void on_stop_signal(int) {
    int64_t now = monotonic_ns();
    if (stop_requested.exchange(true)) {
        if (now - first_stop_ns.load() > 1000000000) _exit(stop_exit_code); // asked again
        return; // the same request, delivered twice
    }
    first_stop_ns = now;
    const char msg[] = "\nkiln: stopping after the measurement in flight is dropped; Ctrl-C "
                       "again to quit at once\n";
    (void)!write(2, msg, sizeof msg - 1);
}
} // namespace detail

/// Makes SIGINT and SIGTERM set stop_requested (each handler blocks the other signal, so the two
/// never interleave).
inline void install_stop_handlers() {
    struct sigaction sa {};
    sa.sa_handler = detail::on_stop_signal;
    sa.sa_flags = SA_RESTART; // as std::signal: reads and writes are not cut short
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

} // namespace kiln::tools
