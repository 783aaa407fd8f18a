/*
 * Returning a status with a message: the library's functions that take a
 * message buffer (validation, presets, the CLI's parser) fill it and
 * return the status in one call.
 */
#ifndef PS_SRC_COMMON_STATUS_H
#define PS_SRC_COMMON_STATUS_H

#include <stddef.h>

#include "common/log.h" /* PS_PRINTF */

/* Format the message into buf[len] (nothing if buf is NULL or len 0) and
 * return status. */
int ps_status_msg(char *buf, size_t len, int status, const char *fmt, ...) PS_PRINTF(4, 5);

#endif /* PS_SRC_COMMON_STATUS_H */
