// kiln-worker: the process the tuner measures candidates in (see autotune/Worker.h). It reads
// JSON-line requests on stdin and answers on stdout; it is not meant to be run by hand.
#include <cstdio>

#include "autotune/Worker.h"

int main() {
    return kiln::autotune::run_worker(stdin, stdout);
}
