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

#endif
