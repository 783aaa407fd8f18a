/*
 * The log callback of ps_options (common/log.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"

void ps_log(const ps_options *o, int level, const char *file, int line,
            const char *fmt, ...)
{
    if (!o || !o->log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    o->log(o->log_user, level, file, line, msg);
}
