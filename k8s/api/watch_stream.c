/* watch_stream.c - newline-delimited watch events, fed in arbitrary chunks. */
#include "k8s/api/watch_stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

struct k8s_watch {
	/* Bytes received, [start, len) not yet consumed. Unbounded: each line is
	 * held to max_line, the number of lines to what the caller leaves. */
	struct cp_buf buf;
	size_t start;     /* first unconsumed byte */
	size_t scan;      /* bytes before this offset hold no newline */
	size_t max_line;
	size_t tail;      /* length of the current unterminated line */
	int finished;
	int dead;         /* sticky error code, 0 when healthy */
	struct cp_err dead_err;
};

static const char *const type_names[] = {
	[K8S_WATCH_ADDED] = "ADDED", [K8S_WATCH_MODIFIED] = "MODIFIED",
	[K8S_WATCH_DELETED] = "DELETED", [K8S_WATCH_BOOKMARK] = "BOOKMARK",
	[K8S_WATCH_ERROR] = "ERROR",
};

const char *k8s_watch_type_name(enum k8s_watch_type t)
{
	if (t < K8S_WATCH_ADDED || t > K8S_WATCH_ERROR)
		return "?";
	return type_names[t];
}

struct k8s_watch *k8s_watch_new(size_t max_line)
{
	if (max_line == 0)
		return NULL;
	struct k8s_watch *w = calloc(1, sizeof *w);
	if (w) {
		w->max_line = max_line;
		cp_buf_init(&w->buf, SIZE_MAX);
	}
	return w;
}

void k8s_watch_free(struct k8s_watch *w)
{
	if (!w)
		return;
	cp_buf_free(&w->buf);
	free(w);
}

size_t k8s_watch_pending(const struct k8s_watch *w)
{
	return cp_buf_len(&w->buf) - w->start;
}

static int fail(struct k8s_watch *w, struct cp_err *err)
{
	if (err)
		*err = w->dead_err;
	return w->dead;
}

/* Before @add more bytes: drop the consumed prefix when it is half the
 * buffer or when keeping it would make the buffer grow. */
static void compact(struct k8s_watch *w, size_t add)
{
	size_t len = cp_buf_len(&w->buf);
	if (w->start > 0 && (w->start >= len / 2 || len + add > cp_buf_cap(&w->buf))) {
		cp_buf_tail(&w->buf, len - w->start);
		w->scan -= w->start;
		w->start = 0;
	}
}

int k8s_watch_feed(struct k8s_watch *w, const void *buf, size_t len,
                   struct cp_err *err)
{
	if (w->dead)
		return fail(w, err);
	if (w->finished)
		return cp_err_set(err, CP_E_STATE, "watch: feed after finish");
	/* Check the line limit before buffering, so a huge line is refused
	 * after at most max_line bytes are held. */
	const char *p = buf;
	size_t tail = w->tail;
	for (size_t i = 0; i < len; i++) {
		const char *nl = memchr(p + i, '\n', len - i);
		size_t run = nl ? (size_t)(nl - (p + i)) : len - i;
		if (tail + run > w->max_line) {
			w->dead = cp_err_set(&w->dead_err, CP_E_TOO_BIG,
			                     "watch: event line longer than %zu bytes", w->max_line);
			return fail(w, err);
		}
		if (!nl) {
			tail += run;
			break;
		}
		tail = 0;
		i += run;
	}
	if (len == 0)
		return 0;
	compact(w, len);
	if (cp_buf_add(&w->buf, buf, len, NULL))
		return cp_err_set(err, CP_E_NOMEM, "watch: out of memory buffering %zu bytes", len);
	w->tail = tail;
	return 0;
}

int k8s_watch_finish(struct k8s_watch *w, struct cp_err *err)
{
	if (w->dead)
		return fail(w, err);
	w->finished = 1;
	return 0;
}

void k8s_watch_event_release(struct k8s_watch_event *ev)
{
	if (!ev)
		return;
	json_decref(ev->object);
	free(ev->resource_version);
	k8s_status_release(&ev->status);
	memset(ev, 0, sizeof *ev);
}

static enum k8s_watch_type type_of(const char *s)
{
	for (int t = K8S_WATCH_ADDED; t <= K8S_WATCH_ERROR; t++)
		if (strcmp(s, type_names[t]) == 0)
			return (enum k8s_watch_type)t;
	return 0;
}

/* Parse one line (no newline) into @ev. */
static int parse_line(const char *line, size_t n, struct k8s_watch_event *ev,
                      struct cp_err *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(line, n, 0, &jerr);
	int rc = 0;
	if (!root) {
		rc = cp_err_set(err, CP_E_PARSE, "watch: event is not JSON: %s (column %d)",
		                jerr.text, jerr.column);
		goto done;
	}
	const json_t *type = json_object_get(root, "type");
	json_t *obj = json_object_get(root, "object");
	if (!json_is_string(type) || !json_is_object(obj)) {
		rc = cp_err_set(err, CP_E_PARSE, "watch: event without a type string and an object");
		goto done;
	}
	ev->type = type_of(json_string_value(type));
	if (!ev->type) {
		rc = cp_err_set(err, CP_E_PARSE, "watch: unknown event type \"%.40s\"",
		                json_string_value(type));
		goto done;
	}
	ev->object = json_incref(obj);
	const json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
	if (json_is_string(rv) && json_string_length(rv) > 0) {
		ev->resource_version = strdup(json_string_value(rv));
		if (!ev->resource_version) {
			rc = cp_err_set(err, CP_E_NOMEM, "watch: out of memory");
			goto done;
		}
	}
	if (ev->type == K8S_WATCH_ERROR) {
		rc = k8s_status_from_json(obj, 0, &ev->status, err);
		if (rc)
			goto done;
		ev->expired = ev->status.code == 410;
	}
done:
	json_decref(root);
	if (rc)
		k8s_watch_event_release(ev);
	return rc;
}

int k8s_watch_next(struct k8s_watch *w, struct k8s_watch_event *ev,
                   struct cp_err *err)
{
	memset(ev, 0, sizeof *ev);
	if (w->dead)
		return fail(w, err);
	for (;;) {
		const char *base = cp_buf_ptr(&w->buf) + w->start;
		size_t avail = cp_buf_len(&w->buf) - w->start;
		size_t from = w->scan > w->start ? w->scan - w->start : 0;
		const char *nl = avail > from ? memchr(base + from, '\n', avail - from) : NULL;
		size_t n;
		if (nl) {
			n = (size_t)(nl - base);
			w->start += n + 1;
		} else if (w->finished && avail > 0) {
			n = avail;
			w->start += n;
		} else {
			w->scan = cp_buf_len(&w->buf);
			return 0;
		}
		w->scan = w->start;
		size_t m = n;
		if (m > 0 && base[m - 1] == '\r')
			m--;
		size_t k = 0;
		while (k < m && (base[k] == ' ' || base[k] == '\t' || base[k] == '\r'))
			k++;
		if (k == m)
			continue; /* blank line */
		int rc = parse_line(base, m, ev, err);
		if (rc == CP_E_PARSE && !nl)
			return cp_err_set(err, CP_E_PARSE,
			                  "watch: stream ended inside an event (%zu bytes truncated)", n);
		return rc ? rc : 1;
	}
}
