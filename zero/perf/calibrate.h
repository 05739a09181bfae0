// Calibration: `--calibrate FILE` with a run's flags times, on this build's
// device, every operation that run's steps execute (zero/perf/step_ops.h),
// each alone, and merges the times into the measured profile FILE
// (zero/perf/profile.h). Nothing here looks at a training step's time: a
// kernel is timed by itself, on buffers of its shape filled with random
// values, while as many ranks run it at once as the run would have sharing the
// device (min(ranks, R), each with the run's threads per rank: the CPU's
// cores divided among them); a collective in an emulated world of the run's
// size and groups. Each time is the fastest of five batches of calls, each
// about 20 ms long.
//
// Shapes already in FILE are not timed again, so one file can gather many
// runs' shapes (make reproduce's validation runs calibrate into one).
#pragma once

#include <algorithm>
#include <functional>
#include <thread>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/adamw_simd.h"
#include "kernels/kernels.h"
#include "zero/comm/comm_emulated.h"
#include "zero/base/rng.h"
#include "zero/perf/op_time.h"
#include "zero/perf/peak_flops.h"
#include "zero/perf/profile.h"
#include "zero/perf/step_ops.h"

namespace calibrate_detail {

inline void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(std::max(1, n));
#endif
    (void)n;
}

// Seconds per call of fn: the fastest of five batches of calls, each about 20 ms
// long (another process on the machine only ever makes a batch slower).
template <typename Fn, typename Sync>
double time_calls(Fn fn, Sync sync) {
    fn(), sync();  // warm: first touch of the buffers, library set-up
    HostClock once;
    fn(), sync();
    int reps = (int)std::min(1000.0, std::max(1.0, 0.02 / std::max(once.seconds(), 1e-7)));
    double best = 1e30;
    for (int b = 0; b < 5; b++) {
        HostClock c;
        for (int i = 0; i < reps; i++) fn();
        sync();
        best = std::min(best, c.seconds() / reps);
    }
    return best;
}

// Device (and host) buffers for one op, random-filled, freed at the end.
template <typename T>
struct Buffers {
    std::vector<void*> dev, host;
    Stream stream;
    explicit Buffers(Stream s) : stream(s) {}
    ~Buffers() {
        for (void* p : dev) device_free(p);
        for (void* p : host) host_free(p);
    }
    template <typename U>
    static U value(uint64_t stream, size_t i, float scale) {
        if constexpr (std::is_same<U, char>::value) return (char)i;
        else return from_float<U>(scale * (2 * random_uniform(stream, i) - 1));
    }
    template <typename U>
    U* d(size_t n, float scale = 1.0f) {
        std::vector<U> h(std::max<size_t>(n, 1));
        for (size_t i = 0; i < h.size(); i++) h[i] = value<U>(dev.size() + 7, i, scale);
        // each buffer starts at another offset from a page: equal offsets make the streams of a kernel with
        // many arrays (AdamW: five) collide in the caches and run at a third of their speed, now and then
        size_t shift = (dev.size() % 16) * 1088;
        char* p = (char*)device_malloc(h.size() * sizeof(U) + shift);
        dev.push_back(p);
        p += shift;
        device_copy(p, h.data(), h.size() * sizeof(U), stream);
        stream_sync(stream);
        return (U*)p;
    }
    template <typename U>
    U* h(size_t n) {
        U* p = (U*)host_malloc(std::max<size_t>(n, 1) * sizeof(U));
        for (size_t i = 0; i < n; i++) p[i] = value<U>(host.size() + 99, i, 1.0f);
        host.push_back(p);
        return p;
    }
    int* tokens(size_t n, long V) {
        std::vector<int> t(n);
        for (size_t i = 0; i < n; i++) t[i] = (int)(random_uniform(3, i) * V) % (int)V;
        int* p = (int*)device_malloc(n * sizeof(int));
        device_copy(p, t.data(), n * sizeof(int), stream);
        stream_sync(stream);
        dev.push_back(p);
        return p;
    }
};

