/*
 * Error reporting without printing: a status goes up the call chain, and
 * the optional log callback of ps_options receives file:line and a message.
 */
#ifndef PS_SRC_LOG_H
#define PS_SRC_LOG_H

#include "persolve.h"

#if defined(__GNUC__)
#define PS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PS_PRINTF(a, b)
#endif

/* Format a message and pass it to o->log (if o and o->log are set). */
void ps_log(const ps_options *o, int level, const char *file, int line,
            const char *fmt, ...) PS_PRINTF(5, 6);

/* Return `status` from the current function, logging the failed condition. */
#define PS_RETURN_ERROR_IF(o, cond, status, ...)                              \
    do {                                                                      \
        if (cond) {                                                           \
            ps_log((o), PS_LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__);       \
            return (status);                                                  \
        }                                                                     \
    } while (0)

#endif /* PS_SRC_LOG_H */
