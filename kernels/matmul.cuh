// Matrix multiplications through cuBLASLt, with the bias and GELU fused into
// cuBLASLt's epilogues where it offers them, and a deterministic dbias kernel.
//
// Row-major to column-major. cuBLASLt is column-major; a row-major (R, S)
// matrix with row stride S is, bit for bit, the column-major (S x R) matrix
// with leading dimension S, i.e. its transpose. So every row-major product
// Y = X @ W^T is computed as the column-major Y^T = W X^T:
//   forward   out (BT,OC) = inp (BT,C) @ W (OC,C)^T
//             -> out^T (OC x BT, ld OC) = op_T(W as C x OC, ld C) . (inp as C x BT, ld C)
//             m = OC, n = BT, k = C; transa = T, transb = N. The bias epilogue adds
//             bias[i] to row i of the column-major result, i.e. bias[o]: right.
//   backward  dinp (BT,C) = dout (BT,OC) @ W (OC,C)
//             -> dinp^T (C x BT, ld C) = (W as C x OC, ld C) . (dout as OC x BT, ld OC)
//             m = C, n = BT, k = OC; transa = N, transb = N.
//             dweight (OC,C) += dout^T @ inp
//             -> dweight^T (C x OC, ld C) += (inp as C x BT, ld C) . op_T(dout as OC x BT, ld OC)
//             m = C, n = OC, k = BT; transa = N, transb = T; beta = 1.
//
// Precision: compute type CUBLAS_COMPUTE_32F with fp32 scale for every T (fp32
// inputs run as true fp32 FMA GEMMs: TF32 is never enabled; bf16/fp16 inputs
// use tensor cores with fp32 accumulation). Each output is rounded to T once.
//
// Epilogues: forward uses CUBLASLT_EPILOGUE_BIAS, or GELU_AUX_BIAS / GELU_AUX
// when gelu_pre is given (aux = the pre-activation, D = gelu of it; the tanh
// form GPT-2 uses is what cuBLASLt implements to our knowledge: the workbench
// dev/cuda/matmul.cu checks the fused result against the CPU twin's formula).
// Backward uses
// CUBLASLT_EPILOGUE_DGELU with aux = gelu_pre to multiply dinp by gelu'(pre).
// If cuBLASLt offers no algorithm for a fused epilogue (or the environment
// variable ZERO_NO_GELU_FUSION is set), the plain GEMM runs and our own GELU
// kernels (kernels/gelu.cuh) do the pointwise part. fp32 always takes that
// unfused path (see lt_gelu_fusion_enabled). dbias does not use
// BGRADB (it overwrites, and its reduction order is not ours to fix): a
// two-pass column sum of dout over a fixed grid adds into dbias.
//
// Plan cache: building descriptors and querying the heuristic costs tens of
// microseconds per call, so each host thread keeps the plans it has built
// (thread_local; each rank is one thread with its own cuBLASLt handle),
// keyed by everything the heuristic looks at: handle and device, shape,
// transposes, leading dimensions, dtype, epilogue, beta != 0, workspace size
// and the alignment class of every pointer (the heuristic excludes
// algorithms by alignment, so a plan is only reused for pointers at least
// as aligned). The bias/aux pointers are set on the cached descriptor per call.
#pragma once

#include <cstdlib>
#include <utility>
#include <vector>

#include "kernels/cuda_common.cuh"
#include "kernels/gelu.cuh"

// largest power of two (<= 256) dividing the address; null counts as 256
inline uint32_t pointer_alignment(const void* p) {
    uintptr_t x = (uintptr_t)p;
    if (x == 0) return 256;
    uintptr_t low = x & (~x + 1);
    return low >= 256 ? 256u : (uint32_t)low;
}

struct LtPlanKey {
    cublasLtHandle_t handle;
    int device;
    int m, n, k;
    int64_t lda, ldb, ldd, aux_ld;
    int transa, transb;
    cudaDataType_t dtype;
    cublasLtEpilogue_t epilogue;
    int accumulate;
    size_t workspace;
    uint32_t align_a, align_b, align_d, align_bias, align_aux;
    bool operator==(const LtPlanKey& o) const {
        return handle == o.handle && device == o.device && m == o.m && n == o.n && k == o.k && lda == o.lda &&
               ldb == o.ldb && ldd == o.ldd && aux_ld == o.aux_ld && transa == o.transa && transb == o.transb &&
               dtype == o.dtype && epilogue == o.epilogue && accumulate == o.accumulate &&
               workspace == o.workspace && align_a == o.align_a && align_b == o.align_b && align_d == o.align_d &&
               align_bias == o.align_bias && align_aux == o.align_aux;
    }
};

