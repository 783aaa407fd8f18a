/* Files replaced atomically (common/atomic_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"

const char *ps_replace_refusal(const char *path)
{
    struct stat ls;
    if (!path || lstat(path, &ls) != 0 || S_ISREG(ls.st_mode))
        return NULL;
    return S_ISLNK(ls.st_mode) ? "is a symbolic link" : "not a regular file";
}

int ps_create_temp_beside(const char *path, int mode, char *tmp, size_t len)
{
    static unsigned counter;
    int fd = -1;
    if (!path || !tmp || len == 0) {
        errno = EINVAL;
        return -1;
    }
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        int n = snprintf(tmp, len, "%s.tmp-%ld-%u", path, (long)getpid(), counter++);
        if (n < 0 || (size_t)n >= len) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    return fd;
}

int ps_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t k = write(fd, p, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = 0;
            return -1;
        }
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* fsync of the directory that holds path; errors are ignored. */
static void sync_directory_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(n + 1);
    if (!dir)
        return;
    memcpy(dir, slash ? path : ".", n);
    dir[n] = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
}

/* Remove tmp after the failed step, errno kept. */
static ps_replace_step discard(const char *tmp, ps_replace_step step)
{
    int e = errno;
    unlink(tmp);
    errno = e;
    return step;
}

ps_replace_step ps_replace_finish(int fd, const char *tmp, const char *path, int flags)
{
    int st = fsync(fd);
    if (st != 0 && (flags & PS_REPLACE_SYNC_OPTIONAL) && (errno == EINVAL || errno == EROFS))
        st = 0;
    int e = errno;
    if (close(fd) != 0 && st == 0) {
        st = -1;
        e = errno;
    }
    errno = e;
    if (st != 0)
        return discard(tmp, PS_REPLACE_SYNC);
    if (rename(tmp, path) != 0)
        return discard(tmp, PS_REPLACE_RENAME);
    sync_directory_of(path);
    return PS_REPLACE_DONE;
}

ps_replace_step ps_replace_file(const char *path, int mode, const void *buf, size_t len,
                                char *tmp, size_t tmplen)
{
    int fd = ps_create_temp_beside(path, mode, tmp, tmplen);
    if (fd < 0)
        return PS_REPLACE_CREATE;
    if (ps_write_all(fd, buf, len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return discard(tmp, PS_REPLACE_WRITE);
    }
    return ps_replace_finish(fd, tmp, path, 0);
}
