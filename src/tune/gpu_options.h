/*
 * The GPU options of a solve (ps_options.gpu, persolve_gpu.h) as the
 * library reads them: NULL stands for the defaults.
 */
#ifndef PS_SRC_GPU_OPTIONS_H
#define PS_SRC_GPU_OPTIONS_H

#include "persolve_gpu.h"

/* o->gpu, or the defaults (tune cache read, heuristic shape) when it is
 * NULL; never NULL. o must not be NULL. */
const ps_gpu_options *ps_gpu_options_of(const ps_options *o);

/*
 * Check every field of *o->gpu (nothing when o->gpu is NULL): PS_ERR_OPTION,
 * logged through o with the field name ("options.gpu_block: ..."), else
 * PS_CONVERGED. Called by ps_options_validate.
 */
int ps_gpu_options_validate(const ps_options *o);

#endif /* PS_SRC_GPU_OPTIONS_H */
