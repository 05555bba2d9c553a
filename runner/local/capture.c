/*
 * capture.c - run a command, collect its output (blocking; see capture.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/local/capture.h"

/* In the child: wire stdin/stdout/stderr/fd 3, then exec. Never returns. */
static void child_exec(const char *const *argv, int out_fd, int fd3, unsigned flags)
{
	int devnull = open("/dev/null", O_RDWR);
	dup2(out_fd, 1);
	if (flags & LOCAL_CAPTURE_STDERR)
		dup2(out_fd, 2);
	else if (devnull >= 0)
		dup2(devnull, 2);
	if (devnull >= 0)
		dup2(devnull, 0);
	/* after stdin: /dev/null may itself have landed on fd 3. dup2 onto the
	 * same number keeps close-on-exec, so that case clears it instead. */
	if (fd3 == 3)
		fcntl(3, F_SETFD, 0);
	else if (fd3 >= 0)
		dup2(fd3, 3);
	execvp(argv[0], (char *const *)argv);
	_exit(127);
}

int local_capture_run(const char *const *argv, int fd3, unsigned flags, char *out, size_t cap)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC))
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0)
		child_exec(argv, fds[1], fd3, flags);
	close(fds[1]);
	size_t n = 0;
	while (n < cap - 1) {
		ssize_t r = read(fds[0], out + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	out[n] = '\0';
	close(fds[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