struct LtPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool found = false;  // false: cuBLASLt has no algorithm for this combination
};

struct LtPlanCache {
    std::vector<std::pair<LtPlanKey, LtPlan>> entries;
    ~LtPlanCache() {  // host-side objects only; errors at process teardown are ignored
        for (auto& e : entries) {
            if (e.second.op) cublasLtMatmulDescDestroy(e.second.op);
            if (e.second.a) cublasLtMatrixLayoutDestroy(e.second.a);
            if (e.second.b) cublasLtMatrixLayoutDestroy(e.second.b);
            if (e.second.d) cublasLtMatrixLayoutDestroy(e.second.d);
        }
    }
    LtPlan* find(const LtPlanKey& k) {
        for (auto& e : entries)
            if (e.first == k) return &e.second;
        return nullptr;
    }
};

inline LtPlanCache& lt_plan_cache() {
    thread_local LtPlanCache cache;
    return cache;
}

// True when the fused GELU epilogues may be used for T: only for the 16-bit
// dtypes (their outputs are rounded to 8 or 11 bits, far coarser than any
// difference between cuBLASLt's GELU and ours), and only while the
// environment variable ZERO_NO_GELU_FUSION is unset (read once). fp32 runs
// keep our own GELU kernels, whose formula is the CPU twin's, so that fp32
// results stay comparable with the CPU build to ~1e-6.
template <typename T>
inline bool lt_gelu_fusion_enabled() {
    static const bool env_off = [] {
        const char* e = getenv("ZERO_NO_GELU_FUSION");
        return e && *e && *e != '0';
    }();
    return sizeof(T) == 2 && !env_off;
}

