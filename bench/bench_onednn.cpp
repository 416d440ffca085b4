// bench_onednn: oneDNN (Debian's 2.6, OpenMP runtime; threads via omp_set_num_threads before the
// primitives are created).
//   matmul  the matmul primitive on plain row-major f32 A, B, C (what a user with plain matrices
//           calls).
//   conv2d  convolution_forward (forward_inference, direct) created with format `any`, so oneDNN
//           picks its blocked layouts (e.g. nChw16c / OIhw16i16o); the user's NCHW input and OIHW
//           weights are reordered into them once, OUTSIDE the timed region, as a user who keeps
//           tensors in oneDNN's layout between layers would do; the timed run is the convolution
//           alone; the output is reordered back to NCHW for the check, also untimed.
//           Built as bench_onednn_nchw (KILN_BENCH_ONEDNN_NCHW, impl "onednn_nchw", conv2d
//           only): what a user with NCHW tensors pays per call, the reorder of the input into
//           the blocked layout, the convolution and the reorder of the output back to NCHW, all
//           timed (the weights still reordered once, untimed, as constant weights would be).
//   matmul_u8s8 the matmul primitive on u8 A, s8 B, s32 C (plain A and C; B reordered once,
//           untimed, into the layout oneDNN picks: its AMX / VNNI path).
//   matmul_bf16 the same on bf16 A and B, f32 C (its AMX bf16 path where the CPU has one).
//   softmax softmax_forward over axis 1 (rows of W contiguous floats), plain layout.
//   layernorm layer_normalization_forward (forward_inference, use_scale | use_shift: gamma and
//           beta as two f32 vectors) over rows of W contiguous floats, plain layout; the mean and
//           variance it computes go to scratch memories made once, outside the timed region.
// Each measurement's "note" names the implementation oneDNN chose (impl_info_str). Protocol and
// workloads: bench_common.h.
#include <omp.h>

#include <unordered_map>

#include <dnnl.hpp>

#include "bench/bench_common.h"

using namespace benchref;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

