/* exec.c - Kubernetes exec over WebSocket: the lws glue (codec: exec_frame.c). */
#include "k8s/api/pod_exec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libwebsockets.h>

#include "k8s/api/lws_loop.h"
#include "k8s/api/status.h"

#define PROTO_V5 "v5.channel.k8s.io"
#define PROTO_V4 "v4.channel.k8s.io"
#define LOCAL_PROTO "k8s-exec"
#define RX_BUF (64u * 1024u)
#define MIN_ALLOC 4096u
#define DIRECT_MAX 16384u /* stdin writes up to this size may go out at once */

/* One outgoing message: LWS_PRE headroom, then [channel][payload]. */
struct qmsg {
	struct qmsg *next;
	size_t len; /* channel byte + payload */
	size_t cap; /* room after LWS_PRE */
	unsigned char buf[];
};

struct k8s_exec {
	struct k8s_exec *next, *prev; /* the client's live streams */
	struct k8s_exec_client *c;
	struct lws *wsi;
	struct k8s_exec_cbs cbs;
	void *ud;
	struct k8s_exec_reasm *reasm;
	struct qmsg *qhead, *qtail;
	size_t queued;
	int proto;
	int close_code;          /* the server's close frame code, or 0 */
	char chosen[32];         /* the negotiated subprotocol */
	unsigned starting : 1;   /* inside lws_client_connect_via_info() */
	unsigned destroyed : 1;  /* lws destroyed the wsi while starting */
	unsigned failed : 1;     /* CLIENT_CONNECTION_ERROR seen */
	unsigned close_pending : 1, close_sent : 1;
	unsigned over_high : 1;
	unsigned ending : 1;     /* Status received or aborted: drop the rest */
	unsigned have_result : 1;
	unsigned got_output : 1;
	struct k8s_exec_exit result;
};

struct k8s_exec_client {
	struct k8s_lws *lws;
	struct k8s_exec_opts opts;
	lws_retry_bo_t retry;
	char *token;
	struct k8s_exec *streams;
};

