// Causal self-attention through cuDNN's fused flash attention (--attention
// cudnn), with the semantics of kernels/attention.cuh: qkv (B, T, 3C) in; out
// (B, T, C) and lse (B, NH, T), the natural log-sum-exp of each row's scaled
// causal scores, out; the backward overwrites dqkv. bf16 and fp16 only. Built
// where dev/find_cudnn.sh finds cuDNN (the Makefile then defines ZERO_CUDNN).
//
// Written against cuDNN's backend API (cudnn_graph.h) rather than its C++
// frontend: cuDNN itself is then all it needs, and the graphs below are the
// operations the frontend would build for this case, one by one, for a reader
// to follow. cuDNN recognises the graph as attention and runs it as one
// fused kernel (its runtime-fusion engines); the heads are read in place from
// qkv through strides, so nothing is permuted. The graphs, with S the (T, T)
// scores of one head, never stored:
//
//   forward:   S = Q K^T * scale;  S = causal(S);  M = rowmax(S);  E = exp(S - M);
//              Z = rowsum(E);  lse = M + log(Z);  out = (E / Z) V
//   backward:  D = rowsum(dO * out);  P = exp(causal(Q K^T * scale - lse));
//              dV = P^T dO;  dS = P * (dO V^T - D) * scale;  dK = dS^T Q;  dQ = dS K
//
// causal(S) puts -inf where a key comes after its query. The backward writes
// dQ from dS directly rather than into an fp32 accumulator: the form cuDNN
// runs through a dP workspace in a fixed order, so that runs are bit-identical
// (cuDNN's frontend builds the same when asked for its deterministic
// algorithm). D (B*NH*T floats) and cuDNN's own workspace are the front of
// ctx.workspace, sized by attention_cudnn_workspace_bytes below; a plan that
// asks for more stops the run with both numbers.
#pragma once

#include "zero/base/common.h"

// The kernel workspace cuDNN's attention takes on micro-batches of B sequences
// of T: D's B*NH*T floats, then cuDNN's own workspace, whose size only its plan
// knows: its deterministic backward keeps dP, 2 bytes a score over 64-row
// tiles (the size cuDNN's frontend states for that form), and 64 MiB is left
// for the rest. (Arithmetic only: a dry run without cuDNN sizes it too.)
// D's bytes, at the front: cuDNN's own workspace starts after them.
inline size_t attention_cudnn_row_dot_bytes(size_t B, size_t T, int num_heads) {
    return round_up(B * (size_t)num_heads * T * sizeof(float), 256);
}
inline size_t attention_cudnn_workspace_bytes(size_t B, size_t T, int num_heads) {
    const size_t T64 = round_up(T, 64), heads = B * (size_t)num_heads;
    return attention_cudnn_row_dot_bytes(B, T, num_heads) + heads * T64 * T64 * 2 + ((size_t)64 << 20);
}

#ifdef ZERO_CUDNN

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include <cudnn.h>

#include "zero/base/backend.h"
#include "zero/base/dtype.h"

namespace cudnn_attn {

inline void check(cudnnStatus_t status, const char* what) {
    if (status == CUDNN_STATUS_SUCCESS) return;
    char detail[512] = "";
    cudnnGetLastErrorString(detail, sizeof(detail));
    fail("cuDNN attention: %s: %s%s%s%s", what, cudnnGetErrorString(status), detail[0] ? ": " : "", detail,
         status == CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED ? " (put cuDNN's library folder on LD_LIBRARY_PATH)" : "");
}

// One backend descriptor: attributes set, then finalized; destroyed with its owner.
struct Desc {
    cudnnBackendDescriptor_t d = nullptr;
    explicit Desc(cudnnBackendDescriptorType_t type) { check(cudnnBackendCreateDescriptor(type, &d), "create"); }
    ~Desc() { cudnnBackendDestroyDescriptor(d); }
    Desc(const Desc&) = delete;
    Desc& operator=(const Desc&) = delete;
    template <typename V>  // n values
    Desc& set_n(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const V* values, int64_t n) {
        check(cudnnBackendSetAttribute(d, name, type, n, values), "set attribute");
        return *this;
    }
    template <typename V>  // one value
    Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, V value) {
        return set_n(name, type, &value, 1);
    }
    Desc& finalize() {
        check(cudnnBackendFinalize(d), "finalize");
        return *this;
    }
};

