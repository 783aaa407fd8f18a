/*
 * Files replaced atomically: the new contents go to a new temporary file
 * beside the destination, which is flushed to disk, renamed over the
 * destination and its directory synced, so that the path always holds
 * either the old file or the whole new one. The CLI's checkpoints, the
 * tune cache and the HDF5 result files are written this way.
 */
#ifndef PS_SRC_ATOMIC_FILE_H
#define PS_SRC_ATOMIC_FILE_H

#include <stddef.h>

/* The most characters a temporary name adds to its path (".tmp-PID-N"). */
#define PS_TEMP_SUFFIX_MAX 40

/* Why path cannot be replaced (the rename replaces the path itself, so
 * only a regular file or no file is): "is a symbolic link", "not a
 * regular file", or NULL when it can. */
const char *ps_replace_refusal(const char *path);

/*
 * A new, empty file beside `path`, for a write that is renamed over it:
 * path.tmp-PID-N, never an existing file (O_EXCL), created with `mode`
 * (less the umask); its name goes into tmp[len]. Returns the descriptor,
 * open for writing, or -1 with errno set (ENAMETOOLONG: tmp[len] is too
 * short for the name).
 */
int ps_create_temp_beside(const char *path, int mode, char *tmp, size_t len);

/* Write all of buf[len] to fd, through short writes and EINTR. 0, or -1
 * with errno set (errno 0: a write made no progress). */
int ps_write_all(int fd, const void *buf, size_t len);

/* The step of a replacement that failed. */
typedef enum ps_replace_step {
    PS_REPLACE_DONE = 0, /* path holds the new file */
    PS_REPLACE_CREATE,   /* creating the temporary file */
    PS_REPLACE_WRITE,    /* writing it (errno 0: no progress) */
    PS_REPLACE_SYNC,     /* its fsync or close */
    PS_REPLACE_RENAME,   /* the rename over path */
} ps_replace_step;

/* ps_replace_finish: a file system that cannot sync files (fsync fails
 * with EINVAL or EROFS) is no error. */
#define PS_REPLACE_SYNC_OPTIONAL 1

/*
 * Put the temporary file tmp (open as fd, which this closes) in place of
 * path: fsync, close, rename over path, then fsync path's directory (best
 * effort: the rename is durable once it is). flags: 0 or
 * PS_REPLACE_SYNC_OPTIONAL. On failure tmp is removed and errno says why.
 */
ps_replace_step ps_replace_finish(int fd, const char *tmp, const char *path, int flags);

/*
 * Replace path by buf[len] (mode as for ps_create_temp_beside): the
 * temporary file (its name in tmp[tmplen]), the write and
 * ps_replace_finish. On failure tmp is removed and errno says why.
 */
ps_replace_step ps_replace_file(const char *path, int mode, const void *buf, size_t len,
                                char *tmp, size_t tmplen);

#endif /* PS_SRC_ATOMIC_FILE_H */