// One call of op, prepared: the buffers exist, the returned function runs it.
template <typename T>
std::function<void()> prepare(const StepOp& op, Buffers<T>& b, const KernelCtx& ctx, CpuAdamW* cpu_adam,
                              std::vector<int>& host_tokens) {
    std::string kind = base_kind(op.kind);
    const std::vector<long>& d = op.dims;
    AdamWStep st{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.1f, 0.05f, 7};
    if (kind.rfind("matmul_fwd", 0) == 0) {
        int M = (int)d[0], K = (int)d[1], N = (int)d[2];
        T *out = b.template d<T>((size_t)M * N), *inp = b.template d<T>((size_t)M * K), *w = b.template d<T>((size_t)N * K, 0.05f);
        T* bias = d[3] ? b.template d<T>(N) : nullptr;
        T* pre = kind == "matmul_fwd_gelu" ? b.template d<T>((size_t)M * N) : nullptr;
        return [=] { matmul_forward(ctx, out, inp, w, (const T*)bias, M, K, N, pre); };
    }
    if (kind.rfind("matmul_bwd", 0) == 0) {
        int M = (int)d[0], K = (int)d[1], N = (int)d[2];
        T *dinp = b.template d<T>((size_t)M * K), *dw = b.template d<T>((size_t)N * K), *dout = b.template d<T>((size_t)M * N);
        T *inp = b.template d<T>((size_t)M * K), *w = b.template d<T>((size_t)N * K, 0.05f);
        T* db = d[3] ? b.template d<T>(N) : nullptr;
        T* pre = kind == "matmul_bwd_gelu" ? b.template d<T>((size_t)M * K) : nullptr;
        return [=] { matmul_backward(ctx, dinp, dw, db, dout, inp, w, M, K, N, (const T*)pre); };
    }
    if (kind == "attention_fwd" || kind == "attention_bwd") {
        int B = (int)d[0], Tt = (int)d[1], C = (int)d[2], NH = (int)d[3];
        T *qkv = b.template d<T>((size_t)B * Tt * 3 * C), *out = b.template d<T>((size_t)B * Tt * C);
        float* lse = b.template d<float>((size_t)B * NH * Tt);
        attention_forward(ctx, out, lse, qkv, B, Tt, C, NH);
        if (kind == "attention_fwd") return [=] { attention_forward(ctx, out, lse, qkv, B, Tt, C, NH); };
        T *dqkv = b.template d<T>((size_t)B * Tt * 3 * C), *dout = b.template d<T>((size_t)B * Tt * C);
        return [=] { attention_backward(ctx, dqkv, dout, qkv, out, lse, B, Tt, C, NH); };
    }
    if (kind == "layernorm_fwd" || kind == "residual_layernorm_fwd" || kind == "layernorm_bwd") {
        int N = (int)d[0], C = (int)d[1];
        T *out = b.template d<T>((size_t)N * C), *inp = b.template d<T>((size_t)N * C), *inp2 = b.template d<T>((size_t)N * C);
        T *w = b.template d<T>(C), *bias = b.template d<T>(C);
        float *mean = b.template d<float>(N), *rstd = b.template d<float>(N);
        layernorm_forward(ctx, out, mean, rstd, inp, w, bias, N, C);
        if (kind == "layernorm_fwd") return [=] { layernorm_forward(ctx, out, mean, rstd, inp, w, bias, N, C); };
        if (kind == "residual_layernorm_fwd")
            return [=] { residual_layernorm_forward(ctx, inp2, out, mean, rstd, inp, inp, w, bias, N, C); };
        T *dinp = b.template d<T>((size_t)N * C), *dw = b.template d<T>(C), *db = b.template d<T>(C);
        return [=] { layernorm_backward(ctx, dinp, dw, db, out, inp, w, mean, rstd, N, C); };
    }
    if (kind == "residual_fwd" || kind == "gelu_fwd" || kind == "accumulate" || kind == "sumsq") {
        size_t n = (size_t)d[0];
        T *x = b.template d<T>(n), *y = b.template d<T>(n), *z = b.template d<T>(n);
        float* out = b.template d<float>(1);
        if (kind == "residual_fwd") return [=] { residual_forward(ctx, z, x, y, n); };
        if (kind == "gelu_fwd") return [=] { gelu_forward(ctx, z, x, n); };
        if (kind == "accumulate") return [=] { accumulate(ctx, z, x, n, false); };
        return [=] { sumsq(ctx, out, x, n); };
    }
    if (kind == "loss_sum") {
        float *x = b.template d<float>(d[0]), *y = b.template d<float>(d[0]);
        return [=] { accumulate(ctx, y, (const float*)x, (size_t)d[0], false); };
    }
    if (kind == "encoder_fwd" || kind == "encoder_bwd" || kind == "encoder_fwd_vocab" || kind == "encoder_bwd_vocab") {
        int B = (int)d[0], Tt = (int)d[1], C = (int)d[2];
        long V = d[3];
        T *out = b.template d<T>((size_t)B * Tt * C), *wte = b.template d<T>((size_t)V * C), *wpe = b.template d<T>((size_t)Tt * C);
        int* tok = b.tokens((size_t)B * Tt, V);
        host_tokens.resize((size_t)B * Tt);
        for (size_t i = 0; i < host_tokens.size(); i++) host_tokens[i] = (int)(random_uniform(3, i) * V) % (int)V;
        const int* th = host_tokens.data();
        if (kind == "encoder_fwd") return [=] { encoder_forward(ctx, out, tok, wte, wpe, B, Tt, C); };
        if (kind == "encoder_bwd") return [=] { encoder_backward(ctx, wte, wpe, out, tok, th, B, Tt, C); };
        if (kind == "encoder_fwd_vocab")
            return [=] { encoder_forward_vocab(ctx, out, tok, wte, wpe, B, Tt, C, 0, (int)V, true); };
        return [=] { encoder_backward_vocab(ctx, wte, wpe, out, th, B, Tt, C, 0, (int)V); };
    }
    if (kind == "classifier" || kind == "vocab_local_stats" || kind == "vocab_sum_exp" || kind == "vocab_finish") {
        int BT = (int)d[0], V = (int)d[1];
        T* logits = b.template d<T>((size_t)BT * V);
        float *losses = b.template d<float>(BT), *f1 = b.template d<float>(BT), *f2 = b.template d<float>(BT);
        float* gathered = b.template d<float>((size_t)BT * (d.size() > 2 ? d[2] : 1));
        int* targets = b.tokens(BT, V);
        int t = d.size() > 2 ? (int)d[2] : 1;
        if (kind == "classifier") return [=] { fused_classifier(ctx, logits, losses, targets, BT, V, V, 1e-3f); };
        if (kind == "vocab_local_stats")
            return [=] { vocab_parallel_local_stats(ctx, f1, f2, logits, targets, BT, V, 0, V); };
        if (kind == "vocab_sum_exp")
            return [=] { vocab_parallel_sum_exp(ctx, f1, f2, gathered, logits, t, BT, V, 0, V); };
        return [=] { vocab_parallel_finish(ctx, logits, losses, targets, f1, f2, f2, BT, V, 0, V, 1e-3f); };
    }
    if (kind == "adamw") {
        size_t n = (size_t)d[0];
        float *w = b.template d<float>(n), *m = b.template d<float>(n), *v = b.template d<float>(n, 0.01f);
        T *g = b.template d<T>(n), *p = b.template d<T>(n);
        return [=] { adamw(ctx, w, m, v, (const T*)g, p, n, st, 0); };
    }
    if (kind == "zero" || kind == "copy" || kind == "recv" || kind == "upload_tokens" || kind == "to_host" ||
        kind == "to_device") {
        size_t bytes = (size_t)d[0] * (kind == "upload_tokens" ? sizeof(int) : 1);
        char* dev = b.template d<char>(bytes);
        bool on_device = kind == "copy" || kind == "recv";  // a receive copies from its peer's buffer
        char* other = on_device ? b.template d<char>(bytes) : b.template h<char>(bytes);
        Stream s = ctx.stream;
        if (kind == "zero") return [=] { device_zero(dev, bytes, s); };
        if (kind == "to_host") return [=] { device_copy(other, dev, bytes, s); };
        return [=] { device_copy(dev, other, bytes, s); };  // copy, recv, upload_tokens, to_device
    }
    if (kind == "cpu_adamw") {
        size_t n = (size_t)d[0];
        float *w = b.template h<float>(n), *m = b.template h<float>(n), *v = b.template h<float>(n);
        for (size_t i = 0; i < n; i++) v[i] = std::fabs(v[i]);
        T *g = b.template h<T>(n), *p = b.template h<T>(n);
        return [=] { cpu_adam->step(w, m, v, (const T*)g, p, n, st, 0); };
    }
    if (kind == "host_add" || kind == "host_sumsq") {
        size_t n = (size_t)d[0];
        T *x = b.template h<T>(n), *y = b.template h<T>(n);
        if (kind == "host_add") return [=] { accumulate_cpu(y, (const T*)x, n, false); };
        return [=] { volatile double r = sumsq_cpu((const T*)x, n); (void)r; };
    }
    fail("internal: calibration cannot time %s", op.kind.c_str());
}

