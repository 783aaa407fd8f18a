/* The memory a process here may use (common/memory.h). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/memory.h"

/* A control group's memory limit from its file (0: none or unreadable). */
static double cgroup_limit(const char *path)
{
    FILE *f = fopen(path, "r");
    double v = 0.0;
    if (f) {
        char buf[64];
        if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9')
            v = strtod(buf, NULL);
        fclose(f);
    }
    return v;
}

double ps_memory_bytes(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    double mem = pages > 0 && size > 0 ? (double)pages * (double)size : 0.0;
    /* cgroup v2, then v1 (an unlimited v1 group reads as about 2^63) */
    const char *const limits[] = {"/sys/fs/cgroup/memory.max",
                                  "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        const double lim = cgroup_limit(limits[i]);
        if (lim > 0.0 && (mem == 0.0 || lim < mem))
            mem = lim;
    }
    return mem;
}
