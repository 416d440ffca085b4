// kiln-worker: the process the tuner measures candidates in (see autotune/Worker.h). It reads
// JSON-line requests on stdin and answers on stdout; it is not meant to be run by hand.
#include <cstdio>

#include "autotune/Worker.h"

// A worker measuring GPU candidates loads the OpenCL implementation; PoCL's own LLVM keeps about
// 2 MB after its first kernel compile (not kiln's leak). The suppression, for sanitizer builds,
// covers only the OpenCL implementation's libraries.
extern "C" const char *__lsan_default_suppressions() { // NOLINT: the sanitizer's name
    return "leak:libpocl.so\n"
           "leak:libpocl-devices-\n"
           "leak:libLLVM-15.so\n"
           "leak:libclang-cpp.so.15\n";
}

int main() {
    return kiln::autotune::run_worker(stdin, stdout);
}
