// The tuner's side of a worker process (autotune/Worker.h): fork + exec of `kiln-worker`, JSON
// lines over pipes, and what is needed to watch it: the read end to poll, a line reader, a kill,
// and a description of how it died. The child dies with its parent (PR_SET_PDEATHSIG), runs in
// its own process group (so Ctrl-C in the terminal reaches only the tuner, which stops it
// cleanly) and writes its stderr to a private file whose tail is kept for crash reports.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::autotune {

/// The worker executable: $KILN_WORKER when set, else kiln-worker next to this executable.
std::string default_worker_path();

class WorkerProcess {
public:
    /// Starts the worker with the arguments (a generator executable is started as
    /// `EXE --kiln-worker`); raises RuntimeError naming the path when it cannot be started.
    explicit WorkerProcess(const std::string &path, const std::vector<std::string> &args = {});
    ~WorkerProcess();
    WorkerProcess(const WorkerProcess &) = delete;
    WorkerProcess &operator=(const WorkerProcess &) = delete;

    pid_t pid() const { return child; }
    /// The descriptor to poll for input.
    int read_fd() const { return from_child; }
    /// Sends one request; false when the pipe is closed (the worker died).
    bool send(const nlohmann::json &request);
    /// Reads what is available (call when read_fd is readable); false at end of file.
    bool pump();
    /// The next complete line received, if any.
    std::optional<std::string> next_line();
    /// Kills the worker (SIGKILL) and reaps it.
    void kill();
    /// After end of file: reaps the worker and says how it ended ("killed by signal 11
    /// (Segmentation fault)", "exited with status 3"), with the tail of its stderr.
    std::string death_description();
    /// Whether death_description found a signal.
    bool died_by_signal() const { return by_signal; }

private:
    void reap(bool block);

    pid_t child = -1;
    int to_child = -1, from_child = -1;
    std::string stderr_path;
    std::string buffer;
    bool reaped = false, by_signal = false;
    int wait_status = 0;
};

} // namespace kiln::autotune