static void set_result(struct k8s_exec *e, int lost, enum cp_code error,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void set_result(struct k8s_exec *e, int lost, enum cp_code error, const char *fmt, ...)
{
	va_list ap;
	if (e->have_result)
		return;
	e->have_result = 1;
	e->result.error = error;
	e->result.ex.code = -1;
	if (lost)
		e->result.ex.lost = 1;
	else
		e->result.ex.unavailable = 1;
	va_start(ap, fmt);
	vsnprintf(e->result.ex.detail, sizeof e->result.ex.detail, fmt, ap);
	va_end(ap);
}

/* ---- stdin queue ------------------------------------------------------ */

static struct qmsg *qmsg_new(int channel, size_t payload_cap)
{
	struct qmsg *m = malloc(sizeof *m + LWS_PRE + 1 + payload_cap);
	if (!m)
		return NULL;
	m->next = NULL;
	m->cap = 1 + payload_cap;
	m->len = 1;
	m->buf[LWS_PRE] = (unsigned char)channel;
	return m;
}

static void queue_free(struct k8s_exec *e)
{
	struct qmsg *m = e->qhead, *n = NULL;
	for (; m; m = n) {
		n = m->next;
		free(m);
	}
	e->qhead = e->qtail = NULL;
	e->queued = 0;
}

/* Append to the tail message while it has room, then new chunk-sized ones. */
static int queue_stdin(struct k8s_exec *e, const unsigned char *p, size_t len)
{
	while (len) {
		struct qmsg *t = e->qtail;
		if (!t || t->len == t->cap) {
			size_t want = len < K8S_EXEC_STDIN_CHUNK ? len : K8S_EXEC_STDIN_CHUNK;
			if (want < MIN_ALLOC && len < K8S_EXEC_STDIN_CHUNK)
				want = MIN_ALLOC;
			t = qmsg_new(K8S_EXEC_STDIN, want);
			if (!t)
				return CP_E_NOMEM;
			if (e->qtail)
				e->qtail->next = t;
			else
				e->qhead = t;
			e->qtail = t;
		}
		size_t n = t->cap - t->len;
		if (n > len)
			n = len;
		memcpy(t->buf + LWS_PRE + t->len, p, n);
		t->len += n;
		e->queued += n;
		p += n;
		len -= n;
	}
	return 0;
}

/* With the stream up, nothing queued and nothing held back by lws, a small
 * write goes out at once as one message: asking for CLIENT_WRITEABLE costs a
 * turn of the loop and four epoll_ctl (lws adds POLLOUT to its uv_poll
 * handle, then drops it) on a socket that is nearly always writable, and
 * every execution's hello takes this path. What the kernel does not take,
 * lws keeps and sends when the socket is writable (lws_partial_buffered()
 * is then true and later writes queue for CLIENT_WRITEABLE as before).
 * Returns 1 when written; 0 leaves it to the queue, as after a failed
 * write, which the WRITEABLE path then reports and ends the stream on. */
static int write_now(struct k8s_exec *e, const void *a, size_t alen, const void *b, size_t blen)
{
	size_t len = alen + blen;
	if (!e->wsi || !e->proto || e->ending || e->starting || e->qhead || !len || len > DIRECT_MAX ||
	    lws_partial_buffered(e->wsi))
		return 0;
	unsigned char m[LWS_PRE + 1 + DIRECT_MAX];
	m[LWS_PRE] = (unsigned char)K8S_EXEC_STDIN;
	if (alen)
		memcpy(m + LWS_PRE + 1, a, alen);
	if (blen)
		memcpy(m + LWS_PRE + 1 + alen, b, blen);
	return lws_write(e->wsi, m + LWS_PRE, len + 1, LWS_WRITE_BINARY) >= 0;
}

static void want_write(struct k8s_exec *e)
{
	if (e->wsi && e->proto && !e->ending)
		lws_callback_on_writable(e->wsi);
}

/* ---- callbacks -------------------------------------------------------- */

static int on_append_header(struct k8s_exec *e, void *in, size_t len)
{
	char **p = in;
	const char *tok = e->c->token;
	if (!tok)
		return 0;
	int n = snprintf(*p, len, "Authorization: Bearer %s\x0d\x0a", tok);
	if (n < 0 || (size_t)n >= len) {
		set_result(e, 0, CP_E_TOO_BIG, "exec: bearer token does not fit the request headers");
		return -1;
	}
	*p += n;
	return 0;
}

/* The 101's Sec-WebSocket-Protocol, read while the headers still exist. */
static int on_pre_establish(struct k8s_exec *e, struct lws *wsi)
{
	if (lws_hdr_copy(wsi, e->chosen, sizeof e->chosen, WSI_TOKEN_PROTOCOL) < 0)
		e->chosen[0] = '\0';
	return 0;
}

static int on_established(struct k8s_exec *e, struct lws *wsi)
{
	const char *proto = e->chosen;
	if (!*proto && lws_get_protocol(wsi))
		proto = lws_get_protocol(wsi)->name;
	if (strcmp(proto, PROTO_V5) == 0) {
		e->proto = K8S_EXEC_V5;
	} else if (strcmp(proto, PROTO_V4) == 0) {
		e->proto = K8S_EXEC_V4;
	} else {
		set_result(e, 0, CP_E_UNSUPPORTED, "exec: server chose subprotocol \"%.60s\"", proto);
		return -1;
	}
	e->result.proto = e->proto;
	e->reasm = k8s_exec_reasm_new((enum k8s_exec_proto)e->proto, e->c->opts.max_status);
	if (!e->reasm) {
		set_result(e, 0, CP_E_NOMEM, "exec: out of memory");
		return -1;
	}
	if (e->proto == K8S_EXEC_V4)
		e->close_pending = 0; /* v4 cannot half-close (documented in exec.h) */
	if (e->qhead || e->close_pending)
		lws_callback_on_writable(wsi);
	return 0;
}

static void on_status(struct k8s_exec *e, const struct k8s_exec_msg *m)
{
	struct k8s_status st;
	struct cp_err err;
	int code = -1;
	int rc = k8s_status_exec(m->data, m->len, &code, &st, &err);
	if (rc == 0) {
		e->have_result = 1;
		e->result.ex.code = code;
		e->result.error = CP_OK;
	} else if (rc == CP_E_HTTP) {
		/* InternalError and the like: the command did not run (or its
		 * fate is unknown once it produced output). */
		set_result(e, e->got_output, (enum cp_code)k8s_status_cp_code(st.code),
		           "%s", st.message ? st.message : err.msg);
	} else {
		set_result(e, 1, CP_E_OUTCOME_UNKNOWN, "exec: bad Status on the error channel: %s", err.msg);
	}
	k8s_status_release(&st);
	e->ending = 1;
}

static int deliver(struct k8s_exec *e, const struct k8s_exec_msg *m)
{
	switch (m->channel) {
	case K8S_EXEC_STDOUT:
	case K8S_EXEC_STDERR:
		if (!m->len)
			return 0; /* the "connected" message, or an empty piece */
		e->got_output = 1;
		if (m->channel == K8S_EXEC_STDOUT)
			e->cbs.out(e->ud, (const char *)m->data, m->len);
		else
			e->cbs.err(e->ud, (const char *)m->data, m->len);
		return 0;
	case K8S_EXEC_ERROR:
		if (!m->len)
			return 0; /* "connected" when only the error channel is open */
		on_status(e, m);
		return 0;
	default:
		/* server CLOSE [0xFF, ch] (output ends), stdin/resize echoes: nothing to do */
		return 0;
	}
}

static int on_receive(struct k8s_exec *e, struct lws *wsi, void *in, size_t len)
{
	struct k8s_exec_msg m;
	struct cp_err err;
	if (e->ending)
		return -1;
	if (!lws_frame_is_binary(wsi))
		return 0; /* text messages carry nothing in v4/v5 */
	int rc = k8s_exec_reasm_feed(e->reasm, in, len, lws_is_first_fragment(wsi),
	                             lws_is_final_fragment(wsi), &m, &err);
	if (rc < 0) {
		set_result(e, 1, CP_E_OUTCOME_UNKNOWN, "exec: %s", err.msg);
		e->ending = 1;
	} else if (rc == 1) {
		deliver(e, &m);
	}
	if (e->ending) {
		lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
		return -1;
	}
	return 0;
}

static void maybe_drain(struct k8s_exec *e)
{
	size_t high = e->c->opts.high_water;
	if (e->over_high && e->queued <= high / 2) {
		e->over_high = 0;
		if (e->cbs.drain)
			e->cbs.drain(e->ud);
	}
}

/* One message per WRITEABLE, as lws asks ("only send data when writeable"). */
static int on_writeable(struct k8s_exec *e, struct lws *wsi)
{
	struct qmsg *m = e->qhead;
	if (e->ending)
		return -1;
	if (m) {
		int n = lws_write(wsi, m->buf + LWS_PRE, m->len, LWS_WRITE_BINARY);
		if (n < 0) {
			set_result(e, 1, CP_E_IO, "exec: write to the stream failed");
			return -1;
		}
		e->qhead = m->next;
		if (!e->qhead)
			e->qtail = NULL;
		e->queued -= m->len - 1;
		free(m);
		maybe_drain(e);
		if (e->ending)
			return -1;
	} else if (e->close_pending && !e->close_sent) {
		unsigned char *b = NULL;
		unsigned char buf[LWS_PRE + 2];
		b = buf + LWS_PRE;
		k8s_exec_frame_close(K8S_EXEC_STDIN, b);
		if (lws_write(wsi, b, 2, LWS_WRITE_BINARY) < 0) {
			set_result(e, 1, CP_E_IO, "exec: write to the stream failed");
			return -1;
		}
		e->close_sent = 1;
	}
	if (e->qhead || (e->close_pending && !e->close_sent))
		lws_callback_on_writable(wsi);
	return 0;
}

static void on_conn_error(struct k8s_exec *e, struct lws *wsi, const char *why)
{
	int http = lws_http_client_http_response(wsi);
	enum cp_code code = CP_E_IO;
	e->failed = 1;
	if (http > 0 && http != 101) {
		e->result.http_status = http;
		code = (enum cp_code)k8s_status_cp_code(http);
		/* The refusal's Status body is not readable here (the client
		 * library drops it), so a 403 says what is usually missing. */
		set_result(e, 0, code, "exec upgrade refused: HTTP %d (%s)%s", http, why ? why : "",
		           http == 403 ? "; a WebSocket exec needs both get and create on pods/exec "
		                         "(create is checked from Kubernetes 1.35)" : "");
	} else {
		set_result(e, 0, code, "exec connection failed: %s", why ? why : "unknown error");
	}
}

static void on_peer_close(struct k8s_exec *e, const unsigned char *in, size_t len)
{
	if (len >= 2)
		e->close_code = (in[0] << 8) | in[1];
}

static void unlink_stream(struct k8s_exec *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else if (e->c && e->c->streams == e)
		e->c->streams = e->next;
	if (e->next)
		e->next->prev = e->prev;
	e->next = e->prev = NULL;
}

static void stream_free(struct k8s_exec *e)
{
	queue_free(e);
	k8s_exec_reasm_free(e->reasm);
	free(e);
}

/* The wsi is going away: the one place a stream reports and is freed. */
static void on_destroy(struct k8s_exec *e, struct lws *wsi)
{
	lws_set_opaque_user_data(wsi, NULL);
	e->wsi = NULL;
	if (e->starting) {
		e->destroyed = 1; /* k8s_exec_start() returns an error instead */
		return;
	}
	if (!e->have_result) {
		if (!e->proto)
			set_result(e, 0, CP_E_IO, "exec: connection closed before the upgrade");
		else if (e->close_code)
			set_result(e, 1, CP_E_OUTCOME_UNKNOWN,
			           "exec stream closed (%d) without a Status: outcome unknown", e->close_code);
		else
			set_result(e, 1, CP_E_OUTCOME_UNKNOWN,
			           "exec stream dropped without a Status: outcome unknown");
	}
	unlink_stream(e);
	e->cbs.exited(e->ud, &e->result);
	stream_free(e);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                    void *in, size_t len)
{
	struct k8s_exec *e = wsi ? lws_get_opaque_user_data(wsi) : NULL;
	(void)user;
	if (!e)
		return 0;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
		return on_append_header(e, in, len);
	case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
		return on_pre_establish(e, wsi);
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		return on_established(e, wsi);
	case LWS_CALLBACK_CLIENT_RECEIVE:
		return on_receive(e, wsi, in, len);
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		return on_writeable(e, wsi);
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		on_conn_error(e, wsi, in);
		return 0;
	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		on_peer_close(e, in, len);
		return 0;
	case LWS_CALLBACK_WSI_DESTROY:
		on_destroy(e, wsi);
		return 0;
	default:
		return 0;
	}
}