// Every op key of `ops` timed while `ranks` threads run it at once, each with `threads` threads.
// Each rank's kernel context is the run's own (the scratch of q's micro-batch, width and heads).
template <typename T>
void time_kernels(const std::vector<StepOp>& ops, const MemoryQuery& q, int ranks, int threads,
                  std::map<std::string, double>& out) {
    ThreadBarrier barrier(ranks);
    std::vector<std::vector<double>> seconds(ranks, std::vector<double>(ops.size()));
    std::vector<std::thread> pool;
    for (int r = 0; r < ranks; r++)
        pool.emplace_back([&, r] {
            set_threads(threads);
            MemoryAccountant mem(r);
            KernelCtx ctx =
                create_kernel_ctx(mem, (size_t)q.micro_batch * q.seq_len, q.cfg.channels, q.cfg.num_heads);
            std::unique_ptr<CpuAdamW> cpu_adam;
            std::vector<int> host_tokens;
            for (size_t i = 0; i < ops.size(); i++) {
                if (base_kind(ops[i].kind) == "cpu_adamw" && !cpu_adam) cpu_adam = std::make_unique<CpuAdamW>(threads);
                Buffers<T> b(ctx.stream);
                std::function<void()> fn = prepare<T>(ops[i], b, ctx, cpu_adam.get(), host_tokens);
                barrier.wait();  // all ranks time the same op at once
                seconds[r][i] = time_calls(fn, [&] { stream_sync(ctx.stream); });
                barrier.wait();
            }
            destroy_kernel_ctx(ctx);
        });
    for (auto& t : pool) t.join();
    for (size_t i = 0; i < ops.size(); i++) {
        double sum = 0;
        for (int r = 0; r < ranks; r++) sum += seconds[r][i];
        out[ops[i].key()] = sum / ranks;
    }
}

