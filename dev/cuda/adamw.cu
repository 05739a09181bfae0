// Workbench: fused AdamW (kernels/adamw.cuh) against kernels/cpu/adamw.h, and
// its bandwidth as a fraction of a device-to-device copy (target >= 85%).
//   make -C dev/cuda adamw && ./dev/cuda/adamw [check]
//
// Both sides run the same adamw_update / round_param code. In the normal build
// nvcc may contract a*b+c into one FMA on the device where the host does two
// roundings, so master/m/v can differ in the last bit (checked at 1e-6 of the
// largest value) and a bf16 copy, whose stochastic rounding looks at every bit
// of the fp32 master, can then round the other way (see check_param).
// adamw_exact is this file built with -fmad=false (and the host with
// -ffp-contract=off): the device then does exactly the CPU's operations
// (IEEE add/mul/div/sqrt, same order), so everything must match bit for bit.
//
// The one-launch AdamW over a table of pieces (adamw_pieces_cuda,
// ZERO_VARIANTS=fused_optimizer) is checked against adamw_cuda piece by
// piece, bit for bit in both builds (the same per-element code and keys), and
// against the CPU twin as above: over GPT-2 124M's pieces (its layout at one
// rank: 148 tensors) and ragged ones (odd lengths, an empty piece, unaligned
// pieces that take the scalar path, decay on and off).
#include "dev/cuda/common.h"
#include "kernels/adamw.cuh"
#include "kernels/cpu/adamw.h"
#include "kernels/reduce.cuh"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"

#ifndef ADAMW_EXACT
#define ADAMW_EXACT 0
#endif

AdamWStep make_step(int t) {
    AdamWStep s;
    s.lr = 6e-4f;
    s.beta1 = 0.9f;
    s.beta2 = 0.95f;
    s.eps = 1e-8f;
    s.weight_decay = 0.1f;
    s.grad_scale = 0.7f;  // e.g. 1/loss_scale times a clip coefficient
    s.bias_correction1 = 1.0f - powf(s.beta1, (float)t);
    s.bias_correction2 = 1.0f - powf(s.beta2, (float)t);
    s.rounding_seed = 0x5eed0000ull + t;
    return s;
}

// The compute-dtype copy, checked two ways:
//  1. exactly: it must be round_param (the CPU twin's rounding, stochastic for
//     bf16) of the kernel's own fp32 master, bit for bit: the rounding itself
//     has no tolerance;
//  2. against the CPU twin's copy: with adamw_exact bit for bit; fp32 and fp16
//     within 1e-6 max / 1e-3 l2; bf16 by count: the masters may differ in their
//     last bits (FMA contraction), and a stochastic rounding that sees every bit
//     can then land on another bf16, for at most 1e-4 of the elements. How far is
//     not bounded by one bf16 step: where the update cancels the weight to near
//     zero, the master's absolute error (~2^-24 of the update) is many steps of
//     the tiny result (seen on an H100: -1.484e-9 vs -1.499e-9, two steps, at one
//     element of 124M).
template <typename Tp>
void check_param(Bench& b, const std::string& what, const std::vector<Tp>& got, const std::vector<Tp>& ref,
                 const std::vector<float>& got_master, uint64_t seed, size_t full_offset) {
    std::vector<Tp> rounded(got.size());
    for (size_t i = 0; i < got.size(); i++) rounded[i] = round_param<Tp>(got_master[i], seed, full_offset + i);
    check_exact(b, what + " = round(own master)", got, rounded);
    if (ADAMW_EXACT || sizeof(Tp) == 4 || dtype_of<Tp>::value == DType::F16) {
        if (ADAMW_EXACT) check_exact(b, what, got, ref);
        else check_close(b, what, got, ref, 1e-6, 1e-3);
        return;
    }
    size_t flips = 0;
    for (size_t i = 0; i < ref.size(); i++) flips += memcmp(&got[i], &ref[i], sizeof(Tp)) != 0;
    bool ok = flips <= ref.size() / 10000 + 1;
    char detail[160];
    snprintf(detail, sizeof(detail), "%zu/%zu differ from the CPU twin (tol 1e-4)", flips, ref.size());
    b.record(ok, what, detail);
}

