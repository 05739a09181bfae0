// Workbench: fused causal self-attention (kernels/attention.cuh), forward and
// backward, against the CPU twin kernels/cpu/attention.h.
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -I. dev/cuda/attention.cu -o build/attention_bench
//   (or make -C dev/cuda attention)
//
//   usage: attention_bench [check] [--reps N] [--check-determinism] [--sweep] [--quick]
//     check                no timing (what `make -C dev/cuda test` runs)
//     --check-determinism  also run forward and backward twice on GPT-2's shape, every
//                          dtype, and compare the results bit for bit
//     --sweep              also time the alternative tile shapes of the bf16 hs=64
//                          kernels (each checked against the default kernels first)
//     --quick              skip the GPT-2-sized correctness cases (slow CPU reference)
//
// Built with cuDNN (dev/cuda/Makefile finds it as the trainer's Makefile does), it
// checks and times cuDNN's fused attention (kernels/attention_cudnn.cuh, the
// trainer's --attention cudnn) the same way, against the same CPU twin, beside ours;
// and its determinism always (the trainer's runs are bit-identical with it too).
//
// 1. Correctness: random inputs (normal, never zeros), the CUDA kernels against the CPU
//    twin, fp32 (the simple kernels; max|err| / max|ref| <= 1e-5) and bf16 / fp16 (the
//    tensor-core kernels, and the simple ones for head sizes or alignments the
//    tensor-core path does not take; ||err|| / ||ref|| <= 1e-2), on out, lse and dqkv
//    (and dq, dk, dv separately). The reference runs in fp32 on the same rounded
//    inputs; the backward reference is given the kernel's own out and lse, so that each
//    pass is judged on its own. On GPT-2 124M's shape (B=8, T=1024, NH=12, hs=64) the CPU
//    reference covers batches 0 and B-1 only. Outputs are poisoned with NaN first, so
//    anything left unwritten fails. Exit status 1 if any check failed.
// 2. Timing (unless `check`): forward and backward on GPT-2's shape, bf16 (also fp16 and
//    the fp32 path), median of N (default 20), in TFLOP/s counting causal flops: forward
//    2*2*B*NH*T^2*hs/2, backward 2.5 times that. Two numbers each: "cold" flushes L2
//    before every run (the workbench convention, common.h); "warm" queues the runs back
//    to back, as PyTorch's benchmark timer measures.
//
// The target is >= 80% of PyTorch's scaled_dot_product_attention (flash / cuDNN backend)
// on the same GPU, forward + backward. PyTorch's number on that machine:
//   python3 -c "import torch,torch.nn.functional as F; B,H,T,D=8,12,1024,64
//   q,k,v=(torch.randn(B,H,T,D,device='cuda',dtype=torch.bfloat16,requires_grad=True) for _ in range(3))
//   g=torch.randn(B,H,T,D,device='cuda',dtype=torch.bfloat16)
//   f=lambda: F.scaled_dot_product_attention(q,k,v,is_causal=True)
//   fb=lambda: torch.autograd.grad(f(),(q,k,v),g)
//   import torch.utils.benchmark as tb
//   print(tb.Timer('f()',globals=dict(f=f)).blocked_autorange().median*1e6,'us fwd')
//   print(tb.Timer('fb()',globals=dict(fb=fb)).blocked_autorange().median*1e6,'us fwd+bwd')"
// (torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION]) or CUDNN_ATTENTION
// around the timers picks a backend.) Compare with our "warm" fwd+bwd.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "dev/cuda/common.h"
#include "kernels/attention.cuh"
#include "kernels/attention_cudnn.cuh"
#include "kernels/cpu/attention.h"

namespace {

template <typename T>
std::vector<float> to_floats(const std::vector<T>& v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = to_float(v[i]);
    return r;
}

// fp32: max|a - ref| / max|ref|; 16-bit: ||a - ref|| / ||ref||. A non-finite value -> inf.
template <typename T>
double rel_error(const std::vector<float>& a, const std::vector<float>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (!std::isfinite(a[i])) return INFINITY;
        const double d = (double)a[i] - (double)ref[i];
        if (std::is_same<T, float>::value) {
            num = std::max(num, std::fabs(d));
            den = std::max(den, std::fabs((double)ref[i]));
        } else {
            num += d * d;
            den += (double)ref[i] * ref[i];
        }
    }
    if (!std::is_same<T, float>::value) num = std::sqrt(num), den = std::sqrt(den);
    return den > 0 ? num / den : num;
}

