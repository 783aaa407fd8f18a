/* Internal helpers over ps_options shared by the backends. */
#ifndef PS_SRC_OPTIONS_H
#define PS_SRC_OPTIONS_H

#include "persolve.h"

/* The line search's relative noise allowance (ps_options.fnoise, or its
 * automatic value for the precision). */
double ps_options_fnoise(const ps_options *o);

#endif /* PS_SRC_OPTIONS_H */
