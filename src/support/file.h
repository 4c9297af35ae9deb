/* Opening files the library reads (checkpoints, the rendezvous id, cached code). */
#ifndef TGC_SUPPORT_FILE_H
#define TGC_SUPPORT_FILE_H

#include <stddef.h>

/* Opens path for reading only when it is a regular file. The open itself is non-blocking
 * (O_NONBLOCK, cleared again once the file is known to be regular), so a named pipe, a
 * terminal or a device at path is refused at once instead of blocking the caller until a
 * writer appears. Returns the descriptor (close-on-exec; *size, when not NULL, its size in
 * bytes), or -1 with errno set (ENOENT and the like from the open; EISDIR for a directory,
 * EINVAL for any other file that is not regular) and *why, when not NULL, a short text for a
 * message ("No such file or directory", "is a directory", "is not a regular file (a pipe,
 * socket or device)"). */
int tgc_file_open_read(const char *path, size_t *size, const char **why);

/* Reads exactly n bytes of fd into buf, retrying interrupted reads. Returns 1 when all n
 * were read; 0 otherwise, with errno set by the failed read, or 0 when the file ended
 * first. *got, when not NULL, is the number of bytes read either way. */
int tgc_file_read_all(int fd, void *buf, size_t n, size_t *got);
/* Writes all n bytes of buf to fd, retrying interrupted writes. Returns 1 when all were
 * written; 0 otherwise, with errno set by the failed write, or 0 when a write made no
 * progress. */
int tgc_file_write_all(int fd, const void *buf, size_t n);

#endif
