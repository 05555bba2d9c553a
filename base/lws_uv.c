/* lws_uv.c - an lws context on the foreign libuv loop, and its destroy. */
#include "base/lws_uv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/log.h"

#define MAX_WATCH 8
#define MAX_FDS 4096   /* open fds compared around lws_create_context() */
#define WAKE_MS 1000   /* lws timeouts run at least this often */
#define DESTROY_MS 1   /* polling for the end of the destroy */

struct cp_lws {
	struct lws_context *ctx; /* lws writes NULL here once destroyed (pcontext) */
	uv_loop_t *loop;
	uv_timer_t timer;        /* wakes lws's timeouts, then drives the destroy */
	int ticks;               /* destroy ticks */
	int destroying;
	void (*done)(void *ud);
	void *ud;
	int watch[MAX_WATCH];    /* fds lws opened at context creation */
	int n_watch;
	int plug[MAX_WATCH];     /* placeholders dup2()ed over closed ones */
	ino_t plug_ino[MAX_WATCH];
	int n_plug;
};

/*
 * Work-around for lws 4.1.6 + libuv: destroying a context closes its event
 * pipe twice. lws_destroy_event_pipe() closes both pipe fds at once (the
 * first lws_context_destroy()), and the uv close callback of the pipe's wsi
 * closes wsi->desc.sockfd (the read end) again on a later loop turn. If
 * anything opened a file in between (an exec socket, a client connection,
 * a sandbox pipe), it got that number and loses it: we saw a new exec
 * socket closed under libuv (epoll_ctl EBADF -> abort). So the fds lws
 * opened at creation are remembered, and those the first call closed are
 * occupied by a placeholder (a memfd, unique inode) until the context is
 * gone; a placeholder still in place then is closed by us.
 */
static int open_fds(int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de = NULL;
	int n = 0;
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL && n < max) {
		char *end = NULL;
		long fd = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name || fd == dirfd(d))
			continue;
		out[n++] = (int)fd;
	}
	closedir(d);
	return n;
}

/* The fd lists are on the heap: 2 x 16 KiB is too much for a stack frame. */
static void watch_new_fds(struct cp_lws *l, const int *before, int n_before)
{
	int *after = malloc(MAX_FDS * sizeof *after);
	int n_after = after ? open_fds(after, MAX_FDS) : 0;
	for (int i = 0; i < n_after && l->n_watch < MAX_WATCH; i++) {
		int seen = 0;
		for (int j = 0; j < n_before && !seen; j++)
			seen = before[j] == after[i];
		if (!seen)
			l->watch[l->n_watch++] = after[i];
	}
	free(after);
}

static void plug_closed_fds(struct cp_lws *l)
{
	for (int i = 0; i < l->n_watch; i++) {
		struct stat st;
		int fd = l->watch[i];
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			continue;
		int m = memfd_create("codepod-lws-fd-plug", MFD_CLOEXEC);
		if (m < 0)
			continue;
		if (m != fd && dup2(m, fd) < 0) {
			close(m);
			continue;
		}
		if (m != fd)
			close(m);
		if (fstat(fd, &st) == 0) {
			l->plug[l->n_plug] = fd;
			l->plug_ino[l->n_plug++] = st.st_ino;
		}
	}
}

static void unplug_fds(struct cp_lws *l)
{
	for (int i = 0; i < l->n_plug; i++) {
		struct stat st;
		if (fstat(l->plug[i], &st) == 0 && st.st_ino == l->plug_ino[i])
			close(l->plug[i]);
	}
	l->n_plug = 0;
}

/* libwebsockets' own log lines become codepod's JSON log lines (its
 * default writes plain text to stderr, which every other line of ours is
 * not): errors at error level, the rest at warn or debug. */
static void lws_emit(int level, const char *line)
{
	size_t n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	enum cp_log_level l = level & LLL_ERR ? CP_LOG_ERROR : level & LLL_WARN ? CP_LOG_WARN
	                                                                      : CP_LOG_DEBUG;
	cp_log(l, "lws.log", "message", json_stringn(line, n), NULL);
}

/*
 * Work-around for lws 4.1 on a foreign uv loop: lws services its timeouts
 * (handshake and headers, ah idle, keep-alive, lws_set_timeout() and
 * LWS_TO_KILL_ASYNC) only from its idle handler, which runs after lws I/O:
 * a silent peer would never time out, and a stream aborted from outside an
 * lws callback would not close. Waking the service once a second (through
 * its event pipe) runs them. The timer is unreferenced: it never keeps the
 * loop alive by itself.
 */