template <typename T>
void check_rel(Bench& b, const std::string& what, const std::vector<float>& got, const std::vector<float>& ref) {
    const bool f32 = std::is_same<T, float>::value;
    const double tol = f32 ? 1e-5 : 1e-2, err = rel_error<T>(got, ref);
    char detail[96];
    snprintf(detail, sizeof(detail), "%s %.2e (tol %.0e)", f32 ? "maxrel" : "l2rel", err, tol);
    b.record(err <= tol, what, detail);  // false for NaN
}

struct Shape {
    int B, T, NH, hs;
    int C() const { return NH * hs; }
};

// Device tensors of one problem, with random inputs. `offset` shifts every tensor that
// many elements from an aligned start (1: misaligned, which the simple kernels take).
template <typename T>
struct Problem {
    Shape s;
    size_t n_qkv, n_out, n_lse;
    std::vector<T> qkv, dout;  // host copies of the inputs
    DevBuf<T> qkv_buf, dout_buf, out_buf, dqkv_buf;
    DevBuf<float> lse_buf;
    T *d_qkv, *d_dout, *d_out, *d_dqkv;
    float* d_lse;

    Problem(Shape s_, float qk_std, uint64_t seed, size_t offset = 0)
        : s(s_),
          n_qkv((size_t)s_.B * s_.T * 3 * s_.C()),
          n_out((size_t)s_.B * s_.T * s_.C()),
          n_lse((size_t)s_.B * s_.NH * s_.T),
          qkv(n_qkv),
          dout(n_out),
          qkv_buf(n_qkv + offset),
          dout_buf(n_out + offset),
          out_buf(n_out + offset),
          dqkv_buf(n_qkv + offset),
          lse_buf(n_lse) {
        const size_t C = (size_t)s.C();
        for (size_t i = 0; i < n_qkv; i++) {
            // q and k with standard deviation qk_std (the softmax's sharpness), v unit
            const bool is_v = i % (3 * C) >= 2 * C;
            qkv[i] = from_float<T>(random_normal(seed, i) * (is_v ? 1.0f : qk_std));
        }
        for (size_t i = 0; i < n_out; i++) dout[i] = from_float<T>(random_normal(seed + 1, i));
        d_qkv = qkv_buf.ptr + offset;
        d_dout = dout_buf.ptr + offset;
        d_out = out_buf.ptr + offset;
        d_dqkv = dqkv_buf.ptr + offset;
        d_lse = lse_buf.ptr;
        // complete on return (common.h): the kernels run on a non-blocking stream,
        // which does not wait for the legacy stream's copies and memsets
        h2d(d_qkv, qkv.data(), n_qkv * sizeof(T));
        h2d(d_dout, dout.data(), n_out * sizeof(T));
    }
    void poison_forward() {  // all-ones bytes: NaN in every dtype
        poison(d_out, n_out * sizeof(T));
        poison(d_lse, n_lse * sizeof(float));
    }
    void poison_backward() { poison(d_dqkv, n_qkv * sizeof(T)); }
    // Ordered both ways against the kernels' stream: nothing still writes the
    // buffer when the memset starts, and the memset is done before any kernel reads.
    static void poison(void* d, size_t bytes) {
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemset(d, 0xff, bytes));
        cudaCheck(cudaDeviceSynchronize());
    }
    // ours, or cuDNN's where the context has it
    void forward(const KernelCtx& ctx) {
#ifdef ZERO_CUDNN
        if (ctx.cudnn) return attention_cudnn_forward(ctx, d_out, d_lse, d_qkv, s.B, s.T, s.C(), s.NH);
#endif
        attention_forward_cuda(ctx, d_out, d_lse, d_qkv, s.B, s.T, s.C(), s.NH);
    }
    void backward(const KernelCtx& ctx) {
#ifdef ZERO_CUDNN
        if (ctx.cudnn) return attention_cudnn_backward(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, s.B, s.T, s.C(), s.NH);
#endif
        attention_backward_cuda(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, s.B, s.T, s.C(), s.NH);
    }
    template <typename U>
    static std::vector<U> fetch(const U* d, size_t n) {
        std::vector<U> h(n);
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(U), cudaMemcpyDeviceToHost));
        return h;
    }
};

