/*
 * capture.h - run a command to completion and collect the start of its
 * output: the start-up checks (finding Node, probing bubblewrap, the
 * sandbox probe) all need exactly this.
 *
 * Context: local_capture_run() BLOCKS (fork, exec, read, waitpid). Call it only
 * before the event loop starts; never from a loop callback.
 *
 * Ownership: the caller owns @argv and @out; nothing is allocated.
 */
#ifndef LOCAL_CAPTURE_H
#define LOCAL_CAPTURE_H

#include <stddef.h>

enum local_capture_flags {
	LOCAL_CAPTURE_STDERR = 1, /* the command's stderr joins @out (else /dev/null) */
};

/*
 * local_capture_run - run @argv (looked up on PATH) with stdin on /dev/null and
 * stdout into @out, NUL-terminated, at most @cap - 1 bytes (the rest is not
 * read; a command still writing then sees a closed pipe). @fd3, if >= 0, is
 * handed to the command as its fd 3. Returns the command's exit status, 127
 * if it could not be executed, -1 if it could not be started or was killed
 * by a signal. @cap must be at least 1.
 */
int local_capture_run(const char *const *argv, int fd3, unsigned flags, char *out, size_t cap);

#endif
