/* The machine the CPU backend generates code for (llvm.h's llvm_target): the host, as LLVM
 * detects it, or a CPU named by mc_options.cpu_target, with the features LLVM gives that CPU.
 *
 * A named CPU's facts (its vector width and FMA, whether this machine can run its code, and
 * which features it would miss) are asked of LLVM itself (target_facts), once per name and
 * process; the names are first checked against LLVM 14's list of x86-64 CPUs, since LLVM's C
 * API cannot say which names it knows.
 */
#include "backends/cpu/llvm.h"

#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static llvm_target host;
static mc_status host_status = MC_OK;
static char host_error[512];
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void init_host(void)
{
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
        host_status = MC_ERR_SYSTEM;
        snprintf(host_error, sizeof host_error, "LLVM has no code generator for this machine");
        return;
    }
    host.triple = LLVMGetDefaultTargetTriple();
    host.cpu = LLVMGetHostCPUName();
    host.features = LLVMGetHostCPUFeatures();
    if (!host.features)
        host.features = "";
    host.vector_bits = strstr(host.features, "+avx512f") ? 512 : strstr(host.features, "+avx") ? 256 : 128;
    host.fma = strstr(host.features, "+fma") != NULL;
    host.runnable = true;
}

mc_status llvm_host_probe(void)
{
    pthread_once(&host_once, init_host);
    if (host_status != MC_OK)
        return mc_fail(host_status, "CPU backend: %s", host_error);
    return MC_OK;
}

const char LLVM_MACHINE_SETTINGS[] = "opt-level aggressive reloc default code-model jit-default";

LLVMTargetMachineRef llvm_target_machine(const llvm_target *t, char **error)
{
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(t->triple, &target, error))
        return NULL;
    /* LLVM_MACHINE_SETTINGS (above; in the cache key) names these settings: change both */
    return LLVMCreateTargetMachine(target, t->triple, t->cpu, t->features, LLVMCodeGenLevelAggressive,
                                   LLVMRelocDefault, LLVMCodeModelJITDefault);
}

/* mc_options.cpu_target names a CPU as LLVM does. LLVM's C API cannot tell whether a name is
 * one it knows (it prints a warning for an unknown one and goes on, and aborts the process for
 * a CPU without 64-bit mode), so the names are checked against this list first: every x86-64
 * CPU that LLVM 14 knows (`llc-14 -march=x86-64 -mcpu=help`, less those without 64-bit mode
 * and "generic"). Everything else about a CPU comes from LLVM (target_facts). */
static const char *const X86_64_CPUS[] = {
    "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4",
    "nocona", "core2", "penryn", "bonnell", "atom", "silvermont", "slm", "goldmont", "goldmont-plus",
    "tremont", "nehalem", "corei7", "westmere", "sandybridge", "corei7-avx", "ivybridge", "core-avx-i",
    "haswell", "core-avx2", "broadwell", "skylake", "skylake-avx512", "skx", "cascadelake",
    "cooperlake", "cannonlake", "icelake-client", "rocketlake", "icelake-server", "tigerlake",
    "sapphirerapids", "alderlake", "knl", "knm",
    "k8", "opteron", "athlon64", "athlon-fx", "k8-sse3", "opteron-sse3", "athlon64-sse3", "amdfam10",
    "barcelona", "btver1", "btver2", "bdver1", "bdver2", "bdver3", "bdver4", "znver1", "znver2", "znver3",
};
#define NX86_64_CPUS ((int)(sizeof X86_64_CPUS / sizeof X86_64_CPUS[0]))