// A kernel context whose workspace covers both the trainer's sizing
// (own_kernel_workspace_bytes) and what the attention backward asks for; with
// `cudnn`, cuDNN's attention and the trainer's sizing of its workspace for the
// largest shape.
struct AttnCtx {
    KernelCtx ctx;
    AttnCtx(Shape max, bool cudnn = false) {
        const size_t BT = (size_t)max.B * max.T;
        ctx.stream = stream_create(Lane::Compute);
        ctx.workspace_bytes = std::max(own_kernel_workspace_bytes(BT, max.C(), max.NH), attention_workspace_bytes(BT, max.NH));
#ifdef ZERO_CUDNN
        if (cudnn) {
            ctx.cudnn = new CudnnAttention();
            ctx.workspace_bytes = std::max(ctx.workspace_bytes, attention_cudnn_workspace_bytes(max.B, max.T, max.NH));
        }
#endif
        (void)cudnn;
        cudaCheck(cudaMalloc(&ctx.workspace, ctx.workspace_bytes));
    }
    ~AttnCtx() {
        cudaDeviceSynchronize();
#ifdef ZERO_CUDNN
        delete ctx.cudnn;
#endif
        cudaFree(ctx.workspace);
        stream_destroy(ctx.stream);
    }
};

// One shape through forward and backward, compared with the CPU twin on the listed
// batches (all when empty).
template <typename T>
void check_case(Bench& b, const KernelCtx& ctx, const char* label, Shape s, float qk_std, std::vector<int> batches = {},
                size_t offset = 0) {
    const std::string tag = shape_str("[%s %s B=%d T=%d NH=%d hs=%d%s%s]", tname<T>(), label, s.B, s.T, s.NH, s.hs,
                                      offset ? " misaligned" : "", batches.empty() ? "" : " ref on batches");
    if (batches.empty())
        for (int i = 0; i < s.B; i++) batches.push_back(i);
    Problem<T> p(s, qk_std, 1234 + s.T, offset);
    p.poison_forward();
    p.poison_backward();
    p.forward(ctx);
    p.backward(ctx);
    const std::vector<float> out = to_floats(Problem<T>::fetch(p.d_out, p.n_out));
    const std::vector<float> lse = Problem<T>::fetch(p.d_lse, p.n_lse);
    const std::vector<float> dqkv = to_floats(Problem<T>::fetch(p.d_dqkv, p.n_qkv));
    const std::vector<float> qkv = to_floats(p.qkv), dout = to_floats(p.dout);

    const int C = s.C(), T_ = s.T;
    const size_t C3 = 3 * (size_t)C;
    const size_t per_qkv = (size_t)T_ * C3, per_out = (size_t)T_ * C, per_lse = (size_t)s.NH * T_;
    std::vector<float> out_ref, lse_ref, dqkv_ref, out_got, lse_got, dqkv_got;
    for (int bi : batches) {
        std::vector<float> o(per_out), l(per_lse), d(per_qkv);
        attention_forward_cpu(o.data(), l.data(), qkv.data() + bi * per_qkv, 1, T_, C, s.NH);
        // the backward reference gets the kernel's own out and lse
        attention_backward_cpu(d.data(), dout.data() + bi * per_out, qkv.data() + bi * per_qkv,
                               out.data() + bi * per_out, lse.data() + bi * per_lse, 1, T_, C, s.NH);
        out_ref.insert(out_ref.end(), o.begin(), o.end());
        lse_ref.insert(lse_ref.end(), l.begin(), l.end());
        dqkv_ref.insert(dqkv_ref.end(), d.begin(), d.end());
        out_got.insert(out_got.end(), out.begin() + bi * per_out, out.begin() + (bi + 1) * per_out);
        lse_got.insert(lse_got.end(), lse.begin() + bi * per_lse, lse.begin() + (bi + 1) * per_lse);
        dqkv_got.insert(dqkv_got.end(), dqkv.begin() + bi * per_qkv, dqkv.begin() + (bi + 1) * per_qkv);
    }
    check_rel<T>(b, "out  " + tag, out_got, out_ref);
    check_rel<T>(b, "lse  " + tag, lse_got, lse_ref);
    check_rel<T>(b, "dqkv " + tag, dqkv_got, dqkv_ref);
    for (int part = 0; part < 3; part++) {  // dq, dk, dv on their own
        std::vector<float> got, ref;
        for (size_t row = 0; row < dqkv_got.size() / C3; row++)
            for (int c = 0; c < C; c++) {
                got.push_back(dqkv_got[row * C3 + part * C + c]);
                ref.push_back(dqkv_ref[row * C3 + part * C + c]);
            }
        check_rel<T>(b, std::string(part == 0 ? "  dq " : part == 1 ? "  dk " : "  dv ") + tag, got, ref);
    }
}

