// The kiln command line. Subcommands grow with the project; `demo` runs a small pipeline through
// the reference evaluator and prints every level that exists today.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "kiln.h"

namespace {

using namespace kiln;

int run_demo(int width, int height) {
    Buffer<float> input(std::vector<int>{width, height}, "input");
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++)
            input(x, y) = float((x * 7 + y * 13) % 17);
    }
    Var x("x"), y("y");
    Func clamped = repeat_edge(input);
    Func blur_x("blur_x"), blur_y("blur_y");
    blur_x(x, y) = (clamped(x - 1, y) + clamped(x, y) + clamped(x + 1, y)) / 3;
    blur_y(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3;

    std::cout << "algorithm:\n" << blur_y.to_string() << "\n";
    auto start = std::chrono::steady_clock::now();
    Buffer<float> out = reference_realize(blur_y, {width, height});
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double checksum = 0;
    for (int j = 0; j < height; j++) {
        for (int i = 0; i < width; i++)
            checksum += out(i, j);
    }
    std::printf("reference evaluation of blur_y over %dx%d: %.1f ms, checksum %.4f\n", width,
                height, ms, checksum);
    std::printf("out(0, 0) = %g, out(%d, %d) = %g\n", out(0, 0), width / 2, height / 2,
                out(width / 2, height / 2));
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"kiln: a scheduling language and autotuner for fast kernels"};
    app.require_subcommand(1);

    int width = 64, height = 48;
    CLI::App *demo = app.add_subcommand("demo", "run a 3x3 blur through the reference evaluator");
    demo->add_option("--width", width, "output width")->check(CLI::PositiveNumber);
    demo->add_option("--height", height, "output height")->check(CLI::PositiveNumber);

    CLI11_PARSE(app, argc, argv);
    try {
        if (*demo) return run_demo(width, height);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kiln: %s\n", e.what());
        return 1;
    }
    return 0;
}
