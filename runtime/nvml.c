/* GPU clocks through NVML, for scaling the compute peak (docs/PROFILING.md, LESSONS.md: servers
 * are often clock limited). libnvidia-ml.so.1 is opened with dlopen at run time and never
 * linked, so minic runs where there is no driver; the few entry points it needs are declared
 * here with NVML's documented C signatures (opaque device handle, unsigned int clocks in MHz)
 * rather than taken from nvml.h, which is not installed everywhere CUDA is.
 *
 * MINIC_NVML=0 in the environment turns it off (tests use it for the "clocks unknown" path).
 */
#include "runtime/peaks.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef void *nvml_device;
enum { NVML_SUCCESS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };

typedef struct nvml_api {
    int (*init)(void);
    int (*shutdown)(void);
    int (*count)(unsigned *);
    int (*handle)(unsigned, nvml_device *);
    int (*name)(nvml_device, char *, unsigned);
    int (*clock)(nvml_device, int, unsigned *);
    int (*max_clock)(nvml_device, int, unsigned *);
} nvml_api;

static bool load(void **lib, nvml_api *api)
{
    const char *off = getenv("MINIC_NVML");
    if (off && !strcmp(off, "0"))
        return false;
    *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!*lib)
        return false;
    /* dlsym returns void *; the NVML symbols are functions with these signatures. */
#define SYM(field, name) (*(void **)&api->field = dlsym(*lib, name)) != NULL
    bool ok = SYM(init, "nvmlInit_v2") && SYM(shutdown, "nvmlShutdown") &&
              SYM(count, "nvmlDeviceGetCount_v2") &&
              SYM(handle, "nvmlDeviceGetHandleByIndex_v2") && SYM(name, "nvmlDeviceGetName") &&
              SYM(clock, "nvmlDeviceGetClockInfo") && SYM(max_clock, "nvmlDeviceGetMaxClockInfo");
#undef SYM
    if (!ok) {
        dlclose(*lib);
        *lib = NULL;
    }
    return ok;
}

bool mc_nvml_clocks(const char *device, mc_clocks *c)
{
    memset(c, 0, sizeof *c);
    void *lib = NULL;
    nvml_api api;
    if (!load(&lib, &api))
        return false;
    if (api.init() != NVML_SUCCESS) {
        dlclose(lib);
        return false;
    }
    unsigned n = 0;
    nvml_device dev = NULL, first = NULL;
    if (api.count(&n) == NVML_SUCCESS)
        for (unsigned i = 0; i < n && !dev; i++) {
            nvml_device d;
            char name[96] = "";
            if (api.handle(i, &d) != NVML_SUCCESS)
                continue;
            if (!first)
                first = d;
            if (device && api.name(d, name, sizeof name) == NVML_SUCCESS && !strcmp(name, device))
                dev = d;
        }
    if (!dev)
        dev = first;
    unsigned sm = 0, sm_max = 0, mem = 0, mem_max = 0;
    if (dev && api.clock(dev, NVML_CLOCK_SM, &sm) == NVML_SUCCESS &&
        api.max_clock(dev, NVML_CLOCK_SM, &sm_max) == NVML_SUCCESS && sm_max > 0) {
        api.clock(dev, NVML_CLOCK_MEM, &mem);
        api.max_clock(dev, NVML_CLOCK_MEM, &mem_max);
        *c = (mc_clocks){.known = true, .sm_mhz = sm, .sm_max_mhz = sm_max, .mem_mhz = mem,
                         .mem_max_mhz = mem_max};
    }
    api.shutdown();
    dlclose(lib);
    return c->known;
}