// forward twice, then backward twice from the same out/lse: every bit the same
template <typename T>
void check_determinism(Bench& b, const KernelCtx& ctx, Shape s, const char* label = "") {
    const std::string tag = shape_str("[%s%s B=%d T=%d NH=%d hs=%d]", label, tname<T>(), s.B, s.T, s.NH, s.hs);
    Problem<T> p(s, 1.0f, 99);
    p.poison_forward();
    p.forward(ctx);
    const auto out1 = Problem<T>::fetch(p.d_out, p.n_out);
    const auto lse1 = Problem<T>::fetch(p.d_lse, p.n_lse);
    p.poison_forward();
    p.forward(ctx);
    check_exact(b, "determinism: forward out " + tag, Problem<T>::fetch(p.d_out, p.n_out), out1);
    check_exact(b, "determinism: forward lse " + tag, Problem<T>::fetch(p.d_lse, p.n_lse), lse1);
    p.poison_backward();
    p.backward(ctx);
    const auto dqkv1 = Problem<T>::fetch(p.d_dqkv, p.n_qkv);
    p.poison_backward();
    p.backward(ctx);
    check_exact(b, "determinism: backward dqkv " + tag, Problem<T>::fetch(p.d_dqkv, p.n_qkv), dqkv1);
}

// median GPU time (ms) of `reps` runs queued back to back (warm caches, no gaps)
template <typename Fn>
double time_warm_ms(cudaStream_t stream, int reps, Fn fn) {
    for (int i = 0; i < 5; i++) fn();
    std::vector<cudaEvent_t> ev(2 * reps);
    for (auto& e : ev) cudaCheck(cudaEventCreate(&e));
    for (int i = 0; i < reps; i++) {
        cudaCheck(cudaEventRecord(ev[2 * i], stream));
        fn();
        cudaCheck(cudaEventRecord(ev[2 * i + 1], stream));
    }
    cudaCheck(cudaStreamSynchronize(stream));
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; i++) cudaCheck(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
    for (auto& e : ev) cudaCheck(cudaEventDestroy(e));
    std::sort(ms.begin(), ms.end());
    return ms[reps / 2];
}

double fwd_flops(Shape s) { return 2.0 * 2.0 * s.B * s.NH * (double)s.T * s.T * s.hs / 2.0; }
double tflops(double flops, double ms) { return flops / (ms * 1e-3) / 1e12; }

template <typename Fwd, typename Bwd>
void time_pair(Bench& b, cudaStream_t stream, const std::string& what, Shape s, Fwd fwd, Bwd bwd) {
    const double f = fwd_flops(s);
    const double fc = b.time_ms(stream, fwd), bc = b.time_ms(stream, bwd);
    const double fw = time_warm_ms(stream, b.reps, fwd), bw = time_warm_ms(stream, b.reps, bwd);
    printf("  %-44s cold: fwd %7.1f us %5.1f TF/s  bwd %7.1f us %5.1f TF/s  fwd+bwd %7.1f us %5.1f TF/s\n",
           what.c_str(), fc * 1e3, tflops(f, fc), bc * 1e3, tflops(2.5 * f, bc), (fc + bc) * 1e3,
           tflops(3.5 * f, fc + bc));
    printf("  %-44s warm: fwd %7.1f us %5.1f TF/s  bwd %7.1f us %5.1f TF/s  fwd+bwd %7.1f us %5.1f TF/s\n", "",
           fw * 1e3, tflops(f, fw), bw * 1e3, tflops(2.5 * f, bw), (fw + bw) * 1e3, tflops(3.5 * f, fw + bw));
}

template <typename T>
void time_default(Bench& b, const KernelCtx& ctx, Shape s, const char* label = "") {
    Problem<T> p(s, 1.0f, 7);
    p.forward(ctx);
    const std::string what = shape_str("%s%s B=%d T=%d NH=%d hs=%d%s", label, tname<T>(), s.B, s.T, s.NH, s.hs,
                                       std::is_same<T, float>::value ? " (simple kernels)" : "");
    time_pair(b, ctx.stream, what, s, [&] { p.forward(ctx); }, [&] { p.backward(ctx); });
}

