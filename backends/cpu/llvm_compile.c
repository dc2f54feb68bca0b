/* From a module to code in memory, for the CPU backend (llvm_backend.c): optimization and code
 * generation (llvm_compile: LLVM_OPT_PIPELINE, then object files, in parts on the program's
 * threads), the objects as one blob (the compile cache stores it), and linking a blob into an
 * ORC LLJIT (llvm_jit_load), which hands back one function pointer per name.
 */
#include "backends/cpu/llvm.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static mc_status fail_llvm(LLVMErrorRef err, const char *what)
{
    char *msg = LLVMGetErrorMessage(err);
    mc_status st = mc_fail(MC_ERR_SYSTEM, "CPU backend: %s: %s", what, msg ? msg : "unknown LLVM error");
    LLVMDisposeErrorMessage(msg);
    return st;
}

/* ---- optimization and code generation ----------------------------------------------------- */

/* The optimization pipeline. The generated code is vectorized, tiled and specialized on its
 * sizes already, so what it needs from LLVM is the clean-up a front end's output needs: allocas
 * to registers, the math helpers inlined, constants folded, common subexpressions and
 * invariant address arithmetic out of the loops, dead branches gone. default<O3> does that and
 * much more (LLVM 14 runs its loop vectorizer even when told not to, on the packing loops, and
 * unswitches and unrolls loops into copies): on the examples' mlp it took 160 ms to optimize
 * and left twice the code for the code generator, 340 ms cold in all against about 100 ms with
 * this list, for the same inner loops instruction for instruction (GEMM micro-kernel,
 * pointwise and reduction loops, compared in the generated assembly). */
const char LLVM_OPT_PIPELINE[] =
    "always-inline,globaldce,"
    "function(sroa,early-cse,simplifycfg,instcombine,loop-mssa(loop-rotate,licm),gvn,instcombine,simplifycfg)";

/* Optimize mod and compile it to an object file (a malloc'd copy). Runs on any thread for
 * modules of different contexts; errors are written to `error` (a worker's mc_fail message
 * would stay on the worker). */
static bool compile_module(LLVMModuleRef mod, LLVMTargetMachineRef tm, void **obj, size_t *size, char *error,
                           size_t cap)
{
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMErrorRef err = LLVMRunPasses(mod, LLVM_OPT_PIPELINE, tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (err) {
        char *msg = LLVMGetErrorMessage(err);
        snprintf(error, cap, "optimizing: %s", msg ? msg : "unknown LLVM error");
        LLVMDisposeErrorMessage(msg);
        return false;
    }
    char *msg = NULL;
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &msg, &buf)) {
        snprintf(error, cap, "code generation failed: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return false;
    }
    *size = LLVMGetBufferSize(buf);
    *obj = malloc(*size ? *size : 1);
    if (*obj)
        memcpy(*obj, LLVMGetBufferStart(buf), *size);
    LLVMDisposeMemoryBuffer(buf);
    if (!*obj)
        snprintf(error, cap, "out of memory holding compiled code");
    return *obj != NULL;
}

/* Compiling in parts: optimization and code generation are most of a cold compile and each
 * kernel is independent, so with more than one thread the module is written as bitcode, and
 * each part (a share of the kernels, balanced by instruction count) reads it into a context of
 * its own, drops the other parts' kernels and compiles the rest to an object file, on the
 * program's thread pool. A part a busy worker does not take, the caller compiles, so a loaded
 * machine costs a serial compile plus the bitcode round trip (~1 ms). */

typedef struct compile_part {
    const llvm_target *target;
    const void *bitcode;
    size_t bitcode_size;
    const kir_program *kp;
    const int *part_of;      /* per kernel: its part */
    int index;
    void *obj;
    size_t obj_size;
    char error[512];         /* empty: compiled */
} compile_part;

static void compile_part_run(compile_part *part)
{
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRange(part->bitcode, part->bitcode_size, "minic", 0);
    LLVMModuleRef mod = NULL;
    LLVMTargetMachineRef tm = NULL;
    char *msg = NULL;
    if (LLVMParseBitcodeInContext2(ctx, mb, &mod)) {
        snprintf(part->error, sizeof part->error, "reading the generated module back failed");
        goto done;
    }
    for (int i = 0; i < part->kp->nkernels; i++) {
        LLVMValueRef fn = LLVMGetNamedFunction(mod, part->kp->kernels[i].name);
        if (fn && part->part_of[i] != part->index)
            LLVMDeleteFunction(fn);
    }
    if (!(tm = llvm_target_machine(part->target, &msg))) {
        snprintf(part->error, sizeof part->error, "no LLVM target for %s: %s", part->target->triple, msg ? msg : "?");
        LLVMDisposeMessage(msg);
        goto done;
    }
    compile_module(mod, tm, &part->obj, &part->obj_size, part->error, sizeof part->error);
done:
    if (tm)
        LLVMDisposeTargetMachine(tm);
    if (mod)
        LLVMDisposeModule(mod);
    LLVMDisposeMemoryBuffer(mb);
    LLVMContextDispose(ctx);
}

