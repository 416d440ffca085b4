// main() of every generator executable: link kiln::generator and register generators with
// KILN_REGISTER_GENERATOR (driver/Generator.h); this runs the one the command line names. Two
// more modes serve the tuner (tools/GeneratorTune.h): `--kiln-tune JSON`, started by
// `kiln tune --generator`, and `--kiln-worker`, the measuring worker it starts in turn.
#include <cstring>

#include "driver/Generator.h"
#include "tools/GeneratorTune.h"

int main(int argc, char **argv) {
    if (argc == 2 && std::strcmp(argv[1], "--kiln-worker") == 0)
        return kiln::generator_worker_main(argv[0]);
    if (argc == 3 && std::strcmp(argv[1], "--kiln-tune") == 0)
        return kiln::generator_tune_main(argv[0], argv[2]);
    return kiln::kiln_generator_main(argc, argv);
}
