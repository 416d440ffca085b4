#include "autotune/Runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lang/Error.h"

namespace kiln::autotune {

std::string default_worker_path() {
    if (const char *env = std::getenv("KILN_WORKER"); env && *env) return env;
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "kiln-worker";
    std::string exe(buf, size_t(n));
    return exe.substr(0, exe.rfind('/') + 1) + "kiln-worker";
}

WorkerProcess::WorkerProcess(const std::string &path, const std::vector<std::string> &args) {
    if (access(path.c_str(), X_OK) != 0)
        throw RuntimeError("cannot start the measuring worker '" + path +
                           "': " + std::strerror(errno) +
                           "; build the kiln-worker target or set KILN_WORKER to its path");
    char tmpl[] = "/tmp/kiln-worker-stderr-XXXXXX";
    int err_fd = mkstemp(tmpl);
    if (err_fd < 0)
        throw RuntimeError(std::string("cannot create a worker log in /tmp: ") +
                           std::strerror(errno));
    stderr_path = tmpl;
    int in_pipe[2], out_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
        close(err_fd);
        throw RuntimeError(std::string("cannot create pipes for the worker: ") +
                           std::strerror(errno));
    }
    std::vector<std::string> words{path};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char *> argv;
    for (std::string &w : words)
        argv.push_back(w.data());
    argv.push_back(nullptr);
    pid_t parent = getpid();
    child = fork();
    if (child < 0) {
        close(err_fd);
        throw RuntimeError(std::string("cannot fork the worker: ") + std::strerror(errno));
    }
    if (child == 0) {
        // In the child: only async-signal-safe calls until exec.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        setpgid(0, 0);
        dup2(in_pipe[0], 0);
        dup2(out_pipe[1], 1);
        dup2(err_fd, 2);
        execv(path.c_str(), argv.data());
        _exit(127);
    }
    close(err_fd);
    close(in_pipe[0]);
    close(out_pipe[1]);
    to_child = in_pipe[1];
    from_child = out_pipe[0];
}

WorkerProcess::~WorkerProcess() {
    if (!reaped) {
        // Ask politely, then make sure.
        if (to_child >= 0) (void)!write(to_child, "{\"cmd\":\"quit\"}\n", 15);
        kill();
    }
    if (to_child >= 0) close(to_child);
    if (from_child >= 0) close(from_child);
    if (!stderr_path.empty()) unlink(stderr_path.c_str());
}

bool WorkerProcess::send(const nlohmann::json &request) {
    std::string s = request.dump() + "\n";
    size_t done = 0;
    // A dead worker must not kill the tuner with SIGPIPE.
    struct sigaction ignore {
    }, old{};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &old);
    bool ok = true;
    while (done < s.size()) {
        ssize_t n = write(to_child, s.data() + done, s.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ok = false;
            break;
        }
        done += size_t(n);
    }
    sigaction(SIGPIPE, &old, nullptr);
    return ok;
}

bool WorkerProcess::pump() {
    char buf[65536];
    for (;;) {
        ssize_t n = read(from_child, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        buffer.append(buf, size_t(n));
        return true;
    }
}

std::optional<std::string> WorkerProcess::next_line() {
    size_t nl = buffer.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    std::string line = buffer.substr(0, nl);
    buffer.erase(0, nl + 1);
    return line;
}

void WorkerProcess::reap(bool block) {
    if (reaped || child <= 0) return;
    int status = 0;
    pid_t r;
    do {
        r = waitpid(child, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == child) {
        reaped = true;
        wait_status = status;
        by_signal = WIFSIGNALED(status);
    }
}

void WorkerProcess::kill() {
    if (reaped || child <= 0) return;
    ::kill(child, SIGKILL);
    reap(true);
}

std::string WorkerProcess::death_description() {
    reap(true);
    std::ostringstream s;
    if (WIFSIGNALED(wait_status)) {
        int sig = WTERMSIG(wait_status);
        s << "worker killed by signal " << sig << " (" << strsignal(sig) << ")";
    } else if (WIFEXITED(wait_status)) {
        s << "worker exited with status " << WEXITSTATUS(wait_status);
    } else {
        s << "worker ended";
    }
    std::ifstream f(stderr_path);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (text.size() > 2000) text = "..." + text.substr(text.size() - 2000);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
    if (!text.empty()) s << "; its stderr ends with: " << text;
    return s.str();
}

} // namespace kiln::autotune
