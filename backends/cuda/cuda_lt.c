/* The CUDA backend's GEMMs through cuBLASLt (cuda_lt.h): per GEMM kernel, the matmul descriptor
 * with its epilogue and bias, the four matrix layouts, the pointers of every call (one per outer
 * batch index), and the algorithm: the heuristic's candidates for the pointers' real alignments,
 * timed on the GEMM's own buffers when the plan asks for it (lt_autotune), the fastest kept.
 * All of it is made once at prepare time; a launch is one cublasLtMatmul per call.
 *
 * The algorithm timing picks is recorded in the kernel cache (kind "ltalgo"), keyed by the
 * problem and the heuristic's candidate list (which names the GPU and the cuBLASLt version in
 * effect), so every later process on this machine runs the same kernel for the same GEMM:
 * `minic run`, `--profile` and an external profiler time the same thing.
 */
#include "backends/cuda/cuda_lt.h"

#include <stdlib.h>
#include <string.h>

static cudaDataType_t lt_type(mc_dtype d)
{
    return d == MC_F16 ? CUDA_R_16F : d == MC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static int addr_align(CUdeviceptr p)
{
    int a = 256;
    while (a > 1 && p % (CUdeviceptr)a != 0)
        a /= 2;
    return a;
}

static CUdeviceptr matrix_ptr(const mc_lt_env *s, const mc_lt_matrix *m, int64_t outer_off)
{
    CUdeviceptr base = m->buffer < 0 ? s->scratch : s->buf[m->buffer];
    return base + (CUdeviceptr)((m->offset + outer_off) * (int64_t)mc_dtype_size(m->dtype));
}

static mc_status lt_layout(const mc_lt_api *lt, const mc_lt_matrix *m, int64_t batch,
                           cublasLtMatrixLayout_t *out)
{
    cublasStatus_t r = lt->cublasLtMatrixLayoutCreate(out, lt_type(m->dtype), (uint64_t)m->rows,
                                                      (uint64_t)m->cols, m->ld);
    if (r != CUBLAS_STATUS_SUCCESS)
        return mc_fail(MC_ERR_SYSTEM, "cuBLASLt: creating a matrix layout failed (status %d)", r);
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        int64_t stride = m->batch_stride;
        lt->cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                             sizeof count);
        lt->cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &stride, sizeof stride);
    }
    return MC_OK;
}

/* Time the heuristic's candidates on the GEMM's own buffers (their contents don't matter for
 * speed; the results are overwritten by the first run) and keep the fastest. The heuristic's
 * first choice is often not the best for small or oddly shaped problems, and this costs a few
 * milliseconds once, at prepare time. */
