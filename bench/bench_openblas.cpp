// bench_openblas: matmul as one cblas_sgemm call (row-major, no transposes), OpenBLAS threads set
// with openblas_set_num_threads. `--info` prints the kernel OpenBLAS chose for this CPU
// (openblas_get_corename) and its build configuration. Protocol and workloads: bench_common.h.
#include <cblas.h>

#include "bench/bench_common.h"

using namespace benchref;

int main(int argc, char **argv) {
    const std::string impl = "openblas";
    const std::vector<std::string> supported = {"matmul"};
    Options o = parse_args(impl, argc, argv);
    if (o.info) {
        const char *cc = std::getenv("OPENBLAS_CORETYPE");
        const char *l2 = std::getenv("OPENBLAS_L2_SIZE");
        std::printf(
            "corename: %s\nconfig: %s\nprocessors: %d\nOPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n",
            openblas_get_corename(), openblas_get_config(), openblas_get_num_procs(),
            cc ? cc : "(unset)", l2 ? l2 : "(unset)");
        return 0;
    }
    if (o.list) {
        print_list(supported);
        return 0;
    }
    require_supported(impl, o, supported);
    openblas_set_num_threads(o.threads);
    Problem p = make_problem(o.workload, o.shape);
    const int M = int(o.shape[0]), N = int(o.shape[1]), K = int(o.shape[2]);
    Kernel k;
    k.run = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, p.a.data(), K,
                    p.b.data(), N, 0.f, p.out.data(), N);
    };
    k.note = std::string("kernel ") + openblas_get_corename();
    return measure_and_print(impl, o, p, k);
}
