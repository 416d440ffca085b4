#include "autotune/WorkerPool.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>

#include "lang/Error.h"

namespace kiln::autotune {

const char *Slot::phase_name(Phase p) {
    switch (p) {
    case Phase::compiling:
        return "compiling";
    case Phase::first_run:
        return "first run";
    case Phase::checking:
        return "comparing with the reference";
    case Phase::timing:
        return "timing";
    }
    return "?";
}

void Slot::set_deadline(Phase what, double seconds) {
    phase = what;
    limit_s = seconds;
    deadline = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

WorkerPool::WorkerPool(std::string path, std::vector<std::string> args, int jobs)
    : path(std::move(path)), args(std::move(args)) {
    slots_.resize(size_t(std::max(jobs, 1)));
    for (Slot &s : slots_)
        replace(s);
}

void WorkerPool::replace(Slot &s) {
    s.paused_since.reset(); // the old worker, stopped or not, is killed by its destructor
    s.worker = std::make_unique<WorkerProcess>(path, args);
    s.state = Slot::State::idle;
}

bool WorkerPool::any(Slot::State st) const {
    return std::any_of(slots_.begin(), slots_.end(), [&](const Slot &s) { return s.state == st; });
}

bool WorkerPool::any_busy() const {
    return std::any_of(slots_.begin(), slots_.end(), [](const Slot &s) { return s.busy(); });
}

Slot *WorkerPool::next_to_measure() {
    Slot *next = nullptr;
    for (Slot &s : slots_) {
        if (s.state == Slot::State::measuring) return nullptr;
        if (s.state == Slot::State::built && (!next || s.built_order < next->built_order))
            next = &s;
    }
    return next;
}

void WorkerPool::mark_built(Slot &s) {
    s.state = Slot::State::built;
    s.built_order = built_counter++;
}

bool WorkerPool::timing() const {
    return std::any_of(slots_.begin(), slots_.end(), [](const Slot &s) {
        return s.state == Slot::State::measuring && s.phase == Slot::Phase::timing;
    });
}

void WorkerPool::pause_builders() {
    for (Slot &s : slots_) {
        if (s.state != Slot::State::building || s.paused_since) continue;
        if (::kill(s.worker->pid(), SIGSTOP) == 0) s.paused_since = Slot::Clock::now();
    }
}

void WorkerPool::resume_builders() {
    for (Slot &s : slots_) {
        if (!s.paused_since) continue;
        ::kill(s.worker->pid(), SIGCONT);
        s.deadline += Slot::Clock::now() - *s.paused_since;
        s.paused_since.reset();
    }
}

void WorkerPool::wait(const std::function<void(Slot &, const std::string &)> &on_line,
                      const std::function<void(Slot &)> &on_death,
                      const std::function<void(Slot &)> &on_timeout) {
    std::vector<pollfd> fds;
    for (const Slot &s : slots_)
        fds.push_back({s.worker->read_fd(), POLLIN, 0});
    auto now = Slot::Clock::now();
    double wait_ms = 250;
    for (const Slot &s : slots_) {
        if (s.busy() && !s.paused_since)
            wait_ms = std::min(
                wait_ms,
                std::max(0.0, std::chrono::duration<double, std::milli>(s.deadline - now).count()));
    }
    int r = poll(fds.data(), fds.size(), int(wait_ms) + 1);
    if (r < 0 && errno != EINTR) throw RuntimeError("tuner: poll failed");
    for (size_t i = 0; i < slots_.size(); i++) {
        Slot &s = slots_[i];
        if (r > 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
            bool alive = s.worker->pump();
            while (auto line = s.worker->next_line())
                on_line(s, *line);
            if (!alive) {
                on_death(s);
                continue;
            }
        }
        if (s.busy() && !s.paused_since && Slot::Clock::now() > s.deadline) on_timeout(s);
    }
}

void WorkerPool::stop() {
    resume_builders(); // a stopped worker would not read its quit request
    for (Slot &s : slots_)
        s.worker.reset();
}

} // namespace kiln::autotune