using Dims = std::array<int64_t, 4>;
inline Dims packed(Dims d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }
inline Dims transposed(Dims s) { return {s[0], s[1], s[3], s[2]}; }  // the last two axes swapped

// The graph's tensors that live in memory (or, by value, on the host): their ids.
enum Uid : int64_t { kQ = 1, kK, kV, kOut, kLse, kDout, kDq, kDk, kDv, kScale, kNegInf, kOne, kRowDot };

// A graph being built, then its execution plan: every descriptor it made is
// kept, for the plan to refer to.
struct Plan {
    cudnnHandle_t handle;
    std::vector<std::unique_ptr<Desc>> descs;
    std::vector<cudnnBackendDescriptor_t> ops;
    int64_t next_virtual = 1000;
    cudnnBackendDescriptor_t plan = nullptr;
    int64_t workspace = 0;  // bytes the plan needs

    cudnnBackendDescriptor_t keep(std::unique_ptr<Desc> d) {
        descs.push_back(std::move(d));
        return descs.back()->d;
    }
    // A tensor of memory (uid given), a by-value scalar, or a virtual one (uid 0: never stored)
    cudnnBackendDescriptor_t tensor(cudnnDataType_t type, Dims dims, Dims strides, int64_t uid = 0,
                                    bool by_value = false) {
        auto t = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const bool is_virtual = uid == 0;
        t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, type)
            .set_n(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
            .set_n(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
            .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, is_virtual ? next_virtual++ : uid)
            .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, (int64_t)16)
            .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, is_virtual)
            .set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, by_value)
            .finalize();
        return keep(std::move(t));
    }
    cudnnBackendDescriptor_t temp(cudnnDataType_t type, Dims dims) { return tensor(type, dims, packed(dims)); }
    cudnnBackendDescriptor_t scalar(int64_t uid) { return tensor(CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, uid, true); }
    cudnnBackendDescriptor_t op(std::unique_ptr<Desc> o) {
        o->finalize();
        ops.push_back(keep(std::move(o)));
        return ops.back();
    }

    // y = mode(x[, b[, t]]) element by element (b and t broadcast); axis: GEN_INDEX's
    cudnnBackendDescriptor_t pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t y,
                                       cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b = nullptr,
                                       cudnnBackendDescriptor_t t = nullptr, cudnnDataType_t math = CUDNN_DATA_FLOAT,
                                       int64_t axis = -1) {
        auto pw = std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode)
            .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, math);
        if (axis >= 0) pw->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
        pw->finalize();
        cudnnBackendDescriptor_t pwd = keep(std::move(pw));
        auto o = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        o->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, pwd)
            .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x)
            .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y);
        if (b) o->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b);
        if (t) o->set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, t);
        op(std::move(o));
        return y;
    }
    // y (.., .., T, 1) = the rows of x reduced (max or sum)
    cudnnBackendDescriptor_t reduce(cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t x) {
        auto r = std::make_unique<Desc>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
        r->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, how)
            .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT)
            .finalize();
        cudnnBackendDescriptor_t rd = keep(std::move(r));
        auto o = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
        o->set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x)
            .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y)
            .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, rd);
        op(std::move(o));
        return y;
    }
    // c = a b, batched over the first two axes, fp32 accumulation
    cudnnBackendDescriptor_t matmul(cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b) {
        auto m = std::make_unique<Desc>(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
        m->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT).finalize();
        cudnnBackendDescriptor_t md = keep(std::move(m));
        auto o = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
        o->set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, a)
            .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b)
            .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, c)
            .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, md);
        op(std::move(o));
        return c;
    }
    // y: x seen through y's dimensions and strides (a transpose here)
    cudnnBackendDescriptor_t view(cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t x) {
        auto o = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        o->set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x)
            .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y);
        op(std::move(o));
        return y;
    }
    // s (B, NH, T, T) with -inf where the column (key) is past the row (query)
    cudnnBackendDescriptor_t causal(cudnnBackendDescriptor_t s, Dims dims, cudnnBackendDescriptor_t neg_inf) {
        auto row = pointwise(CUDNN_POINTWISE_GEN_INDEX, temp(CUDNN_DATA_INT32, dims), s, nullptr, nullptr,
                             CUDNN_DATA_FLOAT, 2);
        auto col = pointwise(CUDNN_POINTWISE_GEN_INDEX, temp(CUDNN_DATA_INT32, dims), s, nullptr, nullptr,
                             CUDNN_DATA_FLOAT, 3);
        auto keep_it = pointwise(CUDNN_POINTWISE_CMP_GE, temp(CUDNN_DATA_BOOLEAN, dims), row, col, nullptr,
                                 CUDNN_DATA_BOOLEAN);
        return pointwise(CUDNN_POINTWISE_BINARY_SELECT, temp(CUDNN_DATA_FLOAT, dims), s, neg_inf, keep_it);
    }

    // The operation graph, cuDNN's heuristics' engine configurations in their
    // order, and the first that makes a plan (all kept while the plan lives).
    // The operations as one finalized graph (cuDNN checks that its tensors join up; without a handle no device
    // is needed, which test_cudnn_graphs uses).
    Desc& operation_graph() {
        Desc& graph = *descs.emplace_back(std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
        graph.set_n(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), (int64_t)ops.size());
        if (handle) graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle);
        return graph.finalize();
    }
    void build() {
        Desc& graph = operation_graph();
        Desc& heur = *descs.emplace_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
        heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, graph.d)
            .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, CUDNN_HEUR_MODE_A)
            .finalize();
        int64_t n = 0;
        check(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n,
                                       nullptr),
              "count the engine configurations");
        std::vector<cudnnBackendDescriptor_t> configs;
        for (int64_t i = 0; i < n; i++) configs.push_back(keep(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)));
        check(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &n,
                                       configs.data()),
              "the engine configurations");
        for (int64_t i = 0; i < n; i++) {
            auto p = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
            p->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle)
                .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, configs[i]);
            if (cudnnBackendFinalize(p->d) != CUDNN_STATUS_SUCCESS) continue;  // this engine cannot run it
            int64_t got = 0;
            check(cudnnBackendGetAttribute(p->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                           &workspace),
                  "the plan's workspace");
            plan = keep(std::move(p));
            return;
        }
        char detail[512] = "";
        cudnnGetLastErrorString(detail, sizeof(detail));
        fail("cuDNN attention: no engine of cuDNN %zu runs the graph (%lld configurations tried)%s%s", cudnnGetVersion(),
             (long long)n, detail[0] ? ": " : "", detail);
    }
    void execute(const std::vector<std::pair<int64_t, const void*>>& tensors, void* ws) const {
        std::vector<int64_t> uids;
        std::vector<void*> ptrs;
        for (auto& [uid, p] : tensors) uids.push_back(uid), ptrs.push_back(const_cast<void*>(p));
        Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
        pack.set_n(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), (int64_t)uids.size())
            .set_n(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(), (int64_t)ptrs.size())
            .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, ws)
            .finalize();
        check(cudnnBackendExecute(handle, plan, pack.d), "execute");
    }
};