template <typename Tg, typename Tp>
void test_adamw(Bench& b, size_t n, size_t offset, bool with_param, bool timed) {
    std::string tag = shape_str("[g %s, p %s] n=%zu offset=%zu%s", tname<Tg>(), tname<Tp>(), n, offset,
                                with_param ? "" : " param=null");
    BenchCtx bc(1, 8);
    const KernelCtx& ctx = bc;
    const size_t full_offset = 1234567;  // the piece's place in the full flat buffer
    std::vector<float> master = rand_vec<float>(n, 61, -0.2f, 0.2f);
    std::vector<float> m = rand_vec<float>(n, 62, -1e-3f, 1e-3f);
    std::vector<float> v = rand_vec<float>(n, 63, 1e-8f, 1e-5f);
    std::vector<Tg> grad = rand_vec<Tg>(n, 64, -0.01f, 0.01f);
    std::vector<Tp> param(n);
    AdamWStep s = make_step(7);

    std::vector<float> rm = master, rmm = m, rv = v;
    std::vector<Tp> rp(n);
    adamw_cpu(rm.data(), rmm.data(), rv.data(), grad.data(), with_param ? rp.data() : (Tp*)nullptr, n, s, full_offset);

    DevBuf<float> d_master(n + offset), d_m(n + offset), d_v(n + offset);
    DevBuf<Tg> d_grad(n + offset);
    DevBuf<Tp> d_param(n + offset);
    auto up = [&](auto& dst, const auto& h) {
        h2d(dst.ptr + offset, h.data(), n * sizeof(h[0]));
    };
    auto down = [&](const auto& src, auto& h) {
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(h.data(), src.ptr + offset, n * sizeof(h[0]), cudaMemcpyDeviceToHost));
    };
    up(d_master, master), up(d_m, m), up(d_v, v), up(d_grad, grad);
    adamw_cuda(ctx, d_master.ptr + offset, d_m.ptr + offset, d_v.ptr + offset, d_grad.ptr + offset,
               with_param ? d_param.ptr + offset : (Tp*)nullptr, n, s, full_offset);
    std::vector<float> gm(n), gmm(n), gv(n);
    std::vector<Tp> gp(n);
    down(d_master, gm), down(d_m, gmm), down(d_v, gv);
    if (ADAMW_EXACT) {
        check_exact(b, "adamw master " + tag, gm, rm);
        check_exact(b, "adamw m " + tag, gmm, rmm);
        check_exact(b, "adamw v " + tag, gv, rv);
    } else {
        check_close(b, "adamw master " + tag, gm, rm, 1e-6);
        check_close(b, "adamw m " + tag, gmm, rmm, 1e-6);
        check_close(b, "adamw v " + tag, gv, rv, 1e-6);
    }
    if (with_param) {
        down(d_param, gp);
        check_param(b, "adamw param " + tag, gp, rp, gm, s.rounding_seed, full_offset);
    }

    if (timed && !b.check_only) {
        const double bytes = (double)n * (24 + sizeof(Tg) + (with_param ? sizeof(Tp) : 0));
        double copy = b.copy_gbps(ctx.stream, (size_t)(bytes / 2));
        double ms = b.time_ms(ctx.stream, [&] {
            adamw_cuda(ctx, d_master.ptr, d_m.ptr, d_v.ptr, d_grad.ptr, with_param ? d_param.ptr : (Tp*)nullptr, n, s,
                       full_offset);
        });
        print_bw_vs_copy("adamw " + tag, ms, bytes, copy, 0.85);
    }
}

// pieces: (offset, numel) in one flat buffer of states, gradients and compute
// copies (as at stage 0); piece i decays unless i % 3 == 2; its key offset + 77.
template <typename T>
void test_adamw_pieces(Bench& b, const char* name, const std::vector<std::pair<size_t, size_t>>& pieces, bool timed) {
    size_t total = 0;
    for (const auto& p : pieces) total = std::max(total, p.first + p.second);
    std::string tag = shape_str("[%s] %s: %zu pieces, %zu elements", tname<T>(), name, pieces.size(), total);
    BenchCtx bc(1, 8);
    const KernelCtx& ctx = bc;
    std::vector<float> master = rand_vec<float>(total, 61, -0.2f, 0.2f), m = rand_vec<float>(total, 62, -1e-3f, 1e-3f),
                       v = rand_vec<float>(total, 63, 1e-8f, 1e-5f);
    std::vector<T> grad = rand_vec<T>(total, 64, -0.01f, 0.01f);
    const AdamWStep s = make_step(7);
    DevBuf<float> d_master(master), d_m(m), d_v(v), e_master(master), e_m(m), e_v(v);
    DevBuf<T> d_grad(grad), d_param(total), e_param(total);
    std::vector<OptPiece<T>> table;
    for (size_t i = 0; i < pieces.size(); i++)
        table.push_back({d_grad.ptr + pieces[i].first, d_param.ptr + pieces[i].first, pieces[i].first, pieces[i].second,
                         pieces[i].first + 77, i % 3 != 2, 0, 0});
    const unsigned blocks = lay_out_pieces_cuda(table, false, d_master.ptr, d_m.ptr, d_v.ptr);
    DevBuf<OptPiece<T>> d_table(table);
    adamw_pieces_cuda(ctx, d_table.ptr, (int)table.size(), blocks, d_master.ptr, d_m.ptr, d_v.ptr, s);
    // piece by piece, as the engine's default path does it
    std::vector<float> rm = master, rmm = m, rv = v;
    std::vector<T> rp(total);
    for (size_t i = 0; i < pieces.size(); i++) {
        AdamWStep si = s;
        if (i % 3 == 2) si.weight_decay = 0.0f;
        const size_t o = pieces[i].first, n = pieces[i].second;
        adamw_cuda(ctx, e_master.ptr + o, e_m.ptr + o, e_v.ptr + o, d_grad.ptr + o, e_param.ptr + o, n, si, o + 77);
        adamw_cpu(rm.data() + o, rmm.data() + o, rv.data() + o, grad.data() + o, rp.data() + o, n, si, o + 77);
    }
    std::vector<float> gm = d_master.download();
    check_exact(b, "adamw_pieces master = adamw piece by piece " + tag, gm, e_master.download());
    check_exact(b, "adamw_pieces m = adamw piece by piece " + tag, d_m.download(), e_m.download());
    check_exact(b, "adamw_pieces v = adamw piece by piece " + tag, d_v.download(), e_v.download());
    std::vector<T> gp = d_param.download();
    check_exact(b, "adamw_pieces param = adamw piece by piece " + tag, gp, e_param.download());
    if (ADAMW_EXACT) check_exact(b, "adamw_pieces master = CPU twin " + tag, gm, rm);
    else check_close(b, "adamw_pieces master ~ CPU twin " + tag, gm, rm, 1e-6);
    // the elements no piece covers are untouched
    bool gaps_kept = true;
    std::vector<bool> covered(total, false);
    for (const auto& p : pieces)
        for (size_t i = p.first; i < p.first + p.second; i++) covered[i] = true;
    for (size_t i = 0; i < total; i++)
        if (!covered[i] && memcmp(&gm[i], &master[i], 4) != 0) gaps_kept = false;
    b.record(gaps_kept, "adamw_pieces leaves the gaps between pieces alone " + tag, "");

    if (timed && !b.check_only) {
        double bytes = (double)total * (24 + 2 * sizeof(T));
        double copy = b.copy_gbps(ctx.stream, (size_t)(bytes / 2));
        double one = b.time_ms(ctx.stream, [&] {
            adamw_pieces_cuda(ctx, d_table.ptr, (int)table.size(), blocks, d_master.ptr, d_m.ptr, d_v.ptr, s);
        });
        double each = b.time_ms(ctx.stream, [&] {
            for (size_t i = 0; i < pieces.size(); i++) {
                const size_t o = pieces[i].first;
                adamw_cuda(ctx, e_master.ptr + o, e_m.ptr + o, e_v.ptr + o, d_grad.ptr + o, e_param.ptr + o,
                           pieces[i].second, s, o + 77);
            }
        });
        print_bw_vs_copy("adamw_pieces, one launch " + tag, one, bytes, copy, 0.85);
        print_bw_vs_copy("adamw, a launch per piece " + tag, each, bytes, copy, 0.85);
    }
}