// Each (op, bytes) in an emulated world of `world` ranks split into groups of `group` adjacent ranks.
template <typename T>
void time_collectives(const std::vector<std::pair<std::string, uint64_t>>& calls, int world, int group, int threads,
                      std::map<std::string, double>& out) {
    std::vector<double> seconds(calls.size());
    run_emulated_ranks(world, [&](int rank, EmulatedWorld& w) {
        set_threads(threads);
        KernelCtx ctx;
        ctx.stream = stream_create();
        EmulatedComm comm(w, rank, ctx);
        std::unique_ptr<Comm> g = comm.split(rank / group, rank % group);
        uint64_t most = 8;
        for (const auto& c : calls) most = std::max(most, c.second);
        char* buf = (char*)device_malloc(most);
        char* other = (char*)device_malloc(most);
        device_zero(buf, most, ctx.stream), device_zero(other, most, ctx.stream);
        for (size_t i = 0; i < calls.size(); i++) {
            const std::string& op = calls[i].first;
            size_t count = calls[i].second / sizeof(T), part = count / g->world;
            DType dt = dtype_of<T>::value;
            auto fn = [&] {
                if (op == "all_reduce") g->all_reduce_sum(buf, count, dt, ctx.stream);
                else if (op == "reduce_scatter") g->reduce_scatter_sum(buf, other, part, dt, ctx.stream);
                else if (op == "all_gather") g->all_gather(other, buf, part, dt, ctx.stream);
                else g->sum_scalar(1.0);
            };
            // every rank makes the same number of calls: rank 0's first timing decides it for all
            fn(), stream_sync(ctx.stream);
            HostClock once;
            fn(), stream_sync(ctx.stream);
            double t1 = comm.max_scalar(once.seconds());
            int reps = (int)std::min(1000.0, std::max(1.0, 0.02 / std::max(t1, 1e-7)));
            double best = 1e30;
            for (int b = 0; b < 5; b++) {
                comm.barrier();
                HostClock c;
                for (int k = 0; k < reps; k++) fn();
                stream_sync(ctx.stream);
                best = std::min(best, comm.max_scalar(c.seconds()) / reps);
            }
            if (rank == 0) seconds[i] = best;
        }
        device_free(buf), device_free(other);
        stream_destroy(ctx.stream);
    });
    for (size_t i = 0; i < calls.size(); i++) out[calls[i].first + " " + std::to_string(calls[i].second)] = seconds[i];
}

}  // namespace calibrate_detail