// The tensors' layouts, as (B, NH, T, hs) views: q, k, v read in place from
// qkv (B, T, 3, NH, hs), out and dout (B, T, NH, hs), lse (B, NH, T, 1).
struct Shape {
    int64_t B, NH, T, hs;
    Dims heads() const { return {B, NH, T, hs}; }
    Dims scores() const { return {B, NH, T, T}; }
    Dims rows() const { return {B, NH, T, 1}; }
    Dims qkv_strides() const { return {T * 3 * NH * hs, hs, 3 * NH * hs, 1}; }
    Dims out_strides() const { return {T * NH * hs, hs, NH * hs, 1}; }
};

// (the graphs are built without a device; build() then needs the handle's)
inline std::unique_ptr<Plan> forward_graph(cudnnHandle_t h, Shape s, cudnnDataType_t dt) {
    auto g = std::make_unique<Plan>(Plan{.handle = h});
    const cudnnDataType_t F = CUDNN_DATA_FLOAT;
    auto q = g->tensor(dt, s.heads(), s.qkv_strides(), kQ);
    auto kt = g->tensor(dt, transposed(s.heads()), transposed(s.qkv_strides()), kK);
    auto v = g->tensor(dt, s.heads(), s.qkv_strides(), kV);
    auto out = g->tensor(dt, s.heads(), s.out_strides(), kOut);
    auto lse = g->tensor(F, s.rows(), packed(s.rows()), kLse);
    auto scale = g->scalar(kScale), neg_inf = g->scalar(kNegInf);
    auto S = g->matmul(g->temp(F, s.scores()), q, kt);
    S = g->pointwise(CUDNN_POINTWISE_MUL, g->temp(F, s.scores()), S, scale);
    S = g->causal(S, s.scores(), neg_inf);
    auto M = g->reduce(CUDNN_REDUCE_TENSOR_MAX, g->temp(F, s.rows()), S);
    auto E = g->pointwise(CUDNN_POINTWISE_EXP, g->temp(F, s.scores()),
                          g->pointwise(CUDNN_POINTWISE_SUB, g->temp(F, s.scores()), S, M));
    auto Z = g->reduce(CUDNN_REDUCE_TENSOR_ADD, g->temp(F, s.rows()), E);
    g->pointwise(CUDNN_POINTWISE_ADD, lse, M, g->pointwise(CUDNN_POINTWISE_LOG, g->temp(F, s.rows()), Z));
    auto P = g->pointwise(CUDNN_POINTWISE_DIV, g->temp(dt, s.scores()), E, Z);  // 16-bit into the second matmul
    g->matmul(out, P, v);
    return g;
}