// GPT-2 124M's tensors as pieces of one rank at stage 0 (offsets of its flat buffer)
inline std::vector<std::pair<size_t, size_t>> gpt2_pieces() {
    ParamLayout layout(GPT2Config{}, 1);  // (the defaults are d12)
    ShardPlan plan(layout.unit_specs(), 1, SHARD_ALIGN);
    std::vector<std::pair<size_t, size_t>> out;
    for (const ShardPiece& p : plan.pieces_full()) out.push_back({p.full_offset, p.numel});
    return out;
}
// odd lengths, an empty piece, pieces starting off the 16-byte grid (scalar path)
inline std::vector<std::pair<size_t, size_t>> ragged_pieces() {
    return {{0, 100003}, {100016, 0}, {100016, 5}, {100021, 40000}, {140032, 8192}, {148224, 8193}, {156417, 3},
            {156432, 1}, {160000, 300001}};
}

int main(int argc, char** argv) {
    Bench b(argc, argv);
    printf("%s\n", ADAMW_EXACT ? "exact build (-fmad=false): bit-for-bit checks" : "normal build");
    const size_t big = 124475904;  // ~ GPT-2 124M parameters
    const bool timed = !ADAMW_EXACT;
    const size_t n1 = b.check_only ? ((size_t)1 << 22) : big;
    test_adamw<float, float>(b, n1, 0, true, timed);
    test_adamw<bf16, bf16>(b, n1, 0, true, timed);
    test_adamw<float, bf16>(b, n1, 0, true, timed);
    test_adamw<f16, f16>(b, n1, 0, true, false);
    test_adamw<float, f16>(b, n1, 0, true, false);
    test_adamw<bf16, bf16>(b, n1, 0, false, timed);
    // odd length, and unaligned pointers (scalar kernel)
    for (size_t off : {0, 1}) {
        test_adamw<float, float>(b, 100003, off, true, false);
        test_adamw<bf16, bf16>(b, 100003, off, true, false);
        test_adamw<float, bf16>(b, 100003, off, true, false);
        test_adamw<f16, f16>(b, 100003, off, true, false);
    }
    // ZERO_VARIANTS=fused_optimizer: every piece in one launch
    test_adamw_pieces<bf16>(b, "GPT-2 124M", gpt2_pieces(), timed);
    test_adamw_pieces<float>(b, "GPT-2 124M", gpt2_pieces(), false);
    test_adamw_pieces<bf16>(b, "ragged", ragged_pieces(), false);
    test_adamw_pieces<float>(b, "ragged", ragged_pieces(), false);
    test_adamw_pieces<f16>(b, "ragged", ragged_pieces(), false);
    return b.finish();
}
