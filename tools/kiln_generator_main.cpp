// main() of every generator executable: link kiln::generator and register generators with
// KILN_REGISTER_GENERATOR (driver/Generator.h); this runs the one the command line names.
#include "driver/Generator.h"

int main(int argc, char **argv) {
    return kiln::kiln_generator_main(argc, argv);
}