// --sweep: the bf16 hs=64 tile shapes, each checked against the default kernels first
template <int MT, int NW>
void sweep_fwd(Bench& b, const KernelCtx& ctx, Problem<bf16>& p, const std::vector<float>& out_ref) {
    const Shape s = p.s;
    auto run = [&] { attn::launch_fwd_tc<bf16, 64, MT, NW>(ctx.stream, p.d_out, p.d_lse, p.d_qkv, s.B, s.T, s.NH); };
    p.poison_forward();
    run();
    const std::string tag = shape_str("sweep forward MT=%d NW=%d (BM=%d, BN=64)", MT, NW, 16 * MT * NW);
    check_rel<bf16>(b, tag + " out vs default", to_floats(Problem<bf16>::fetch(p.d_out, p.n_out)), out_ref);
    const double cold = b.time_ms(ctx.stream, run), warm = time_warm_ms(ctx.stream, b.reps, run);
    printf("  %-58s cold %7.1f us %5.1f TF/s | warm %7.1f us %5.1f TF/s\n", tag.c_str(), cold * 1e3,
           tflops(fwd_flops(s), cold), warm * 1e3, tflops(fwd_flops(s), warm));
}

template <int NWQ, int NWK, int BMK>
void sweep_bwd(Bench& b, const KernelCtx& ctx, Problem<bf16>& p, const std::vector<float>& dqkv_ref) {
    const Shape s = p.s;
    auto run = [&] {
        attn::launch_bwd_tc<bf16, 64, NWQ, NWK, BMK>(ctx.stream, p.d_dqkv, static_cast<float*>(ctx.workspace),
                                                    p.d_dout, p.d_qkv, p.d_out, p.d_lse, s.B, s.T, s.NH);
    };
    p.poison_backward();
    run();
    const std::string tag = shape_str("sweep backward dQ NW=%d (BM=%d), dKdV NW=%d (BN=%d, BM=%d)", NWQ, 16 * NWQ, NWK,
                                      16 * NWK, BMK);
    check_rel<bf16>(b, tag + " dqkv vs default", to_floats(Problem<bf16>::fetch(p.d_dqkv, p.n_qkv)), dqkv_ref);
    const double cold = b.time_ms(ctx.stream, run), warm = time_warm_ms(ctx.stream, b.reps, run);
    printf("  %-58s cold %7.1f us %5.1f TF/s | warm %7.1f us %5.1f TF/s\n", tag.c_str(), cold * 1e3,
           tflops(2.5 * fwd_flops(s), cold), warm * 1e3, tflops(2.5 * fwd_flops(s), warm));
}

void sweep(Bench& b, const KernelCtx& ctx, Shape s) {
    printf("sweep of tile shapes, bf16 B=%d T=%d NH=%d hs=%d:\n", s.B, s.T, s.NH, s.hs);
    Problem<bf16> p(s, 1.0f, 7);
    p.forward(ctx);
    p.backward(ctx);
    const auto out_ref = to_floats(Problem<bf16>::fetch(p.d_out, p.n_out));
    const auto dqkv_ref = to_floats(Problem<bf16>::fetch(p.d_dqkv, p.n_qkv));
    sweep_fwd<2, 4>(b, ctx, p, out_ref);  // the default
    sweep_fwd<1, 4>(b, ctx, p, out_ref);
    sweep_fwd<1, 8>(b, ctx, p, out_ref);
    sweep_fwd<2, 8>(b, ctx, p, out_ref);
    p.forward(ctx);  // the default forward's out and lse again, for the backward runs
    sweep_bwd<4, 4, 64>(b, ctx, p, dqkv_ref);  // the default
    sweep_bwd<8, 4, 64>(b, ctx, p, dqkv_ref);
    sweep_bwd<4, 4, 32>(b, ctx, p, dqkv_ref);
    sweep_bwd<4, 8, 64>(b, ctx, p, dqkv_ref);
    sweep_bwd<8, 8, 32>(b, ctx, p, dqkv_ref);
}

}  // namespace

