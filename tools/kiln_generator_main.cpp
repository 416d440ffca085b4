// main() of every generator executable: link kiln::generator and register generators with
// KILN_REGISTER_GENERATOR (driver/Generator.h); this runs the one the command line names. Two
// more modes serve the tuner (tools/GeneratorTune.h): `--kiln-tune JSON`, started by
// `kiln tune --generator`, and `--kiln-worker`, the measuring worker it starts in turn. With
// `--shapes` it builds a kernel specialized per shape from the tuning database and the lockfile,
// and `--kiln-lock-update` refreshes the lockfile (tools/GeneratorShapes.h).
#include <cstring>

#include "driver/Generator.h"
#include "tools/GeneratorShapes.h"
#include "tools/GeneratorTune.h"

int main(int argc, char **argv) {
    if (argc == 2 && std::strcmp(argv[1], "--kiln-worker") == 0)
        return kiln::generator_worker_main(argv[0]);
    if (argc == 3 && std::strcmp(argv[1], "--kiln-tune") == 0)
        return kiln::generator_tune_main(argv[0], argv[2]);
    if (kiln::is_generator_shapes_command(argc, argv))
        return kiln::generator_shapes_main(argc, argv);
    return kiln::kiln_generator_main(argc, argv);
}