static void compile_parts_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    compile_part *parts = ctx;
    for (int64_t i = begin; i < end; i++)
        compile_part_run(&parts[i]);
}

static int64_t count_instructions(LLVMValueRef fn)
{
    int64_t n = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
            n++;
    return n;
}

/* Objects travel (and are cached) as one blob: a magic word, the count, the sizes, the bytes. */
static const char BLOB_MAGIC[8] = "MCOBJS1";

static void *objects_to_blob(void **objs, const size_t *sizes, int n, size_t *blob_size)
{
    size_t total = sizeof BLOB_MAGIC + 8 * (size_t)(n + 1);
    for (int i = 0; i < n; i++)
        total += sizes[i];
    unsigned char *blob = malloc(total);
    if (!blob)
        return NULL;
    size_t at = sizeof BLOB_MAGIC;
    memcpy(blob, BLOB_MAGIC, sizeof BLOB_MAGIC);
    uint64_t count = (uint64_t)n;
    memcpy(blob + at, &count, 8);
    at += 8;
    for (int i = 0; i < n; i++, at += 8) {
        uint64_t sz = sizes[i];
        memcpy(blob + at, &sz, 8);
    }
    for (int i = 0; i < n; i++) {
        memcpy(blob + at, objs[i], sizes[i]);
        at += sizes[i];
    }
    *blob_size = total;
    return blob;
}

/* The objects of a blob (pointers into it); false when it is not a well-formed blob (a cache
 * entry from an older minic: then it is recompiled). */
static bool blob_objects(const void *blob, size_t size, const void **objs, size_t *sizes, int *n)
{
    const unsigned char *b = blob;
    uint64_t count;
    if (size < sizeof BLOB_MAGIC + 8 || memcmp(b, BLOB_MAGIC, sizeof BLOB_MAGIC) != 0)
        return false;
    memcpy(&count, b + sizeof BLOB_MAGIC, 8);
    size_t at = sizeof BLOB_MAGIC + 8;
    if (count < 1 || count > LLVM_MAX_PARTS || size - at < 8 * count)
        return false;
    size_t data = at + 8 * (size_t)count;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t sz;
        memcpy(&sz, b + at + 8 * i, 8);
        if (sz > size - data)
            return false;
        objs[i] = b + data;
        sizes[i] = (size_t)sz;
        data += (size_t)sz;
    }
    *n = (int)count;
    return data == size;
}

bool llvm_blob_valid(const void *blob, size_t size)
{
    const void *objs[LLVM_MAX_PARTS];
    size_t sizes[LLVM_MAX_PARTS];
    int n;
    return blob_objects(blob, size, objs, sizes, &n);
}

