#include "runtime/kiln_runtime.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__linux__) && defined(__x86_64__)
#include <cstddef>
#include <cstdint>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

#if defined(__linux__) && defined(__x86_64__)

constexpr uint32_t arch_req_xcomp_perm = 0x1023;

/// Whether this kernel can make a syscall fail with an errno through a seccomp filter.
bool seccomp_errno_available() {
    uint32_t action = SECCOMP_RET_ERRNO;
    return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

/// Makes arch_prctl(ARCH_REQ_XCOMP_PERM, ...) fail with EPERM in this process from now on, as a
/// kernel or a container that keeps the tile registers from it would; every other syscall runs.
/// Returns 0, or the errno of the prctl that failed.
int refuse_xcomp_perm() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_arch_prctl, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch_req_xcomp_perm, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) return errno;
    return 0;
}

/// text with the characters a POSIX extended regular expression treats specially escaped.
std::string regex_escape(const std::string &text) {
    std::string escaped;
    for (char c : text) {
        if (std::strchr("\\^$.|?*+()[]{}", c)) escaped += '\\';
        escaped += c;
    }
    return escaped;
}

#endif

} // namespace

// kiln_amx_request keeps the first answer for the life of the process, so the refusal is asked
// for in a child of its own (the death test's), which no earlier request has answered.
TEST(AMXDeathTest, RefusedTileRegistersReturnTheErrorAndNameTheReason) {
#if defined(__linux__) && defined(__x86_64__)
    if (!seccomp_errno_available())
        GTEST_SKIP() << "this kernel has no seccomp filters that return an errno";
    // Other tests in the executable start OpenMP and std::threads; a plain fork would be unsafe.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            if (int err = refuse_xcomp_perm()) {
                std::fprintf(stderr, "seccomp filter not installed: %s\n", std::strerror(err));
                std::_Exit(2);
            }
            int code = kiln_amx_request();
            std::fprintf(stderr, "%s: %s\n", kiln_error_code_name(code), kiln_last_error_message());
            std::_Exit(0);
        },
        testing::ExitedWithCode(0),
        "kiln_error_device_unavailable: tensorize: the operating system refused this process the "
        "AMX tile registers \\(arch_prctl ARCH_REQ_XCOMP_PERM: " +
            regex_escape(std::strerror(EPERM)) + "\\)");
#else
    GTEST_SKIP() << "AMX tile registers are requested through Linux's arch_prctl on x86-64";
#endif
}