int main(int argc, char** argv) {
    // our own flags; the rest (check, --reps N) go to Bench
    bool determinism = false, do_sweep = false, quick = false;
    std::vector<char*> rest = {argv[0]};
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--check-determinism") determinism = true;
        else if (a == "--sweep") do_sweep = true;
        else if (a == "--quick") quick = true;
        else rest.push_back(argv[i]);
    }
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
        printf("no CUDA device: nothing to run\n");
        return 77;  // "skipped", as the CTest suite counts it
    }
    Bench b((int)rest.size(), rest.data());

    const Shape small{2, 100, 4, 64};   // ragged T
    const Shape gpt2{8, 1024, 12, 64};  // GPT-2 124M
    AttnCtx actx(gpt2);
    const KernelCtx& ctx = actx.ctx;

    check_case<float>(b, ctx, "small", small, 1.0f);
    check_case<bf16>(b, ctx, "small", small, 1.0f);
    check_case<f16>(b, ctx, "small", small, 1.0f);
    check_case<bf16>(b, ctx, "hs32", {1, 77, 2, 32}, 1.0f);
    check_case<f16>(b, ctx, "hs128", {2, 130, 2, 128}, 1.0f);
    check_case<bf16>(b, ctx, "hs128", {1, 200, 2, 128}, 1.0f);
    check_case<bf16>(b, ctx, "sharp", {1, 257, 2, 64}, 4.0f);  // scores of std 16: a peaked softmax
    check_case<f16>(b, ctx, "sharp", {1, 257, 2, 64}, 4.0f);
    check_case<float>(b, ctx, "hs48", {1, 70, 2, 48}, 1.0f);  // simple kernels for every dtype
    check_case<bf16>(b, ctx, "hs48", {1, 70, 2, 48}, 1.0f);
    check_case<bf16>(b, ctx, "small", {1, 90, 2, 64}, 1.0f, {}, 1);  // misaligned: simple kernels
    check_case<bf16>(b, ctx, "T1", {2, 1, 2, 64}, 1.0f);
    check_case<float>(b, ctx, "T1", {2, 1, 2, 64}, 1.0f);
    if (!quick) {
        check_case<bf16>(b, ctx, "gpt2", gpt2, 1.0f, {0, gpt2.B - 1});
        check_case<f16>(b, ctx, "gpt2", gpt2, 1.0f, {gpt2.B - 1});
        check_case<float>(b, ctx, "gpt2", gpt2, 1.0f, {0});
    }
    if (determinism) {
        check_determinism<bf16>(b, ctx, gpt2);
        check_determinism<f16>(b, ctx, gpt2);
        check_determinism<float>(b, ctx, gpt2);
    }
#ifdef ZERO_CUDNN
    // cuDNN's attention: the 16-bit cases its support takes (head sizes multiples of 8, aligned)
    AttnCtx cudnn_actx(gpt2, true);
    const KernelCtx& cudnn = cudnn_actx.ctx;
    check_case<bf16>(b, cudnn, "cudnn small", small, 1.0f);
    check_case<f16>(b, cudnn, "cudnn small", small, 1.0f);
    check_case<bf16>(b, cudnn, "cudnn hs32", {1, 77, 2, 32}, 1.0f);
    check_case<f16>(b, cudnn, "cudnn hs128", {2, 130, 2, 128}, 1.0f);
    check_case<bf16>(b, cudnn, "cudnn hs48", {1, 70, 2, 48}, 1.0f);
    check_case<bf16>(b, cudnn, "cudnn sharp", {1, 257, 2, 64}, 4.0f);
    check_case<f16>(b, cudnn, "cudnn sharp", {1, 257, 2, 64}, 4.0f);
    if (!quick) {
        check_case<bf16>(b, cudnn, "cudnn gpt2", gpt2, 1.0f, {0, gpt2.B - 1});
        check_case<f16>(b, cudnn, "cudnn gpt2", gpt2, 1.0f, {gpt2.B - 1});
    }
    check_determinism<bf16>(b, cudnn, gpt2, "cudnn ");
    check_determinism<f16>(b, cudnn, gpt2, "cudnn ");
#endif
    if (!b.check_only) {
        printf("timing, median of %d (cold: L2 flushed before each run; warm: back to back):\n", b.reps);
        time_default<bf16>(b, ctx, gpt2);
        time_default<f16>(b, ctx, gpt2);
        time_default<float>(b, ctx, gpt2);
#ifdef ZERO_CUDNN
        time_default<bf16>(b, cudnn, gpt2, "cuDNN ");
        time_default<f16>(b, cudnn, gpt2, "cuDNN ");
#endif
        if (do_sweep) sweep(b, ctx, gpt2);
    }
    return b.finish();
}