mc_status llvm_compile(const llvm_target *t, LLVMModuleRef mod, LLVMTargetMachineRef tm, const kir_program *kp,
                       mc_threadpool *pool, void **blob, size_t *blob_size)
{
    int nparts = mc_threadpool_size(pool);
    if (nparts > kp->nkernels)
        nparts = kp->nkernels;
    if (nparts > LLVM_MAX_PARTS)
        nparts = LLVM_MAX_PARTS;
    void *objs[LLVM_MAX_PARTS] = {0};
    size_t sizes[LLVM_MAX_PARTS] = {0};
    char error[512] = "";
    bool ok = true;
    if (nparts <= 1) {
        nparts = 1;
        ok = compile_module(mod, tm, &objs[0], &sizes[0], error, sizeof error);
    } else {
        /* largest kernel first into the lightest part */
        int *part_of = calloc((size_t)kp->nkernels, sizeof *part_of);
        int64_t *cost = calloc((size_t)kp->nkernels, sizeof *cost);
        compile_part parts[LLVM_MAX_PARTS];
        memset(parts, 0, sizeof parts);
        LLVMMemoryBufferRef bc = part_of && cost ? LLVMWriteBitcodeToMemoryBuffer(mod) : NULL;
        if (!bc) {
            free(part_of);
            free(cost);
            return mc_fail(MC_ERR_SYSTEM, "out of memory compiling the CPU kernels");
        }
        for (int i = 0; i < kp->nkernels; i++) {
            LLVMValueRef fn = LLVMGetNamedFunction(mod, kp->kernels[i].name);
            cost[i] = fn ? count_instructions(fn) : 0;
            part_of[i] = -1;
        }
        int64_t load[LLVM_MAX_PARTS] = {0};
        for (int done = 0; done < kp->nkernels; done++) {
            int big = -1, light = 0;
            for (int i = 0; i < kp->nkernels; i++)
                if (part_of[i] < 0 && (big < 0 || cost[i] > cost[big]))
                    big = i;
            for (int q = 1; q < nparts; q++)
                if (load[q] < load[light])
                    light = q;
            part_of[big] = light;
            load[light] += cost[big];
        }
        for (int q = 0; q < nparts; q++)
            parts[q] = (compile_part){.target = t, .bitcode = LLVMGetBufferStart(bc), .bitcode_size = LLVMGetBufferSize(bc),
                                      .kp = kp, .part_of = part_of, .index = q};
        mc_threadpool_run(pool, nparts, 1, compile_parts_range, parts);
        for (int q = 0; q < nparts; q++) {
            objs[q] = parts[q].obj;
            sizes[q] = parts[q].obj_size;
            if (ok && parts[q].error[0]) {
                ok = false;
                snprintf(error, sizeof error, "%s", parts[q].error);
            }
        }
        LLVMDisposeMemoryBuffer(bc);
        free(part_of);
        free(cost);
    }
    *blob = ok ? objects_to_blob(objs, sizes, nparts, blob_size) : NULL;
    for (int q = 0; q < nparts; q++)
        free(objs[q]);
    if (!ok)
        return mc_fail(MC_ERR_SYSTEM, "CPU backend: %s", error);
    return *blob ? MC_OK : mc_fail(MC_ERR_SYSTEM, "out of memory holding compiled code");
}

/* ---- linking: host functions the kernels call (llvm.h), then the objects --------------------- */

double llvm_host_sin(double x) { return sin(x); }
double llvm_host_cos(double x) { return cos(x); }

/* Define them in jd as absolute symbols: the generated code names them, and this way they are
 * found whether or not libm is in the process's global symbol scope. */
static mc_status define_host_functions(LLVMOrcLLJITRef jit, LLVMOrcJITDylibRef jd)
{
    LLVMJITSymbolFlags flags = {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0};
    LLVMJITCSymbolMapPair syms[2] = {
        {LLVMOrcLLJITMangleAndIntern(jit, LLVM_HOST_SIN), {(LLVMOrcExecutorAddress)(uintptr_t)llvm_host_sin, flags}},
        {LLVMOrcLLJITMangleAndIntern(jit, LLVM_HOST_COS), {(LLVMOrcExecutorAddress)(uintptr_t)llvm_host_cos, flags}},
    };
    LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(syms, 2);
    LLVMErrorRef err = LLVMOrcJITDylibDefine(jd, mu);
    if (err) {
        LLVMOrcDisposeMaterializationUnit(mu);
        return fail_llvm(err, "defining the host functions");
    }
    return MC_OK;
}

/* f16 <-> f32 for a CPU without F16C (x86-64, x86-64-v2): LLVM 14 turns fptrunc/fpext of half
 * into calls of these two compiler-rt functions (half as its bits in an i16), which a process
 * built with GCC does not have; the JIT gets them from here. Rounding to nearest even, NaNs
 * kept quiet with their payload's high bits: what F16C's vcvtps2ph and vcvtph2ps compute. */
static uint16_t f32_to_f16_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000, a = x & 0x7fffffff;
    if (a > 0x7f800000) /* NaN */
        return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
    if (a >= 0x477ff000) /* 65520 and above round to inf */
        return (uint16_t)(sign | 0x7c00);
    if (a >= 0x38800000) { /* normal: rebias the exponent, round the mantissa */
        uint32_t r = a - 0x38000000;
        return (uint16_t)(sign | ((r + 0xfff + ((r >> 13) & 1)) >> 13));
    }
    uint32_t e = a >> 23; /* subnormal f16 (or zero): units of 2^-24 */
    if (e < 102)          /* below 2^-25: rounds to 0 */
        return (uint16_t)sign;
    uint32_t m = (a & 0x7fffff) | 0x800000, shift = 126 - e;
    uint32_t k = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (k & 1)))
        k++;
    return (uint16_t)(sign | k);
}