inline std::unique_ptr<Plan> backward_graph(cudnnHandle_t h, Shape s, cudnnDataType_t dt) {
    auto g = std::make_unique<Plan>(Plan{.handle = h});
    const cudnnDataType_t F = CUDNN_DATA_FLOAT;
    const Dims st = transposed(packed(s.scores()));  // a (T, T) matrix read transposed
    auto q = g->tensor(dt, s.heads(), s.qkv_strides(), kQ);
    auto kt = g->tensor(dt, transposed(s.heads()), transposed(s.qkv_strides()), kK);
    auto vt = g->tensor(dt, transposed(s.heads()), transposed(s.qkv_strides()), kV);
    auto out = g->tensor(dt, s.heads(), s.out_strides(), kOut);
    auto dout = g->tensor(dt, s.heads(), s.out_strides(), kDout);
    auto lse = g->tensor(F, s.rows(), packed(s.rows()), kLse);
    auto dq = g->tensor(dt, s.heads(), s.qkv_strides(), kDq);
    auto dk = g->tensor(dt, s.heads(), s.qkv_strides(), kDk);
    auto dv = g->tensor(dt, s.heads(), s.qkv_strides(), kDv);
    auto row_dot = g->tensor(F, s.rows(), packed(s.rows()), kRowDot);  // D, in the workspace
    auto scale = g->scalar(kScale), neg_inf = g->scalar(kNegInf), one = g->scalar(kOne);
    // D = rowsum(dO * out)
    auto prod = g->pointwise(CUDNN_POINTWISE_MUL, g->tensor(F, s.heads(), {s.NH * s.T * s.hs, s.T * s.hs, s.NH * s.hs, 1}),
                             dout, out);
    g->pointwise(CUDNN_POINTWISE_MUL, row_dot, g->reduce(CUDNN_REDUCE_TENSOR_ADD, g->temp(F, s.rows()), prod), one);
    // P = exp(causal(Q K^T * scale - lse))
    auto S = g->matmul(g->temp(F, s.scores()), q, kt);
    S = g->pointwise(CUDNN_POINTWISE_MUL, g->temp(F, s.scores()), S, scale);
    S = g->pointwise(CUDNN_POINTWISE_SUB, g->temp(F, s.scores()), S, lse);
    S = g->causal(S, s.scores(), neg_inf);
    auto P = g->pointwise(CUDNN_POINTWISE_EXP, g->temp(F, s.scores()), S);
    // dV = P^T dO
    g->matmul(dv, g->view(g->tensor(dt, s.scores(), st), P), dout);
    // dS = P * (dO V^T - D) * scale
    auto dP = g->matmul(g->temp(F, s.scores()), dout, vt);
    dP = g->pointwise(CUDNN_POINTWISE_SUB, g->temp(F, s.scores()), dP, row_dot);
    auto dS = g->pointwise(CUDNN_POINTWISE_MUL, g->temp(F, s.scores()), dP, P);
    dS = g->pointwise(CUDNN_POINTWISE_MUL, g->temp(F, s.scores()), dS, scale);
    // dK = dS^T Q, dQ = dS K
    g->matmul(dk, g->view(g->tensor(dt, s.scores(), st), dS), q);
    g->matmul(dq, dS, g->view(g->tensor(F, s.heads(), s.qkv_strides()), kt));
    return g;
}

}  // namespace cudnn_attn