/* The same handler under every name lws may bind the connection to. */
static const struct lws_protocols protocols[] = {
	{LOCAL_PROTO, callback, 0, RX_BUF, 0, NULL, 0},
	{PROTO_V5, callback, 0, RX_BUF, 0, NULL, 0},
	{PROTO_V4, callback, 0, RX_BUF, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0}
};

/* ---- client ----------------------------------------------------------- */

static void opts_defaults(struct k8s_exec_opts *o, const struct k8s_exec_opts *in)
{
	memset(o, 0, sizeof *o);
	if (in)
		*o = *in;
	if (!o->high_water)
		o->high_water = 1024u * 1024u;
	if (!o->max_queue)
		o->max_queue = 64u * 1024u * 1024u;
	if (!o->max_status)
		o->max_status = 1024u * 1024u;
	if (!o->ping_secs)
		o->ping_secs = 5;
	if (!o->hangup_secs)
		o->hangup_secs = 60;
}

int k8s_exec_client_new(uv_loop_t *loop, const struct k8s_config *cfg,
                        const struct k8s_exec_opts *opts,
                        struct k8s_exec_client **out, struct cp_err *err)
{
	struct k8s_exec_client *c = calloc(1, sizeof *c);
	int rc;
	*out = NULL;
	if (!c)
		return cp_err_set(err, CP_E_NOMEM, "exec: out of memory");
	opts_defaults(&c->opts, opts);
	c->retry.secs_since_valid_ping = (uint16_t)c->opts.ping_secs;
	c->retry.secs_since_valid_hangup = (uint16_t)c->opts.hangup_secs;
	rc = k8s_exec_client_set_token(c, cfg->token, err);
	if (rc == 0)
		rc = k8s_lws_new(loop, cfg, protocols, c, &c->lws, err);
	if (rc) {
		free(c->token);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int k8s_exec_client_set_token(struct k8s_exec_client *c, const char *token, struct cp_err *err)
{
	char *t = NULL;
	if (token && strpbrk(token, "\r\n"))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: bearer token contains CR or LF");
	if (token && *token) {
		t = strdup(token);
		if (!t)
			return cp_err_set(err, CP_E_NOMEM, "exec: out of memory");
	}
	free(c->token);
	c->token = t;
	return 0;
}

/* lws is done with the context: report what it did not destroy, free. */
static void client_gone(void *ud)
{
	struct k8s_exec_client *c = ud;
	struct k8s_exec *e = NULL;
	while ((e = c->streams) != NULL) {
		unlink_stream(e);
		e->cbs.exited(e->ud, &e->result);
		stream_free(e);
	}
	free(c->token);
	free(c);
}

void k8s_exec_client_free(struct k8s_exec_client *c)
{
	struct k8s_exec *e = NULL;
	if (!c)
		return;
	for (e = c->streams; e; e = e->next) {
		set_result(e, 1, CP_E_CANCELLED, "exec: client closed: outcome unknown");
		e->ending = 1;
	}
	/* Every wsi closes from the next loop turn on (base/lws_uv.c); each
	 * stream reports from on_destroy() then, and client_gone() frees the
	 * client after lws. */
	k8s_lws_free(c->lws, client_gone, c);
}

/* ---- streams ---------------------------------------------------------- */

/* Percent-encode all but RFC 3986 unreserved bytes. */
static int put_enc(char *buf, size_t cap, size_t *at, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		int plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		            (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~';
		if (*at + 4 > cap)
			return -1;
		if (plain) {
			buf[(*at)++] = (char)ch;
		} else {
			buf[(*at)++] = '%';
			buf[(*at)++] = hex[ch >> 4];
			buf[(*at)++] = hex[ch & 15];
		}
	}
	buf[*at] = '\0';
	return 0;
}

static int put_raw(char *buf, size_t cap, size_t *at, const char *s)
{
	size_t n = strlen(s);
	if (*at + n + 1 > cap)
		return -1;
	memcpy(buf + *at, s, n + 1);
	*at += n;
	return 0;
}

static int build_path(char *buf, size_t cap, const char *base, const char *ns,
                      const char *pod, const char *container, const char *const *argv)
{
	size_t at = 0;
	int bad = put_raw(buf, cap, &at, base) || put_raw(buf, cap, &at, "/api/v1/namespaces/") ||
	          put_enc(buf, cap, &at, ns) || put_raw(buf, cap, &at, "/pods/") ||
	          put_enc(buf, cap, &at, pod) || put_raw(buf, cap, &at, "/exec?");
	for (size_t i = 0; !bad && argv[i]; i++)
		bad = put_raw(buf, cap, &at, i ? "&command=" : "command=") ||
		      put_enc(buf, cap, &at, argv[i]);
	if (!bad && container)
		bad = put_raw(buf, cap, &at, "&container=") || put_enc(buf, cap, &at, container);
	if (!bad)
		bad = put_raw(buf, cap, &at, "&stdin=true&stdout=true&stderr=true&tty=false");
	return bad ? -1 : 0;
}

static const char *offer_string(enum k8s_exec_offer o)
{
	switch (o) {
	case K8S_EXEC_OFFER_V4:
		return PROTO_V4;
	case K8S_EXEC_OFFER_V5:
		return PROTO_V5;
	default:
		return PROTO_V5 ", " PROTO_V4;
	}
}

static int connect_stream(struct k8s_exec *e, const char *path, struct cp_err *err)
{
	struct k8s_exec_client *c = e->c;
	struct lws_client_connect_info i;
	struct lws *wsi = NULL;

	memset(&i, 0, sizeof i);
	i.context = k8s_lws_context(c->lws);
	i.address = k8s_lws_host(c->lws);
	i.port = k8s_lws_port(c->lws);
	i.ssl_connection = k8s_lws_ssl_flags(c->lws);
	i.path = path;
	/* Host header; lws takes the SNI name from it too. */
	i.host = i.address;
	i.origin = i.address;
	i.protocol = offer_string(c->opts.offer);
	i.local_protocol_name = LOCAL_PROTO;
	i.ietf_version_or_minus_one = -1;
	i.alpn = "http/1.1";
	i.opaque_user_data = e;
	i.retry_and_idle_policy = &c->retry;
	/* No i.pwsi: lws might write through it after WSI_DESTROY freed us. */

	e->starting = 1;
	wsi = lws_client_connect_via_info(&i);
	e->starting = 0;
	if (!wsi || e->destroyed) {
		return cp_err_set(err, CP_E_IO, "%s", e->have_result ? e->result.ex.detail
		                                      : "exec: libwebsockets could not start the connection");
	}
	e->wsi = wsi;
	return 0;
}

int k8s_exec_start(struct k8s_exec_client *c, const char *ns, const char *pod,
                   const char *container, const char *const *argv,
                   const struct k8s_exec_cbs *cbs, void *ud,
                   struct k8s_exec **out, struct cp_err *err)
{
	char *path = NULL;
	struct k8s_exec *e = NULL;
	int rc = 0;

	*out = NULL;
	if (!c || !ns || !*ns || !pod || !*pod || !argv || !argv[0] || !cbs || !cbs->out ||
	    !cbs->err || !cbs->exited)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: missing namespace, pod, argv or callback");
	path = malloc(K8S_EXEC_MAX_URL);
	e = calloc(1, sizeof *e);
	if (!path || !e) {
		rc = cp_err_set(err, CP_E_NOMEM, "exec: out of memory");
		goto fail;
	}
	if (build_path(path, K8S_EXEC_MAX_URL, k8s_lws_base_path(c->lws), ns, pod,
	               container, argv)) {
		rc = cp_err_set(err, CP_E_TOO_BIG, "exec: request URL over %u bytes", K8S_EXEC_MAX_URL);
		goto fail;
	}
	e->c = c;
	e->cbs = *cbs;
	e->ud = ud;
	e->result.ex.code = -1;
	rc = connect_stream(e, path, err);
	if (rc)
		goto fail;
	free(path);
	e->next = c->streams;
	if (c->streams)
		c->streams->prev = e;
	c->streams = e;
	*out = e;
	return 0;
fail:
	free(path);
	if (e)
		stream_free(e);
	return rc;
}

int k8s_exec_write2(struct k8s_exec *e, const void *a, size_t alen, const void *b, size_t blen,
                    struct cp_err *err)
{
	const struct k8s_exec_opts *o = &e->c->opts;
	if (e->ending || e->close_pending || e->failed)
		return cp_err_set(err, CP_E_STATE, "exec: stdin is closed");
	if (alen > o->max_queue - e->queued || blen > o->max_queue - e->queued - alen)
		return cp_err_set(err, CP_E_TOO_BIG, "exec: stdin queue over %zu bytes", o->max_queue);
	if (write_now(e, a, alen, b, blen))
		return 0;
	if (queue_stdin(e, a, alen) || queue_stdin(e, b, blen))
		return cp_err_set(err, CP_E_NOMEM, "exec: out of memory");
	want_write(e);
	if (e->queued > o->high_water) {
		e->over_high = 1;
		return 1;
	}
	return 0;
}

int k8s_exec_write(struct k8s_exec *e, const void *buf, size_t len, struct cp_err *err)
{
	return k8s_exec_write2(e, buf, len, NULL, 0, err);
}

int k8s_exec_close_stdin(struct k8s_exec *e, struct cp_err *err)
{
	if (e->proto == K8S_EXEC_V4 || (!e->proto && e->c->opts.offer == K8S_EXEC_OFFER_V4))
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "exec: v4.channel.k8s.io cannot close stdin");
	if (e->ending || e->close_pending || e->failed)
		return cp_err_set(err, CP_E_STATE, "exec: stdin already closed");
	e->close_pending = 1;
	want_write(e);
	return 0;
}

void k8s_exec_pause_output(struct k8s_exec *e, int paused)
{
	if (e->wsi && !e->ending)
		lws_rx_flow_control(e->wsi, !paused);
}

void k8s_exec_abort(struct k8s_exec *e)
{
	if (e->ending)
		return;
	set_result(e, 1, CP_E_CANCELLED, "exec: aborted by the client: outcome unknown");
	e->ending = 1;
	if (e->wsi)
		lws_set_timeout(e->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

int k8s_exec_proto(const struct k8s_exec *e)
{
	return e->proto;
}

size_t k8s_exec_queued(const struct k8s_exec *e)
{
	return e->queued;
}