static void on_wake(uv_timer_t *t)
{
	struct cp_lws *l = t->data;
	if (l->ctx && !l->destroying)
		lws_cancel_service(l->ctx);
}

int cp_lws_new(uv_loop_t *loop, const struct lws_context_creation_info *info,
               int log_level, struct cp_lws **out, struct cp_err *err)
{
	struct lws_context_creation_info ci = *info;
	void *loops[1] = {loop};
	struct cp_lws *l = calloc(1, sizeof *l);
	int *before = NULL;
	int n_before = 0;

	*out = NULL;
	if (!l)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	l->loop = loop;
	ci.options |= LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN;
	ci.foreign_loops = loops;
	ci.pcontext = &l->ctx;
	lws_set_log_level(getenv("CP_LWS_DEBUG") ? 0x7ff : log_level, lws_emit);
	before = malloc(MAX_FDS * sizeof *before);
	n_before = before ? open_fds(before, MAX_FDS) : 0;
	l->ctx = lws_create_context(&ci);
	if (l->ctx && before)
		watch_new_fds(l, before, n_before);
	free(before);
	if (!l->ctx) {
		free(l);
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "libwebsockets could not join the libuv loop "
		                  "(is libwebsockets-evlib-uv installed?)");
	}
	uv_timer_init(loop, &l->timer);
	l->timer.data = l;
	uv_timer_start(&l->timer, on_wake, WAKE_MS, WAKE_MS);
	uv_unref((uv_handle_t *)&l->timer);
	*out = l;
	return 0;
}

struct lws_context *cp_lws_context(const struct cp_lws *l)
{
	return l->ctx;
}

/*
 * With a foreign loop lws 4.1 destroys a context in two calls: the first
 * closes every wsi (uv_close: WSI_DESTROY runs from the close callbacks on
 * the loop) and, once they are down, lws's static uv handles (timers, idle)
 * that live inside the context's own allocation; a second
 * lws_context_destroy() frees the context and writes NULL through
 * info.pcontext. Without the second call the context never goes (observed
 * with 4.1.6); made too early it frees handles libuv still holds (valgrind:
 * uv_run writing into the freed context). So the timer makes the second
 * call only once no handle on the loop lies inside the context's block
 * (malloc_usable_size bounds it), then waits for the NULL. The first call
 * is made from the timer too, so that cp_lws_destroy() may be called from
 * inside an lws callback.
 */
struct inside {
	const char *lo, *hi;
	int n;
};

static void count_inside(uv_handle_t *h, void *arg)
{
	struct inside *in = arg;
	const char *p = (const char *)h;
	if (p >= in->lo && p < in->hi)
		in->n++;
}

static int lws_handles_left(struct cp_lws *l)
{
	struct inside in;
	in.lo = (const char *)l->ctx;
	in.hi = in.lo + malloc_usable_size(l->ctx);
	in.n = 0;
	uv_walk(l->loop, count_inside, &in);
	return in.n;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct cp_lws *l = h->data;
	void (*done)(void *ud) = l->done;
	void *ud = l->ud;
	unplug_fds(l);
	free(l);
	if (done)
		done(ud);
}

static void on_destroy_tick(uv_timer_t *t)
{
	struct cp_lws *l = t->data;
	if (l->ctx && l->ticks++ == 0) {
		lws_context_destroy(l->ctx);
		plug_closed_fds(l);
	} else if (l->ctx && l->ticks >= 3 && lws_handles_left(l) == 0) {
		lws_context_destroy(l->ctx);
	}
	if (l->ctx)
		return;
	uv_timer_stop(t);
	uv_close((uv_handle_t *)t, on_timer_closed);
}

void cp_lws_destroy(struct cp_lws *l, void (*done)(void *ud), void *ud)
{
	if (!l || l->destroying)
		return;
	l->destroying = 1;
	l->done = done;
	l->ud = ud;
	/* The destroy keeps the loop running until it is complete. */
	uv_ref((uv_handle_t *)&l->timer);
	uv_timer_start(&l->timer, on_destroy_tick, 0, DESTROY_MS);
}
