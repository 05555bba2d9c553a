/*
 * lws_uv.c - an lws server context on the foreign libuv loop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lws_uv.h"

#define MAX_FDS 4096
#define MAX_WATCH 8

struct broker_lws {
	uv_loop_t *loop;
	struct lws_context *ctx;    /* set NULL by lws when destroyed (pcontext) */
	uv_timer_t timer;           /* starts the destroy, then watches for its end */
	int ticks;
	int watch[MAX_WATCH], n_watch;  /* fds lws opened at creation */
	int plug[MAX_WATCH], n_plug;    /* closed early by lws: held by a memfd */
	ino_t plug_ino[MAX_WATCH];
	void (*done)(void *ud);
	void *ud;
};

/*
 * Work-around for lws 4.1.6 + libuv (found by the exec client's
 * k8s/lws_loop.c, same approach): destroying a context closes its event
 * pipe's read end twice, once at the first lws_context_destroy() and again
 * from a uv close callback a few turns later. A file opened in between (a
 * client socket, a sandbox pipe) would get that number and be closed under
 * its owner. So the fds lws opened at creation are remembered, and those
 * the first call closed are held by a memfd placeholder until the context
 * is gone.
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

static void watch_new_fds(struct broker_lws *l, const int *before, int n_before)
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

static void plug_closed_fds(struct broker_lws *l)
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

static void unplug_fds(struct broker_lws *l)
{
	for (int i = 0; i < l->n_plug; i++) {
		struct stat st;
		if (fstat(l->plug[i], &st) == 0 && st.st_ino == l->plug_ino[i])
			close(l->plug[i]);
	}
	l->n_plug = 0;
}

int broker_lws_new(uv_loop_t *loop, unsigned timeout_secs, void *user,
                   struct broker_lws **out, struct cp_err *err)
{
	struct lws_context_creation_info info;
	void *loops[1] = { loop };
	struct broker_lws *l = calloc(1, sizeof *l);
	if (!l)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	l->loop = loop;
	lws_set_log_level(getenv("CP_LWS_DEBUG") ? 0x7ff : LLL_ERR, NULL);
	memset(&info, 0, sizeof info);
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
	               LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN;
	info.foreign_loops = loops;
	info.user = user;
	info.pcontext = &l->ctx;
	info.timeout_secs = timeout_secs;
	info.timeout_secs_ah_idle = timeout_secs; /* a slow client holding its headers */
	info.pt_serv_buf_size = 64 * 1024;
	info.max_http_header_data = 8 * 1024;
	info.max_http_header_pool = 2048;
	info.fd_limit_per_thread = 4096;
	int *before = malloc(MAX_FDS * sizeof *before);
	int n_before = before ? open_fds(before, MAX_FDS) : 0;
	l->ctx = lws_create_context(&info);
	if (l->ctx && before)
		watch_new_fds(l, before, n_before);
	free(before);
	if (!l->ctx) {
		free(l);
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "libwebsockets could not join the libuv loop "
		                  "(is libwebsockets-evlib-uv installed?)");
	}
	*out = l;
	return 0;
}

struct lws_context *broker_lws_context(const struct broker_lws *l)
{
	return l->ctx;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct broker_lws *l = h->data;
	void (*done)(void *ud) = l->done;
	void *ud = l->ud;
	unplug_fds(l);
	free(l);
	if (done)
		done(ud);
}

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

/* lws's static uv handles (timer, idle) live inside the context's block. */
static int lws_handles_left(struct broker_lws *l)
{
	struct inside in = { (const char *)l->ctx, (const char *)l->ctx + malloc_usable_size(l->ctx), 0 };
	uv_walk(l->loop, count_inside, &in);
	return in.n;
}

/*
 * lws 4.1 destroys a foreign-loop context in two calls: the first closes
 * every wsi and then lws's static uv handles; a second, once no lws handle
 * is left on the loop, frees the context and writes NULL to pcontext (made
 * earlier, it frees handles libuv still holds). Polled every 10 ms.
 */
static void on_timer(uv_timer_t *t)
{
	struct broker_lws *l = t->data;
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

void broker_lws_destroy(struct broker_lws *l, void (*done)(void *ud), void *ud)
{
	if (!l)
		return;
	l->done = done;
	l->ud = ud;
	uv_timer_init(l->loop, &l->timer);
	l->timer.data = l;
	uv_timer_start(&l->timer, on_timer, 0, 10);
}