// Times what `q`'s steps run with `world` emulated ranks in this process (the
// CPU's `cores` shared among them) and merges it into the profile at `path`.
template <typename T>
void calibrate_profile(const std::string& path, const MemoryQuery& q, int world, int cores, const std::string& device,
                       const char* dtype, std::FILE* log) {
    using namespace calibrate_detail;
    Profile p;
    if (file_exists(path)) p = load_profile(path);
    CHECK(p.path.empty() || p.measured, "%s is a profile from specifications: calibrate into another file",
          path.c_str());
    CHECK(p.path.empty() || p.dtype == dtype, "%s was calibrated in %s, this run computes in %s", path.c_str(),
          p.dtype.c_str(), dtype);
#ifdef ZERO_CUDA
    const int most = 8;  // emulated ranks on one GPU: timed with up to 8 at once
    p.synchronous = false, p.name = "gpu";
#else
    const int most = cores;
    p.synchronous = true, p.name = "cpu";
#endif
    p.measured = true, p.device = device, p.dtype = dtype, p.cores = cores;
    p.about = "measured by --calibrate on this machine";
    HostClock clock;
    int ranks = std::min(world, most), threads = std::max(1, cores / world);
    std::string ctx = "r" + std::to_string(ranks);
    std::vector<StepOp> todo;
    std::map<int, std::vector<std::pair<std::string, uint64_t>>> calls;  // group size -> (op, bytes)
    for (int stage = 0; stage < q.pp(); stage++)
        for (const StepOp& op : step_schedule(q.at_stage(stage), 1).ops) {
            if (op.kind == "host_wait" || op.kind == "send") continue;
            if (op.collective()) {
                auto& c = calls[group_size(op.group, q)];
                std::pair<std::string, uint64_t> call{op.kind, op.bytes};
                if (std::find(c.begin(), c.end(), call) == c.end()) c.push_back(call);
                continue;
            }
            bool seen = p.kernels[ctx].count(op.key()) > 0;
            for (const StepOp& t : todo) seen = seen || t.key() == op.key();
            if (!seen) todo.push_back(op);
        }
    time_kernels<T>(todo, q, ranks, threads, p.kernels[ctx]);
    int timed = (int)todo.size();
    for (const auto& g : calls) {
        std::string cctx = "N" + std::to_string(world) + "g" + std::to_string(g.first);
        std::vector<std::pair<std::string, uint64_t>> fresh;
        for (const auto& c : g.second)
            if (!p.collectives[cctx].count(c.first + " " + std::to_string(c.second))) fresh.push_back(c);
        if (!fresh.empty()) time_collectives<T>(fresh, world, g.first, threads, p.collectives[cctx]);
        timed += (int)fresh.size();
    }
    // the peak and the copy bandwidth the efficiencies are taken against (one rank, every core)
    if (p.peak_tflops == 0) {
        set_threads(cores);
        MemoryAccountant mem(0);
        KernelCtx kctx = create_kernel_ctx(mem, 1, 64, 1);
#ifdef ZERO_CUDA
        p.peak_tflops = measure_matmul_peak_flops<T>(kctx, 8192) / 1e12;
#else
        p.peak_tflops = measure_matmul_peak_flops<T>(kctx, 1024) / 1e12;
#endif
        size_t bytes = 256u << 20;
        Buffers<T> b(kctx.stream);
        char *x = b.template d<char>(bytes), *y = b.template d<char>(bytes);
        p.hbm_gbs = 2.0 * bytes / time_calls([&] { device_copy(y, x, bytes, kctx.stream); },
                                             [&] { stream_sync(kctx.stream); }) / 1e9;
        destroy_kernel_ctx(kctx);
    }
    save_profile(p, path);
    fprintf(log, "calibrated %d operations (%d ranks at once, %d thread(s) each) in %.1f s into %s\n", timed, ranks,
            threads, clock.seconds(), path.c_str());
}