/* Edit distance of two short names (for "did you mean"). */
static int edit_distance(const char *a, const char *b)
{
    int n = (int)strlen(b), row[64];
    if (n >= 64 || strlen(a) >= 64)
        return 64;
    for (int j = 0; j <= n; j++)
        row[j] = j;
    for (const char *p = a; *p; p++) {
        int diag = row[0];
        row[0]++;
        for (int j = 1; j <= n; j++) {
            int up = row[j], best = diag + (*p != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[n];
}

static bool has_call(LLVMValueRef fn)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
            if (LLVMIsACallInst(in))
                return true;
    return false;
}

/* A function `void NAME()` for cpu and features that calls `callee` (or only returns). */
static LLVMValueRef probe_function(LLVMModuleRef mod, LLVMBuilderRef b, const char *name, const char *cpu,
                                   const char *features, LLVMValueRef callee)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef ty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), NULL, 0, 0);
    LLVMValueRef fn = LLVMAddFunction(mod, name, ty);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(ctx, "target-cpu", 10, cpu, (unsigned)strlen(cpu)));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(ctx, "target-features", 15, features, (unsigned)strlen(features)));
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    if (callee)
        LLVMBuildCall2(b, ty, callee, NULL, 0, "");
    LLVMBuildRetVoid(b);
    return fn;
}

/* The facts of CPU t->cpu with its own features, asked of LLVM's inliner: it inlines a function
 * compiled for one CPU into a function compiled for another only where the caller has every
 * instruction set feature of the callee (x86's areInlineCompatible). So, with `callee` for the
 * named CPU:
 *   - a caller for the host (its CPU and detected features) inlines it iff this machine can
 *     run code for the named CPU (t->runnable);
 *   - a caller for the named CPU less one feature F ("-F") does not inline it iff the named CPU
 *     has F: so for the features the host reports missing ("-F" in its list) which of them the
 *     CPU needs (t->lacks), and whether it has avx512f, avx and fma, from which the vector width
 *     and the use of FMA follow as they do for the host.
 * One small module and one run of the inliner, once per name and process. */
static mc_status target_facts(llvm_target *t)
{
    const char *probes[] = {"avx512f", "avx", "fma"};
    enum { NPROBES = 3 };
    /* the host's missing features: "-F" items of its list */
    char *list = strdup(host.features);
    int cap = NPROBES + 1;
    for (const char *p = host.features; *p; p++)
        cap += *p == ',';
    const char **feature = calloc((size_t)cap, sizeof *feature);
    LLVMValueRef *caller = calloc((size_t)cap, sizeof *caller);
    if (!list || !feature || !caller) {
        free(list);
        free(feature);
        free(caller);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    int n = 0;
    for (int i = 0; i < NPROBES; i++)
        feature[n++] = probes[i];
    for (char *save = NULL, *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save))
        if (item[0] == '-' && item[1] && n < cap)
            feature[n++] = item + 1;

    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("minic-cpu-probe", ctx);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMSetTarget(mod, t->triple);
    LLVMValueRef callee = probe_function(mod, b, "target", t->cpu, "", NULL);
    LLVMValueRef on_host = probe_function(mod, b, "host", host.cpu, host.features, callee);
    for (int i = 0; i < n; i++) {
        char name[32], less[80];
        snprintf(name, sizeof name, "less_%d", i);
        snprintf(less, sizeof less, "-%s", feature[i]);
        caller[i] = probe_function(mod, b, name, t->cpu, less, callee);
    }
    mc_status st = MC_OK;
    char *error = NULL;
    LLVMTargetMachineRef tm = llvm_target_machine(&host, &error);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMErrorRef err = tm ? LLVMRunPasses(mod, "cgscc(inline)", tm, opts) : NULL;
    if (!tm) {
        st = mc_fail(MC_ERR_SYSTEM, "CPU backend: no LLVM target for %s: %s", t->triple, error ? error : "?");
        LLVMDisposeMessage(error);
    } else if (err) {
        char *msg = LLVMGetErrorMessage(err);
        st = mc_fail(MC_ERR_SYSTEM, "CPU backend: asking LLVM about CPU '%s': %s", t->cpu, msg ? msg : "?");
        LLVMDisposeErrorMessage(msg);
    } else {
        bool has[NPROBES];
        for (int i = 0; i < NPROBES; i++)
            has[i] = has_call(caller[i]);
        t->vector_bits = has[0] ? 512 : has[1] ? 256 : 128;
        t->fma = has[2];
        t->runnable = !has_call(on_host);
        t->lacks[0] = '\0';
        for (int i = NPROBES; i < n; i++) {
            size_t at = strlen(t->lacks);
            if (has_call(caller[i]) && at + strlen(feature[i]) + 3 < sizeof t->lacks)
                snprintf(t->lacks + at, sizeof t->lacks - at, "%s%s", at ? ", " : "", feature[i]);
        }
        if (!t->runnable && !t->lacks[0])
            snprintf(t->lacks, sizeof t->lacks, "some of its features");
    }
    LLVMDisposePassBuilderOptions(opts);
    if (tm)
        LLVMDisposeTargetMachine(tm);
    LLVMDisposeBuilder(b);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    free(caller);
    free(feature);
    free(list);
    return st;
}