static void lt_autotune(const mc_lt_env *s, const mc_cuda_gemm_plan *p, mc_lt_gemm *g,
                        const cublasLtMatmulHeuristicResult_t *res, int n)
{
    const mc_cuda_api *cu = s->cu;
    CUevent e0, e1;
    if (cu->cuEventCreate(&e0, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
        return;
    if (cu->cuEventCreate(&e1, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
        cu->cuEventDestroy(e0);
        return;
    }
    const CUdeviceptr *ptr = g->ptr;
    float best = -1;
    for (int a = 0; a < n; a++) {
        float t[3];
        bool ok = true;
        for (int rep = -1; rep < 3 && ok; rep++) {
            cu->cuEventRecord(e0, s->stream);
            cublasStatus_t r = s->lt->cublasLtMatmul(
                s->handle, g->desc, &p->alpha, (const void *)(uintptr_t)ptr[0], g->la,
                (const void *)(uintptr_t)ptr[1], g->lb, &p->beta, (const void *)(uintptr_t)ptr[2],
                g->lc, (void *)(uintptr_t)ptr[3], g->ld, &res[a].algo,
                (void *)(uintptr_t)s->workspace, MC_LT_WORKSPACE_BYTES, (cudaStream_t)s->stream);
            cu->cuEventRecord(e1, s->stream);
            ok = r == CUBLAS_STATUS_SUCCESS && cu->cuEventSynchronize(e1) == CUDA_SUCCESS;
            if (ok && rep >= 0)
                ok = cu->cuEventElapsedTime(&t[rep], e0, e1) == CUDA_SUCCESS;
        }
        if (!ok)
            continue;
        float m = t[0] < t[1] ? (t[1] < t[2] ? t[1] : (t[0] < t[2] ? t[2] : t[0]))
                              : (t[0] < t[2] ? t[0] : (t[1] < t[2] ? t[2] : t[1]));
        if (best < 0 || m < best) {
            best = m;
            g->algo = res[a].algo;
        }
    }
    cu->cuStreamSynchronize(s->stream);
    cu->cuEventDestroy(e0);
    cu->cuEventDestroy(e1);
}

/* The autotuned choice, from the cache when this problem with these candidates was tuned
 * before (the same choice in every process), else timed now and recorded. */
static void choose_algo(const mc_lt_env *s, const mc_cuda_gemm_plan *p, mc_lt_gemm *g,
                        const cublasLtMatmulHeuristicResult_t *res, int n, const int al[4],
                        size_t ws, cublasComputeType_t ct, cublasLtEpilogue_t epi)
{
    /* The key: everything the descriptors and layouts were made from, and the candidates. */
    const mc_lt_matrix *mats[4] = {&p->a, &p->b, &p->c, &p->d};
    uint64_t h = mc_hash64(&n, sizeof n, 0x6c74616c676fULL);
    int64_t facts[8] = {(int64_t)ct, (int64_t)epi, p->bias_buffer >= 0, p->batch, (int64_t)ws,
                        (int64_t)p->a.trans, (int64_t)p->b.trans, (int64_t)s->lt->cublasLtGetVersion()};
    h = mc_hash64(facts, sizeof facts, h);
    for (int m = 0; m < 4; m++) {
        int64_t f[6] = {(int64_t)mats[m]->dtype, mats[m]->rows, mats[m]->cols, mats[m]->ld,
                        mats[m]->batch_stride, al[m]};
        h = mc_hash64(f, sizeof f, h);
    }
    for (int a = 0; a < n; a++)
        h = mc_hash64(&res[a].algo, sizeof res[a].algo, h);
    char key[64];
    snprintf(key, sizeof key, "lt-%016llx", (unsigned long long)h);
    void *data = NULL;
    size_t size = 0;
    if (mc_cache_load("ltalgo", key, &data, &size) == MC_CACHE_HIT) {
        bool used = false;
        for (int a = 0; a < n && !used && size == sizeof res[a].algo; a++)
            if (!memcmp(data, &res[a].algo, sizeof res[a].algo)) { /* one of today's candidates */
                g->algo = res[a].algo;
                used = true;
            }
        free(data);
        if (used)
            return;
        mc_cache_evict("ltalgo", key);
    }
    lt_autotune(s, p, g, res, n);
    mc_cache_store("ltalgo", key, &g->algo, sizeof g->algo);
}

/* The cached plan's key: everything the descriptors, layouts and preference are made from,
 * how the algorithm is chosen, cuBLASLt's version and the GPU. */
static void plan_key(const mc_lt_env *s, const mc_cuda_gemm_plan *p, const int al[4], size_t ws,
                     cublasComputeType_t ct, cublasLtEpilogue_t epi, int want, char *key, size_t size)
{
    const mc_lt_matrix *mats[4] = {&p->a, &p->b, &p->c, &p->d};
    int64_t facts[11] = {(int64_t)ct, (int64_t)epi, p->bias_buffer >= 0, p->batch, (int64_t)ws,
                         (int64_t)p->a.trans, (int64_t)p->b.trans,
                         (int64_t)s->lt->cublasLtGetVersion(), s->sm, want, p->autotune};
    uint64_t h = mc_hash64(facts, sizeof facts, 0x6c74706c616eULL);
    for (int m = 0; m < 4; m++) {
        int64_t f[6] = {(int64_t)mats[m]->dtype, mats[m]->rows, mats[m]->cols, mats[m]->ld,
                        mats[m]->batch_stride, al[m]};
        h = mc_hash64(f, sizeof f, h);
    }
    const char *dev = s->device ? s->device : "";
    h = mc_hash64(dev, strlen(dev), h);
    snprintf(key, size, "lp-%016llx", (unsigned long long)h);
}

/* The algorithm of an earlier process for this key, when cuBLASLt still accepts it for this
 * problem within the workspace; false (and the entry evicted where it is stale) otherwise. */
static bool cached_plan(const mc_lt_env *s, mc_lt_gemm *g, const char *key, size_t ws)
{
    void *data = NULL;
    size_t size = 0;
    if (mc_cache_load("ltplan", key, &data, &size) != MC_CACHE_HIT)
        return false;
    bool ok = size == sizeof g->algo;
    cublasLtMatmulAlgo_t algo;
    if (ok)
        memcpy(&algo, data, sizeof algo);
    free(data);
    cublasLtMatmulHeuristicResult_t check;
    memset(&check, 0, sizeof check);
    ok = ok && s->lt->cublasLtMatmulAlgoCheck(s->handle, g->desc, g->la, g->lb, g->lc, g->ld, &algo,
                                              &check) == CUBLAS_STATUS_SUCCESS &&
         check.state == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= ws;
    if (!ok) {
        mc_cache_evict("ltplan", key);
        return false;
    }
    g->algo = algo;
    return true;
}

static bool plan_cache_on(void)
{
    const char *e = getenv("MINIC_CUDA_LT_PLAN_CACHE");
    return !(e && !strcmp(e, "0"));
}

mc_status mc_lt_gemm_setup(const mc_lt_env *s, const kir_kernel *k, const mc_cuda_gemm_plan *p,
                           mc_lt_gemm *g, const mc_lt_gemm *like, bool *ok)
{
    const mc_lt_api *lt = s->lt;
    *ok = false;
    cublasComputeType_t ct =
        p->a.dtype == MC_F32 && p->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (lt->cublasLtMatmulDescCreate(&g->desc, ct, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
        return mc_fail(MC_ERR_SYSTEM, "cuBLASLt: creating the matmul of %s failed", k->name);
    cublasOperation_t ta = p->a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = p->b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt->cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    lt->cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    static const cublasLtEpilogue_t epis[] = {
        CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS,      CUBLASLT_EPILOGUE_RELU,
        CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS};
    cublasLtEpilogue_t epi = epis[p->epi];
    lt->cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (p->bias_buffer >= 0) {
        CUdeviceptr bias = s->buf[p->bias_buffer] +
                           (CUdeviceptr)(p->bias_offset *
                                         (int64_t)mc_dtype_size(p->d.dtype));
        void *bp = (void *)(uintptr_t)bias;
        lt->cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp,
                                           sizeof bp);
    }
    mc_status st = lt_layout(lt, &p->a, p->batch, &g->la);
    if (st == MC_OK)
        st = lt_layout(lt, &p->b, p->batch, &g->lb);
    if (st == MC_OK)
        st = lt_layout(lt, &p->c, p->batch, &g->lc);
    if (st == MC_OK)
        st = lt_layout(lt, &p->d, p->batch, &g->ld);
    if (st != MC_OK)
        return st;
    /* pointers of every call (one per outer batch index) and their common alignment */
    g->ptr = calloc((size_t)p->calls * 4, sizeof(CUdeviceptr));
    if (!g->ptr)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    int al[4] = {256, 256, 256, 256};
    const mc_lt_matrix *mats[4] = {&p->a, &p->b, &p->c, &p->d};
    for (int64_t c = 0; c < p->calls; c++) {
        int64_t rem = c;
        int64_t off[4] = {0, 0, 0, 0};
        for (int d = p->nouter - 1; d >= 0; d--) {
            int64_t i = rem % p->outer_shape[d];
            rem /= p->outer_shape[d];
            for (int m = 0; m < 4; m++)
                off[m] += i * mats[m]->outer_stride[d];
        }
        for (int m = 0; m < 4; m++) {
            CUdeviceptr ptr = matrix_ptr(s, mats[m], off[m]);
            g->ptr[c * 4 + m] = ptr;
            int a = addr_align(ptr);
            int64_t bs = mats[m]->batch_stride * (int64_t)mc_dtype_size(mats[m]->dtype);
            while (p->batch > 1 && a > 1 && bs % a != 0)
                a /= 2;
            if (a < al[m])
                al[m] = a;
        }
    }
    memcpy(g->align, al, sizeof al);
    if (like && memcmp(like->align, al, sizeof al) == 0) {
        g->algo = like->algo;
        *ok = true;
        return MC_OK;
    }
    size_t ws = MC_LT_WORKSPACE_BYTES;
    const char *e = getenv("MINIC_CUDA_LT_WORKSPACE"); /* experiments: cap the workspace */
    if (e && (size_t)atoll(e) < ws)
        ws = (size_t)atoll(e);
    enum { CANDIDATES = 8 };
    const char *tune = getenv("MINIC_CUDA_LT_AUTOTUNE");
    int want = tune && strcmp(tune, "0") == 0 ? 1 : CANDIDATES;
    char key[64];
    bool plan_cache = plan_cache_on();
    if (plan_cache) {
        plan_key(s, p, al, ws, ct, epi, want, key, sizeof key);
        if (cached_plan(s, g, key, ws)) {
            *ok = true;
            return MC_OK;
        }
    }
    cublasLtMatmulPreference_t pref;
    if (lt->cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
        return mc_fail(MC_ERR_SYSTEM, "cuBLASLt: creating a preference failed");
    lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof ws);
    const cublasLtMatmulPreferenceAttributes_t attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int m = 0; m < 4; m++) {
        uint32_t a = (uint32_t)al[m];
        lt->cublasLtMatmulPreferenceSetAttribute(pref, attr[m], &a, sizeof a);
    }
    cublasLtMatmulHeuristicResult_t res[CANDIDATES];
    int found = 0;
    cublasStatus_t r = lt->cublasLtMatmulAlgoGetHeuristic(s->handle, g->desc, g->la, g->lb,
                                                          g->lc, g->ld, pref, want, res, &found);
    lt->cublasLtMatmulPreferenceDestroy(pref);
    if (r != CUBLAS_STATUS_SUCCESS || found == 0)
        return MC_OK; /* no algorithm: the caller falls back */
    g->algo = res[0].algo;
    if (found > 1 && p->autotune) /* smaller ones keep the heuristic's first choice */
        choose_algo(s, p, g, res, found, al, ws, ct, epi);
    if (plan_cache)
        mc_cache_store("ltplan", key, &g->algo, sizeof g->algo);
    *ok = true;
    return MC_OK;
}

void mc_lt_gemm_free(const mc_lt_api *lt, mc_lt_gemm *g)
{
    if (g->desc)
        lt->cublasLtMatmulDescDestroy(g->desc);
    cublasLtMatrixLayout_t ls[4] = {g->la, g->lb, g->lc, g->ld};
    for (int i = 0; i < 4; i++)
        if (ls[i])
            lt->cublasLtMatrixLayoutDestroy(ls[i]);
    free(g->ptr);
    memset(g, 0, sizeof *g);
}

mc_status mc_lt_gemm_launch(const mc_lt_env *s, const mc_cuda_gemm_plan *p, const mc_lt_gemm *g, const char *name)
{
    for (int64_t c = 0; c < p->calls; c++) {
        const CUdeviceptr *ptr = &g->ptr[c * 4];
        cublasStatus_t r = s->lt->cublasLtMatmul(
            s->handle, g->desc, &p->alpha, (const void *)(uintptr_t)ptr[0], g->la,
            (const void *)(uintptr_t)ptr[1], g->lb, &p->beta, (const void *)(uintptr_t)ptr[2],
            g->lc, (void *)(uintptr_t)ptr[3], g->ld, &g->algo,
            (void *)(uintptr_t)s->workspace, MC_LT_WORKSPACE_BYTES, (cudaStream_t)s->stream);
        if (r != CUBLAS_STATUS_SUCCESS)
            return mc_fail(MC_ERR_SYSTEM, "cuBLASLt: the matmul of kernel %s failed (status %d)", name, r);
    }
    return MC_OK;
}
