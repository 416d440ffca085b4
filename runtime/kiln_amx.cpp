// Intel AMX for tensorized loops (schedule/Tensorize.h). Linux gives a process the tile
// registers' state only on request (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); a
// tile instruction before the request is SIGILL. A pipeline holding tile code asks at entry.
#include "runtime/kiln_runtime.h"

#include <cerrno>
#include <cstring>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

// 0: not asked yet; 1: granted; otherwise the errno of the refusal, negated.
int amx_state = 0; // read and written atomically

} // namespace

extern "C" int kiln_amx_request(void) {
    int state = __atomic_load_n(&amx_state, __ATOMIC_ACQUIRE);
#if defined(__linux__) && defined(__x86_64__)
    if (state == 0) {
        constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
        long rc = syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata);
        state = rc == 0 ? 1 : -(errno != 0 ? errno : EINVAL);
        __atomic_store_n(&amx_state, state, __ATOMIC_RELEASE);
    }
    if (state == 1) return kiln_success;
    return kiln_error(kiln_error_device_unavailable,
                      "tensorize: the operating system refused this process the AMX tile "
                      "registers (arch_prctl ARCH_REQ_XCOMP_PERM: %s); AMX needs Linux 5.16 or "
                      "later on a CPU with AMX",
                      std::strerror(-state));
#else
    (void)state;
    return kiln_error(kiln_error_device_unavailable,
                      "tensorize: AMX tile registers are requested through Linux's arch_prctl; "
                      "this build of the runtime is not for Linux on x86-64");
#endif
}
