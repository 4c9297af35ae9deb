/* tgc_file_open_read: the one way the library opens a file it reads. */
#include "support/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tgc_file_open_read(const char *path, size_t *size, const char **why)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (why)
            *why = strerror(errno);
        return -1;
    }
    struct stat sb;
    int err = 0;
    const char *text = NULL;
    if (fstat(fd, &sb) != 0) {
        err = errno;
        text = strerror(err);
    } else if (!S_ISREG(sb.st_mode)) {
        err = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;
        text = S_ISDIR(sb.st_mode) ? "is a directory"
                                   : "is not a regular file (a pipe, socket or device)";
    } else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
            err = errno;
            text = strerror(err);
        }
    }
    if (err) {
        close(fd);
        if (why)
            *why = text;
        errno = err;
        return -1;
    }
    if (size)
        *size = (size_t)sb.st_size;
    return fd;
}

int tgc_file_read_all(int fd, void *buf, size_t n, size_t *got)
{
    char *p = buf;
    size_t done = 0;
    int ok = 1;
    while (done < n) {
        ssize_t r = read(fd, p + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            ok = 0;
            break;
        }
        done += (size_t)r;
    }
    if (got)
        *got = done;
    return ok;
}

int tgc_file_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = 0;
            return 0;
        }
        p += w;
        n -= (size_t)w;
    }
    return 1;
}
