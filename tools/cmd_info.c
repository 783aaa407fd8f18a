/*
 * persolve info: version, build features and the GPUs the library sees.
 * With --backend gpu it also exits 5 when no GPU is usable (the report
 * printed all the same), so scripts can test for one.
 */
#include "cmd.h"

#include <unistd.h>

#include <hdf5.h>

#include "cuda/gpu.h"

/* --backend gpu without a usable GPU: exit 5, saying why. */
static int info_code(const ps_cli *cli)
{
    if (cli->opts.backend != PS_BACKEND_GPU)
        return PS_EXIT_OK;
    ps_options o = cli->opts;
    ps_cli_log log;
    if (ps_cli_check_options(&o, &log) != PS_EXIT_OK)
        return PS_EXIT_USAGE;
    int st = ps_gpu_usable(&o);
    if (st == 0)
        return PS_EXIT_OK;
    ps_cli_error("info --backend gpu: no usable GPU (%s)",
                 log.msg[0] ? log.msg : !ps_have_cuda() ? "built without CUDA" : ps_strerror(st));
    return PS_EXIT_BACKEND;
}

int ps_cmd_info(const ps_cli *cli)
{
    unsigned maj = 0, min = 0, rel = 0;
    char h5ver[32];
    H5get_libversion(&maj, &min, &rel);
    snprintf(h5ver, sizeof h5ver, "%u.%u.%u", maj, min, rel);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int ngpu = ps_gpu_count();
    if (ngpu < 0)
        ngpu = 0;

    if (cli->json) {
        printf("{\n  \"version\": ");
        ps_json_string(stdout, ps_version());
        printf(",\n  \"cuda\": %s,\n  \"openmp\": %s,\n  \"hdf5\": ",
               ps_have_cuda() ? "true" : "false",
               ps_have_openmp() ? "true" : "false");
        ps_json_string(stdout, h5ver);
        printf(",\n  \"cpu_cores\": %ld,\n  \"gpus\": [", cores);
        for (int i = 0; i < ngpu; i++) {
            char buf[256] = "";
            ps_gpu_describe(i, buf, sizeof buf);
            printf("%s\n    ", i ? "," : "");
            ps_json_string(stdout, buf);
        }
        printf("%s]\n}\n", ngpu ? "\n  " : "");
        return info_code(cli);
    }

    printf("persolve %s\n", ps_version());
    printf("build      CUDA %s, OpenMP %s, HDF5 %s\n",
           ps_have_cuda() ? "yes" : "no", ps_have_openmp() ? "yes" : "no",
           h5ver);
    printf("CPU        %ld cores online\n", cores);
    if (ngpu == 0) {
        printf("GPUs       none\n");
        printf("no GPU: the CPU backend will run%s\n",
               ps_have_cuda() ? "" : " (built without CUDA)");
    }
    for (int i = 0; i < ngpu; i++) {
        char buf[256] = "";
        if (ps_gpu_describe(i, buf, sizeof buf) != 0)
            snprintf(buf, sizeof buf, "(cannot describe)");
        printf("GPU %d      %s\n", i, buf);
    }
    return info_code(cli);
}
