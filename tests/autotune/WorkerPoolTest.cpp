// The tuner's worker pool (autotune/WorkerPool.h) with real kiln-worker processes: builders are
// stopped while a candidate is timed, and their deadlines stand still meanwhile.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "autotune/WorkerPool.h"

using namespace kiln::autotune;

namespace {

/// The state letter of a process in /proc (R running, S sleeping, T stopped, ...).
char process_state(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close = text.rfind(')'); // the command name may hold spaces
    return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

/// Waits (at most 5 s: a deadline, not a timing gate) until the state is or is not `want`.
bool state_becomes(pid_t pid, char want, bool equal) {
    for (int i = 0; i < 500; i++) {
        if ((process_state(pid) == want) == equal) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

} // namespace

TEST(WorkerPool, BuildersStandStillWhileACandidateIsTimed) {
    WorkerPool pool(KILN_WORKER_PATH, {}, 2);
    ASSERT_EQ(pool.slots().size(), 2u);
    Slot &builder = pool.slots()[0], &timed = pool.slots()[1];
    builder.state = Slot::State::building;
    builder.set_deadline(Slot::Phase::compiling, 0.2);
    timed.state = Slot::State::measuring;
    timed.set_deadline(Slot::Phase::timing, 60);
    EXPECT_TRUE(pool.timing());
    auto deadline = builder.deadline;

    pool.pause_builders();
    ASSERT_TRUE(builder.paused_since);
    EXPECT_FALSE(timed.paused_since); // only builders stop
    EXPECT_TRUE(state_becomes(builder.worker->pid(), 'T', true));
    EXPECT_NE(process_state(timed.worker->pid()), 'T');

    // Past the builder's deadline: a stopped builder does not time out.
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    int timeouts = 0;
    pool.wait([](Slot &, const std::string &) {}, [](Slot &) {}, [&](Slot &) { timeouts++; });
    EXPECT_EQ(timeouts, 0);

    pool.resume_builders();
    EXPECT_FALSE(builder.paused_since);
    EXPECT_TRUE(state_becomes(builder.worker->pid(), 'T', false));
    // Its deadline moved by the time it stood still (at least the 400 ms slept).
    EXPECT_GE(builder.deadline - deadline, std::chrono::milliseconds(400));
    pool.stop();
}
