// The time budget of a long fuzz run. KILN_FUZZ_SECONDS=s makes a fuzz test stop starting new
// cases once s seconds have passed since its budget was made (unset or 0: no limit, the default).
// `scripts/test.sh --long` asks every fuzzer for a million cases and sets a budget below the CTest
// timeout, so each fuzz test ends in time whatever one case costs there: a schedule fuzzer case is
// a JIT compile, and the sanitizer build is several times slower than the release one. Cases are
// seeded by their index, so a run cut short is a prefix of the full run and its reproducers stay
// valid.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace kiln::test {

class FuzzBudget {
public:
    FuzzBudget() : start_(std::chrono::steady_clock::now()) {
        const char *v = std::getenv("KILN_FUZZ_SECONDS");
        seconds_ = v && *v ? std::strtod(v, nullptr) : 0;
    }

    /// True once a budget is set and spent: the caller starts no further case.
    bool spent() const { return seconds_ > 0 && elapsed() >= seconds_; }

    /// Seconds since the budget was made.
    double elapsed() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

    /// Says, when the budget cut a run short, how many of the cases asked for ran.
    void report(const char *what, uint64_t done, uint64_t asked) const {
        if (done >= asked) return;
        std::printf("[ fuzz ] %s: time budget of %.0f s (KILN_FUZZ_SECONDS) spent after %llu of "
                    "%llu cases\n",
                    what, seconds_, static_cast<unsigned long long>(done),
                    static_cast<unsigned long long>(asked));
        std::fflush(stdout);
    }

private:
    std::chrono::steady_clock::time_point start_;
    double seconds_;
};

} // namespace kiln::test