// A rank's cuDNN handle and its plans, one per direction, shape and dtype
// (KernelCtx::cudnn).
struct CudnnAttention {
    cudnnHandle_t handle = nullptr;
    std::map<std::tuple<bool, int, int, int, int, int>, std::unique_ptr<cudnn_attn::Plan>> plans;
    CudnnAttention() { cudnn_attn::check(cudnnCreate(&handle), "create the handle"); }
    ~CudnnAttention() {
        plans.clear();
        cudnnDestroy(handle);
    }

    // The plan for this call, made on first use; D's bytes go before the plan's workspace.
    template <typename T>
    const cudnn_attn::Plan& plan(const KernelCtx& ctx, bool backward, int B, int T_, int C, int NH) {
        cudnn_attn::check(cudnnSetStream(handle, ctx.stream), "set the stream");
        auto& p = plans[{backward, B, T_, C, NH, (int)dtype_of<T>::value}];
        if (!p) {
            // (fp32 never comes here: the run's set-up refuses --attention cudnn with it)
            CHECK((!std::is_same<T, float>::value), "cuDNN attention runs bf16 and fp16 only");
            const cudnn_attn::Shape s{B, NH, T_, C / NH};
            const cudnnDataType_t dt = std::is_same<T, bf16>::value ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
            p = backward ? cudnn_attn::backward_graph(handle, s, dt) : cudnn_attn::forward_graph(handle, s, dt);
            p->build();
            const size_t need = attention_cudnn_row_dot_bytes(B, T_, NH) + (size_t)p->workspace;
            CHECK(need <= ctx.workspace_bytes,
                  "cuDNN attention's %s plan needs %zu bytes of workspace, the kernel workspace has %zu "
                  "(attention_cudnn_workspace_bytes, kernels/attention_cudnn.cuh)",
                  backward ? "backward" : "forward", need, ctx.workspace_bytes);
        }
        return *p;
    }
    // cuDNN before 9.10 masks with the lowest float rather than -inf (as its frontend does)
    static float masked() {
        return cudnnGetVersion() < 91000 ? std::numeric_limits<float>::lowest() : -INFINITY;
    }
};

template <typename T>
void attention_cudnn_forward(const KernelCtx& ctx, T* out, float* lse, const T* qkv, int B, int T_, int C, int NH) {
    if (B == 0 || T_ == 0) return;
    using namespace cudnn_attn;
    const Plan& p = ctx.cudnn->plan<T>(ctx, false, B, T_, C, NH);
    const float scale = 1.0f / sqrtf((float)(C / NH)), neg_inf = CudnnAttention::masked();
    p.execute({{kQ, qkv}, {kK, qkv + C}, {kV, qkv + 2 * C}, {kOut, out}, {kLse, lse}, {kScale, &scale},
               {kNegInf, &neg_inf}},
              ctx.workspace);
}

template <typename T>
void attention_cudnn_backward(const KernelCtx& ctx, T* dqkv, const T* dout, const T* qkv, const T* out,
                              const float* lse, int B, int T_, int C, int NH) {
    if (B == 0 || T_ == 0) return;
    using namespace cudnn_attn;
    const Plan& p = ctx.cudnn->plan<T>(ctx, true, B, T_, C, NH);
    const float scale = 1.0f / sqrtf((float)(C / NH)), neg_inf = CudnnAttention::masked(), one = 1.0f;
    char* ws = static_cast<char*>(ctx.workspace);
    p.execute({{kQ, qkv}, {kK, qkv + C}, {kV, qkv + 2 * C}, {kOut, out}, {kDout, dout}, {kLse, lse}, {kDq, dqkv},
               {kDk, dqkv + C}, {kDv, dqkv + 2 * C}, {kScale, &scale}, {kNegInf, &neg_inf}, {kOne, &one},
               {kRowDot, ws}},
              ws + attention_cudnn_row_dot_bytes(B, T_, NH));
}

#endif  // ZERO_CUDNN
