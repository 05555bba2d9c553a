/*
 * fileio.h - read a whole file into memory, with a hard cap.
 *
 * The one whole-file reader of codepod (program sources, kubeconfigs and the
 * files they name, pod templates, secrets). It reads to the end rather than
 * trusting the file's size, so /proc files, pipes and stdin work too; more
 * than @max bytes is an error, never a silently cut file.
 *
 * Errors, with the file's name in the message ("PATH: ..."):
 *  CP_E_NOT_FOUND - the file does not exist (ENOENT);
 *  CP_E_IO        - it cannot be opened or read, or it is a directory;
 *  CP_E_TOO_BIG   - it holds more than @max bytes;
 *  CP_E_NOMEM     - the buffer could not grow.
 *
 * Ownership: the result is new (malloc'd), NUL-terminated after its @len
 * bytes (which may hold NUL themselves); the caller frees it with free().
 *
 * Context: blocking reads, for start-up and other moments off the event
 * loop's hot path (a token re-read); any thread.
 */
#ifndef CP_FILEIO_H
#define CP_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

/**
 * cp_read_file() - the whole of @path, at most @max bytes.
 * @len: receives the length (without the NUL); untouched on failure.
 *
 * Return: the contents, or NULL with @err set.
 */
char *cp_read_file(const char *path, size_t max, size_t *len, struct cp_err *err);

/**
 * cp_read_fd() - the rest of the open descriptor @fd, at most @max bytes
 * (stdin for a command line's "-"); @name is the file's name in messages.
 * @fd stays open. As cp_read_file() otherwise.
 */
char *cp_read_fd(int fd, const char *name, size_t max, size_t *len, struct cp_err *err);

/*
 * cp_read_small() - one read() of @path into @buf (at most @cap - 1 bytes,
 * NUL-terminated): for the kernel's pseudo-files (/proc, cgroupfs), which
 * give a small file whole in one read. Its length, or -1 (errno set); no
 * allocation, no cp_err: the callers treat a missing file as "gone".
 */
ssize_t cp_read_small(const char *path, char *buf, size_t cap);

#endif