// D (m x n, column-major, ld ldd) = op(A) op(B) + beta * D, with `epilogue`
// (bias: length m; aux: m x n, ld aux_ld). A is stored (k x m) if transa else
// (m x k), B (n x k) if transb else (k x n), column-major. Returns false, doing
// nothing, when cuBLASLt has no algorithm for the combination.
template <typename T>
bool lt_matmul(const KernelCtx& ctx, T* d, const T* a, const T* b, int m, int n, int k, bool transa, bool transb,
               int64_t lda, int64_t ldb, int64_t ldd, float beta, cublasLtEpilogue_t epilogue, const T* bias,
               const T* aux, int64_t aux_ld) {
    // the GELU aux matrix: ld divisible by 8 and a 16-byte aligned pointer
    // (cuBLASLt's documented limits); otherwise let the caller fall back
    if (aux && (aux_ld % 8 != 0 || !aligned16(aux))) return false;
    LtPlanKey key{};
    key.handle = ctx.lt;
    cudaCheck(cudaGetDevice(&key.device));
    key.m = m, key.n = n, key.k = k;
    key.lda = lda, key.ldb = ldb, key.ldd = ldd, key.aux_ld = aux ? aux_ld : 0;
    key.transa = transa, key.transb = transb;
    key.dtype = cuda_data_type<T>();
    key.epilogue = epilogue;
    key.accumulate = beta != 0.0f;
    key.workspace = ctx.lt_workspace_bytes;
    key.align_a = pointer_alignment(a), key.align_b = pointer_alignment(b), key.align_d = pointer_alignment(d);
    key.align_bias = pointer_alignment(bias), key.align_aux = pointer_alignment(aux);

    LtPlanCache& cache = lt_plan_cache();
    LtPlan* plan = cache.find(key);
    if (!plan) {
        LtPlan p;
        const cudaDataType_t dt = key.dtype;
        cublasCheck(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasOperation_t opa = transa ? CUBLAS_OP_T : CUBLAS_OP_N, opb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasCheck(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
        if (bias)
            cublasCheck(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
        if (aux) {
            cublasCheck(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                                       sizeof(aux)));
            cublasCheck(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                       sizeof(aux_ld)));
        }
        cublasCheck(cublasLtMatrixLayoutCreate(&p.a, dt, transa ? k : m, transa ? m : k, lda));
        cublasCheck(cublasLtMatrixLayoutCreate(&p.b, dt, transb ? n : k, transb ? k : n, ldb));
        cublasCheck(cublasLtMatrixLayoutCreate(&p.d, dt, m, n, ldd));

        cublasLtMatmulPreference_t pref;
        cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
        uint64_t ws = ctx.lt_workspace_bytes;
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                         &key.align_a, sizeof(uint32_t)));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                         &key.align_b, sizeof(uint32_t)));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                         &key.align_d, sizeof(uint32_t)));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                         &key.align_d, sizeof(uint32_t)));
        cublasLtMatmulHeuristicResult_t result{};
        int count = 0;
        cublasStatus_t st =
            cublasLtMatmulAlgoGetHeuristic(ctx.lt, p.op, p.a, p.b, p.d, p.d, pref, 1, &result, &count);
        cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
        p.found = st == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
        if (p.found) p.algo = result.algo;
        cache.entries.emplace_back(key, p);
        plan = &cache.entries.back().second;
    }
    if (!plan->found) return false;

    // this call's epilogue pointers (same alignment class as the plan's)
    if (bias)
        cublasCheck(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (aux)
        cublasCheck(
            cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    const float alpha = 1.0f;
    cublasCheck(cublasLtMatmul(ctx.lt, plan->op, &alpha, a, plan->a, b, plan->b, &beta, d, plan->d, d, plan->d,
                               &plan->algo, ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream));
    return true;
}

template <typename T>
void lt_matmul_or_fail(const KernelCtx& ctx, T* d, const T* a, const T* b, int m, int n, int k, bool transa,
                       bool transb, int64_t lda, int64_t ldb, int64_t ldd, float beta, cublasLtEpilogue_t epilogue,
                       const T* bias) {
    bool ok = lt_matmul(ctx, d, a, b, m, n, k, transa, transb, lda, ldb, ldd, beta, epilogue, bias, (const T*)nullptr, 0);
    CHECK(ok, "cuBLASLt has no algorithm for a %s GEMM m=%d n=%d k=%d (epilogue %d)", dtype_name(dtype_of<T>::value),
          m, n, k, (int)epilogue);
}

// ----------------------------------------------------------------------------
// dbias (OC) += column sums of dout (BT, OC), deterministic.
// Pass 1: grid (column slices of 32 packs, row chunks); 8 warps per block take
// the chunk's rows round-robin, each summing its rows in order; the warps'
// sums are added in warp order into partials (chunks, OC). Pass 2:
// finish_column_partials adds the chunks in order into dbias.
// wide (ZERO_VARIANTS=dbias_blocks): DBIAS_ROW_CHUNKS row chunks give a 768-wide
// bf16 bias 3 x 64 = 192 blocks, under two per SM of an H100; wide takes as
// many chunks as bring the grid to DBIAS_TARGET_BLOCKS (at most
// DBIAS_MAX_CHUNKS, at least DBIAS_ROW_CHUNKS). The chunks are a function of
// the shape alone, so the bits are fixed, though not the default's.
constexpr int DBIAS_WARPS = 8;

inline int dbias_row_chunks(int BT, int column_blocks, bool wide) {
    int chunks = DBIAS_ROW_CHUNKS;
    if (wide) {
        chunks = cdiv(DBIAS_TARGET_BLOCKS, column_blocks);
        chunks = chunks < DBIAS_ROW_CHUNKS ? DBIAS_ROW_CHUNKS : chunks > DBIAS_MAX_CHUNKS ? DBIAS_MAX_CHUNKS : chunks;
    }
    return BT < chunks ? BT : chunks;
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(DBIAS_WARPS * 32)
    dbias_partials_kernel(float* __restrict__ partials, const T* __restrict__ dout, int BT, int OC, int rows_per_chunk) {
    constexpr int X = VEC ? Packed128<T>::size : 1;
    __shared__ float sums[DBIAS_WARPS][32 * X];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int c = (blockIdx.x * 32 + lane) * X;
    const int chunk = blockIdx.y;
    const int r0 = chunk * rows_per_chunk;
    const int r1 = min(BT, r0 + rows_per_chunk);
    float acc[X];
#pragma unroll
    for (int e = 0; e < X; e++) acc[e] = 0.0f;
    if (c < OC) {
        for (int r = r0 + w; r < r1; r += DBIAS_WARPS) {
            if constexpr (VEC) {
                Packed128<T> v = load128(dout + (size_t)r * OC + c);
#pragma unroll
                for (int e = 0; e < X; e++) acc[e] += v.get(e);
            } else {
                acc[0] += to_float(dout[(size_t)r * OC + c]);
            }
        }
    }
#pragma unroll
    for (int e = 0; e < X; e++) sums[w][lane * X + e] = acc[e];
    __syncthreads();
    // 32*X columns of this block, summed over warps in order
    for (int i = threadIdx.x; i < 32 * X; i += blockDim.x) {
        const int col = blockIdx.x * 32 * X + i;
        if (col < OC) {
            float t = 0.0f;
#pragma unroll
            for (int k = 0; k < DBIAS_WARPS; k++) t += sums[k][i];
            partials[(size_t)chunk * OC + col] = t;
        }
    }
}

template <typename T>
void dbias_accumulate_cuda(const KernelCtx& ctx, T* dbias, const T* dout, int BT, int OC, bool wide = false) {
    if (BT == 0 || OC == 0) return;
    constexpr int X = Packed128<T>::size;
    const bool vec = OC % X == 0 && aligned16(dout);
    const int chunks = dbias_row_chunks(BT, cdiv(OC, 32 * (vec ? X : 1)), wide);
    const int rows_per_chunk = cdiv(BT, chunks);
    float* partials = (float*)workspace_take(ctx, (size_t)chunks * OC * sizeof(float), "matmul_backward dbias");
    if (vec) {
        dim3 grid(cdiv(OC, 32 * X), chunks);
        dbias_partials_kernel<T, true><<<grid, DBIAS_WARPS * 32, 0, ctx.stream>>>(partials, dout, BT, OC, rows_per_chunk);
    } else {
        dim3 grid(cdiv(OC, 32), chunks);
        dbias_partials_kernel<T, false><<<grid, DBIAS_WARPS * 32, 0, ctx.stream>>>(partials, dout, BT, OC, rows_per_chunk);
    }
    cudaLaunchCheck();
    finish_column_partials(ctx, dbias, (T*)nullptr, OC, partials, chunks, OC);
}

// ----------------------------------------------------------------------------
// the dispatcher's entry points

// out (BT,OC) = inp (BT,C) @ weight (OC,C)^T + bias (OC, or null);
// with gelu_pre: gelu_pre = that, out = gelu(gelu_pre)
template <typename T>
void matmul_forward_cuda(const KernelCtx& ctx, T* out, const T* inp, const T* weight, const T* bias, int BT, int C,
                         int OC, T* gelu_pre) {
    if (BT == 0 || OC == 0) return;
    if (gelu_pre && lt_gelu_fusion_enabled<T>()) {
        cublasLtEpilogue_t epi = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        if (lt_matmul(ctx, out, weight, inp, OC, BT, C, true, false, C, C, OC, 0.0f, epi, bias, (const T*)gelu_pre,
                      (int64_t)OC))
            return;
    }
    T* d = gelu_pre ? gelu_pre : out;
    lt_matmul_or_fail(ctx, d, weight, inp, OC, BT, C, true, false, C, C, OC, 0.0f,
                      bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias);
    if (gelu_pre) gelu_forward_cuda(ctx, out, gelu_pre, (size_t)BT * OC);
}

// dinp (BT,C) = dout (BT,OC) @ weight (OC,C)  [* gelu'(gelu_pre (BT,C))]   (overwritten)
// dweight (OC,C) += dout^T @ inp (BT,C);  dbias (OC) += column sums of dout
// (wide_dbias: dbias_accumulate_cuda's wide grid)
template <typename T>
void matmul_backward_cuda(const KernelCtx& ctx, T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                          const T* weight, int BT, int C, int OC, const T* gelu_pre, bool wide_dbias) {
    if (BT == 0) return;
    bool done = false;
    if (gelu_pre && lt_gelu_fusion_enabled<T>())
        done = lt_matmul(ctx, dinp, weight, dout, C, BT, OC, false, false, C, OC, C, 0.0f, CUBLASLT_EPILOGUE_DGELU,
                         (const T*)nullptr, gelu_pre, (int64_t)C);
    if (!done) {
        lt_matmul_or_fail(ctx, dinp, weight, dout, C, BT, OC, false, false, C, OC, C, 0.0f, CUBLASLT_EPILOGUE_DEFAULT,
                          (const T*)nullptr);
        if (gelu_pre) gelu_backward_cuda(ctx, dinp, gelu_pre, dinp, (size_t)BT * C);
    }
    lt_matmul_or_fail(ctx, dweight, inp, dout, C, OC, BT, false, true, C, OC, C, 1.0f, CUBLASLT_EPILOGUE_DEFAULT,
                      (const T*)nullptr);
    if (dbias) dbias_accumulate_cuda(ctx, dbias, dout, BT, OC, wide_dbias);
}