/* Named targets, each worked out once per process (target_facts) and kept until exit: programs
 * point at them. */
enum { MAX_NAMED = 16 };
static struct named_target {
    char name[32];
    llvm_target t;
} named[MAX_NAMED];
static int nnamed;
static pthread_mutex_t named_lock = PTHREAD_MUTEX_INITIALIZER;

/* The target that mc_options.cpu_target names: NULL, "" and "host" are the host. */
mc_status llvm_target_resolve(const char *name, const llvm_target **out)
{
    if (!name || !name[0] || !strcmp(name, "host")) {
        *out = &host;
        return MC_OK;
    }
    if (strncmp(host.triple, "x86_64", 6) != 0)
        return mc_fail(MC_ERR_INPUT, "CPU backend: CPU target '%s': only x86-64 CPUs can be named, and this "
                       "machine is %s (use host)", name, host.triple);
    int known = -1, nearest = 0;
    for (int i = 0; i < NX86_64_CPUS; i++) {
        if (!strcmp(name, X86_64_CPUS[i]))
            known = i;
        if (edit_distance(name, X86_64_CPUS[i]) < edit_distance(name, X86_64_CPUS[nearest]))
            nearest = i;
    }
    if (known < 0) {
        char hint[96] = "";
        if (edit_distance(name, X86_64_CPUS[nearest]) <= 2)
            snprintf(hint, sizeof hint, "did you mean '%s'? ", X86_64_CPUS[nearest]);
        return mc_fail(MC_ERR_INPUT, "CPU backend: unknown CPU target '%.64s': %sexpected host or an x86-64 CPU "
                       "as LLVM 14 names it, such as x86-64-v2, x86-64-v3, x86-64-v4, haswell, skylake-avx512, "
                       "icelake-server or znver3", name, hint);
    }
    pthread_mutex_lock(&named_lock);
    mc_status st = MC_OK;
    int i = 0;
    while (i < nnamed && strcmp(named[i].name, name) != 0)
        i++;
    if (i == nnamed && nnamed == MAX_NAMED) {
        st = mc_fail(MC_ERR_INPUT, "CPU backend: more than %d different CPU targets in one process", MAX_NAMED);
    } else if (i == nnamed) {
        struct named_target *e = &named[i];
        snprintf(e->name, sizeof e->name, "%s", X86_64_CPUS[known]);
        e->t = (llvm_target){.triple = host.triple, .cpu = e->name, .features = ""};
        if ((st = target_facts(&e->t)) == MC_OK)
            nnamed++;
    }
    if (st == MC_OK)
        *out = &named[i].t;
    pthread_mutex_unlock(&named_lock);
    return st;
}

/* Code for a target whose features this machine lacks would stop on an illegal instruction. */
mc_status llvm_target_check_runnable(const llvm_target *t)
{
    if (t->runnable)
        return MC_OK;
    return mc_fail(MC_ERR_SYSTEM, "CPU backend: this machine (%s) cannot run code compiled for CPU target '%s': "
                   "it lacks %s (such code can be compiled and dumped, not run)", host.cpu, t->cpu, t->lacks);
}
