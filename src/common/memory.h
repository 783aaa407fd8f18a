/*
 * The memory a process here may use: what the problem reader and the
 * presets check a problem's arrays against before they allocate them.
 */
#ifndef PS_SRC_COMMON_MEMORY_H
#define PS_SRC_COMMON_MEMORY_H

/* Bytes: the machine's physical memory, or the control group's limit
 * where it is lower (0: unknown). */
double ps_memory_bytes(void);

#endif /* PS_SRC_COMMON_MEMORY_H */