int main(int argc, char **argv) {
#if KILN_BENCH_ONEDNN_NCHW
    const std::string impl = "onednn_nchw";
    const std::vector<std::string> supported = {"conv2d"};
    const bool nchw = true;
#else
    const std::string impl = "onednn";
    const std::vector<std::string> supported = {"matmul", "matmul_u8s8", "matmul_bf16",
                                                "conv2d", "softmax",     "layernorm"};
    const bool nchw = false;
#endif
    Options o = parse_args(impl, argc, argv);
    if (o.info) {
        const dnnl_version_t *v = dnnl::version();
        std::printf("oneDNN %d.%d.%d (%s), cpu runtime %d, effective isa %d\n", v->major, v->minor,
                    v->patch, v->hash, v->cpu_runtime, int(dnnl::get_effective_cpu_isa()));
        return 0;
    }
    if (o.list) {
        print_list(supported);
        return 0;
    }
    require_supported(impl, o, supported);
    omp_set_num_threads(o.threads);
    Problem p = make_problem(o.workload, o.shape);
    const auto &s = o.shape;

    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    Kernel k;
    // Memories and primitives live as long as the kernel's closures.
    std::vector<dnnl::memory> keep;
    if (o.workload == "matmul") {
        const dnnl::memory::dim M = s[0], N = s[1], K = s[2];
        dnnl::memory::desc a_md({M, K}, dt::f32, tag::ab), b_md({K, N}, dt::f32, tag::ab),
            c_md({M, N}, dt::f32, tag::ab);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
        auto prim = std::make_shared<dnnl::matmul>(pd);
        dnnl::memory A(a_md, eng, p.a.data()), B(b_md, eng, p.b.data()), C(c_md, eng, p.out.data());
        k.run = [=, &strm]() mutable {
            prim->execute(strm, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
            strm.wait();
        };
        k.note = "impl " + std::string(pd.impl_info_str()) + ", plain row-major";
    } else if (o.workload == "matmul_u8s8" || o.workload == "matmul_bf16") {
        // The weights in the layout oneDNN chooses (format `any`: its blocked VNNI layout for
        // AMX or AVX-512 VNNI), reordered once from the plain K x N matrix, untimed.
        const bool bf16 = o.workload == "matmul_bf16";
        const dnnl::memory::dim M = s[0], N = s[1], K = s[2];
        const dt a_type = bf16 ? dt::bf16 : dt::u8, b_type = bf16 ? dt::bf16 : dt::s8,
                 c_type = bf16 ? dt::f32 : dt::s32;
        dnnl::memory::desc a_md({M, K}, a_type, tag::ab), b_plain({K, N}, b_type, tag::ab),
            b_any({K, N}, b_type, tag::any), c_md({M, N}, c_type, tag::ab);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), eng);
        auto prim = std::make_shared<dnnl::matmul>(pd);
        void *a = bf16 ? static_cast<void *>(p.abf.data()) : p.a8.data();
        void *b = bf16 ? static_cast<void *>(p.bbf.data()) : p.b8.data();
        void *c = bf16 ? static_cast<void *>(p.out.data()) : p.out32.data();
        dnnl::memory A(a_md, eng, a), C(c_md, eng, c);
        dnnl::memory B_plain(b_plain, eng, b), B(pd.weights_desc(), eng);
        dnnl::reorder(B_plain, B).execute(strm, B_plain, B);
        strm.wait();
        k.run = [=, &strm]() mutable {
            prim->execute(strm, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
            strm.wait();
        };
        k.note = "impl " + std::string(pd.impl_info_str()) +
                 ", weights reordered to its layout once, untimed";
    } else if (o.workload == "conv2d") {
        const dnnl::memory::dim C = s[1], H = s[2], W = s[3], K = s[4];
        dnnl::memory::desc src_any({1, C, H, W}, dt::f32, tag::any),
            w_any({K, C, 3, 3}, dt::f32, tag::any), dst_any({1, K, H, W}, dt::f32, tag::any);
        dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference,
                                           dnnl::algorithm::convolution_direct, src_any, w_any,
                                           dst_any, {1, 1}, {1, 1}, {1, 1});
        dnnl::convolution_forward::primitive_desc pd(cd, eng);
        auto prim = std::make_shared<dnnl::convolution_forward>(pd);
        dnnl::memory user_src({{1, C, H, W}, dt::f32, tag::nchw}, eng, p.a.data());
        dnnl::memory user_w({{K, C, 3, 3}, dt::f32, tag::oihw}, eng, p.b.data());
        dnnl::memory user_dst({{1, K, H, W}, dt::f32, tag::nchw}, eng, p.out.data());
        // Untimed (except the input's with nchw): inputs into the primitive's layouts.
        dnnl::memory src = user_src, wts = user_w, dst = user_dst;
        const bool src_reorder = pd.src_desc() != user_src.get_desc();
        if (src_reorder) {
            src = dnnl::memory(pd.src_desc(), eng);
            dnnl::reorder(user_src, src).execute(strm, user_src, src);
        }
        if (pd.weights_desc() != user_w.get_desc()) {
            wts = dnnl::memory(pd.weights_desc(), eng);
            dnnl::reorder(user_w, wts).execute(strm, user_w, wts);
        }
        bool dst_reorder = pd.dst_desc() != user_dst.get_desc();
        if (dst_reorder) dst = dnnl::memory(pd.dst_desc(), eng);
        strm.wait();
        auto src_in = std::make_shared<dnnl::reorder>(src_reorder ? dnnl::reorder(user_src, src)
                                                                  : dnnl::reorder());
        auto dst_out = std::make_shared<dnnl::reorder>(dst_reorder ? dnnl::reorder(dst, user_dst)
                                                                   : dnnl::reorder());
        k.run = [=, &strm]() mutable {
            if (nchw && src_reorder) src_in->execute(strm, user_src, src);
            prim->execute(strm,
                          {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DST, dst}});
            if (nchw && dst_reorder) dst_out->execute(strm, dst, user_dst);
            strm.wait();
        };
        k.finish = [=, &strm]() mutable {
            if (!nchw && dst_reorder) {
                dst_out->execute(strm, dst, user_dst);
                strm.wait();
            }
        };
        k.note = "impl " + std::string(pd.impl_info_str()) +
                 (!src_reorder ? ", plain NCHW"
                  : nchw       ? ", blocked layouts chosen by oneDNN, input and output reorders "
                                 "from and to NCHW timed"
                               : ", blocked layouts chosen by oneDNN, reorders untimed");
    } else if (o.workload == "layernorm") {
        const dnnl::memory::dim H = s[0], W = s[1];
        dnnl::memory::desc md({H, W}, dt::f32, tag::ab);
        dnnl::layer_normalization_forward::primitive_desc pd(
            dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, md, 1e-5f,
                                                    dnnl::normalization_flags::use_scale |
                                                        dnnl::normalization_flags::use_shift),
            eng);
        auto prim = std::make_shared<dnnl::layer_normalization_forward>(pd);
        dnnl::memory::desc vec_md({W}, dt::f32, tag::a);
        dnnl::memory in(md, eng, p.a.data()), out(md, eng, p.out.data());
        dnnl::memory scale(vec_md, eng, p.b.data()), shift(vec_md, eng, p.c.data());
        std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, in},
                                                      {DNNL_ARG_DST, out},
                                                      {DNNL_ARG_SCALE, scale},
                                                      {DNNL_ARG_SHIFT, shift}};
        // Statistics and workspace the primitive asks for (empty descriptors: none).
        const std::pair<int, dnnl::memory::desc> extra[] = {
            {DNNL_ARG_MEAN, pd.mean_desc()},
            {DNNL_ARG_VARIANCE, pd.variance_desc()},
            {DNNL_ARG_WORKSPACE, pd.workspace_desc()},
            {DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc()}};
        for (const auto &[arg, desc] : extra) {
            if (desc.get_size() != 0) args[arg] = dnnl::memory(desc, eng);
        }
        k.run = [=, &strm]() mutable {
            prim->execute(strm, args);
            strm.wait();
        };
        k.note = "impl " + std::string(pd.impl_info_str());
    } else {
        const dnnl::memory::dim H = s[0], W = s[1];
        dnnl::memory::desc md({H, W}, dt::f32, tag::ab);
        dnnl::softmax_forward::primitive_desc pd(
            dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, md, 1), eng);
        auto prim = std::make_shared<dnnl::softmax_forward>(pd);
        dnnl::memory in(md, eng, p.a.data()), out(md, eng, p.out.data());
        k.run = [=, &strm]() mutable {
            prim->execute(strm, {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, out}});
            strm.wait();
        };
        k.note = "impl " + std::string(pd.impl_info_str());
    }
    return measure_and_print(impl, o, p, k);
}