static float f16_bits_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0x1f) /* inf, or NaN made quiet */
        x = sign | 0x7f800000 | (m ? 0x400000 | (m << 13) : 0);
    else if (e)
        x = sign | ((e + 112) << 23) | (m << 13);
    else {
        float v = (float)m * 0x1p-24f; /* exact */
        memcpy(&x, &v, sizeof x);
        x |= sign;
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* What the JIT's session reports besides the error it returns (the symbols not found behind a
 * failed lookup): kept for the message instead of printed. */
static void keep_jit_error(void *ctx, LLVMErrorRef err)
{
    llvm_jit *s = ctx;
    char *msg = LLVMGetErrorMessage(err);
    if (!s->error[0])
        snprintf(s->error, sizeof s->error, "%s", msg ? msg : "?");
    LLVMDisposeErrorMessage(msg);
}

static mc_status fail_jit(llvm_jit *s, LLVMErrorRef err, const char *what)
{
    if (!s->error[0])
        return fail_llvm(err, what);
    char *msg = LLVMGetErrorMessage(err);
    mc_status st = mc_fail(MC_ERR_SYSTEM, "CPU backend: %s: %s (%s)", what, msg ? msg : "unknown LLVM error",
                           s->error);
    LLVMDisposeErrorMessage(msg);
    return st;
}

mc_status llvm_jit_load(llvm_jit *s, const void *blob, size_t blob_size, const char *const *names, int nnames,
                        void **fns)
{
    const void *objs[LLVM_MAX_PARTS];
    size_t sizes[LLVM_MAX_PARTS];
    int n = 0;
    s->error[0] = '\0';
    if (!blob_objects(blob, blob_size, objs, sizes, &n))
        return mc_fail(MC_ERR_SYSTEM, "CPU backend: compiled code is malformed (a bug in minic)");
    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    LLVMOrcJITTargetMachineBuilderRef jtmb;
    LLVMErrorRef err = LLVMOrcJITTargetMachineBuilderDetectHost(&jtmb);
    if (err) {
        LLVMOrcDisposeLLJITBuilder(builder);
        return fail_llvm(err, "detecting the host for the JIT");
    }
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder, jtmb);
    if ((err = LLVMOrcCreateLLJIT(&s->jit, builder)))
        return fail_llvm(err, "creating the JIT");
    LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(s->jit), keep_jit_error, s);
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(s->jit);
    LLVMJITSymbolFlags callable = {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0};
    LLVMJITCSymbolMapPair half[2] = {
        {LLVMOrcLLJITMangleAndIntern(s->jit, "__gnu_f2h_ieee"), {(uintptr_t)f32_to_f16_bits, callable}},
        {LLVMOrcLLJITMangleAndIntern(s->jit, "__gnu_h2f_ieee"), {(uintptr_t)f16_bits_to_f32, callable}},
    };
    if ((err = LLVMOrcJITDylibDefine(jd, LLVMOrcAbsoluteSymbols(half, 2))))
        return fail_llvm(err, "defining the f16 conversions");
    /* memset/memcpy that the optimizer introduces come from the process */
    LLVMOrcDefinitionGeneratorRef gen;
    if ((err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(s->jit), NULL, NULL)))
        return fail_llvm(err, "creating the JIT's symbol resolver");
    LLVMOrcJITDylibAddGenerator(jd, gen);
    mc_status st = define_host_functions(s->jit, jd);
    if (st != MC_OK)
        return st;
    for (int i = 0; i < n; i++) {
        LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(objs[i], sizes[i], "minic-kernels");
        if ((err = LLVMOrcLLJITAddObjectFile(s->jit, jd, buf)))
            return fail_jit(s, err, "loading compiled code");
    }
    for (int i = 0; i < nnames; i++) {
        LLVMOrcExecutorAddress addr = 0;
        if ((err = LLVMOrcLLJITLookup(s->jit, &addr, names[i])))
            return fail_jit(s, err, "linking a kernel");
        fns[i] = (void *)(uintptr_t)addr;
    }
    return MC_OK;
}

void llvm_jit_dispose(llvm_jit *s)
{
    if (s->jit) {
        LLVMErrorRef err = LLVMOrcDisposeLLJIT(s->jit);
        if (err)
            LLVMConsumeError(err);
        s->jit = NULL;
    }
}
