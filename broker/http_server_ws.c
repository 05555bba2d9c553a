/*
 * http_server_ws.c - GET /v1/session: one broker_session per WebSocket.
 *
 * Incoming text messages are reassembled from their fragments up to
 * max_message bytes; a longer one is read to its end, discarded, and
 * answered with the session's INVALID_REQUEST `error` (the socket stays up).
 * A binary message gets an `error` too. An outgoing message is written at
 * once when nothing is waiting (see write_now), else it waits on a queue
 * (LWS_PRE headroom each) written from SERVER_WRITEABLE; a client that lets
 * more than max_queue bytes pile up is disconnected.
 *
 * Liveness: every ws_ping_interval_s the sweep asks for a PING (written from
 * SERVER_WRITEABLE); a peer that sent nothing, not even a PONG, for
 * ws_idle_timeout_s is disconnected, and its executions are detached as on
 * a reset (they wait for `attach`). A connection that stops forwarding
 * without a reset would otherwise hold a program's tool call until TCP
 * gives up. The pings are ours rather than libwebsockets' validity policy:
 * that policy is per vhost and would also hang up the plain HTTP
 * connections on it (a POST /v1/executions waiting for a long program), which
 * have no PING to answer.
 *
 * RFC 6455 5.4: "a receiver MUST be prepared to receive fragmented messages";
 * 5.6: "the text data MUST be UTF-8", checked by jansson on parse.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/http_server_int.h"
#include "broker/ws_mask.h"
#include "base/log.h"

struct out_msg {
	struct out_msg *next;
	size_t len;
	unsigned char buf[]; /* LWS_PRE + len */
};

struct ws_conn {
	struct sess_base base;   /* first: the hooks' ud */
	struct lws *wsi;         /* NULL once lws reported CLOSED */
	struct out_msg *head, *tail;
	size_t queued;
	struct cp_buf rx;        /* the message being received, max_message at most */
	unsigned long long rx_total;
	int in_msg, rx_over, rx_binary;
	int finishing;           /* close once the queue is empty */
	int killing;             /* kill_conn was called */
	int ping_due;            /* the next SERVER_WRITEABLE writes a PING */
	uint64_t last_active_ms; /* traffic either way: the idle timeout */
	uint64_t last_heard_ms;  /* a message or PONG from the peer: liveness */
	uint64_t last_ping_ms;
	int unmasked;            /* an unmasked frame came: closing with 1002 */
};

static const char unmasked_why[] = "client frames must be masked";

static void touch(struct ws_conn *c)
{
	c->last_active_ms = uv_now(c->base.srv->loop);
}

static void heard(struct ws_conn *c)
{
	c->last_heard_ms = uv_now(c->base.srv->loop);
}

static void kill_conn(struct ws_conn *c, const char *why)
{
	if (!c->wsi || c->killing)
		return;
	c->killing = 1; /* the sweep comes again before lws reports CLOSED */
	cp_log(CP_LOG_WARN, "ws.disconnect", "reason", json_string(why), NULL);
	lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
	/* Outside lws's own callbacks nothing wakes its timer list: see on_sweep. */
	lws_cancel_service(lws_get_context(c->wsi));
}

/* Messages up to this size are encoded on the stack (one dump, no malloc). */
#define SEND_STACK 16384

/* With nothing queued and nothing held back by lws, a message is written at
 * once: asking for SERVER_WRITEABLE costs a turn of the loop and four
 * epoll_ctl per message (lws restarts its uv_poll handle to add POLLOUT,
 * and again to drop it) for a socket that is nearly always writable. What
 * the kernel does not take, lws keeps and sends when the socket is
 * writable (lws_partial_buffered() is then true, and later messages queue
 * for SERVER_WRITEABLE as before: one lws_write per callback). */
static int write_now(struct ws_conn *c, unsigned char *buf /* LWS_PRE + len */, size_t len)
{
	if (c->head || c->finishing || lws_partial_buffered(c->wsi))
		return 0;
	if (lws_write(c->wsi, buf + LWS_PRE, len, LWS_WRITE_TEXT) < 0)
		kill_conn(c, "write failed");
	else
		touch(c);
	return 1;
}

static void io_send(void *ud, const json_t *msg)
{
	struct ws_conn *c = ud;
	if (!c->wsi)
		return;
	unsigned char stack[LWS_PRE + SEND_STACK];
	size_t n = json_dumpb(msg, (char *)stack + LWS_PRE, SEND_STACK, JSON_COMPACT);
	if (!n)
		return;
	if (n <= SEND_STACK && write_now(c, stack, n))
		return;
	if (c->queued + n > c->base.srv->cfg.max_queue) {
		kill_conn(c, "the client does not read its messages");
		return;
	}
	struct out_msg *m = malloc(sizeof *m + LWS_PRE + n);
	if (!m)
		return;
	if (n <= SEND_STACK)
		memcpy(m->buf + LWS_PRE, stack + LWS_PRE, n);
	else
		json_dumpb(msg, (char *)m->buf + LWS_PRE, n, JSON_COMPACT);
	if (!c->head && write_now(c, m->buf, n)) {
		free(m);
		return;
	}
	m->len = n;
	m->next = NULL;
	if (c->tail)
		c->tail->next = m;
	else
		c->head = m;
	c->tail = m;
	c->queued += n;
	lws_callback_on_writable(c->wsi);
}

static void io_drained(void *ud)
{
	struct ws_conn *c = ud;
	c->base.drained = 1;
	if (c->base.gone)
		broker_http_sess_retire(&c->base);
}

static const struct broker_session_io ws_io = { io_send, io_drained, NULL };

static void free_queue(struct ws_conn *c)
{
	while (c->head) {
		struct out_msg *m = c->head;
		c->head = m->next;
		free(m);
	}
	c->tail = NULL;
	c->queued = 0;
}

void broker_http_ws_free(struct sess_base *b)
{
	struct ws_conn *c = (struct ws_conn *)b;
	free_queue(c);
	broker_session_free(b->session);
	cp_buf_free(&c->rx);
	free(c);
}

static int on_established(struct broker_http *srv, struct lws *wsi, struct ws_conn **slot)
{
	struct ws_conn *c = calloc(1, sizeof *c);
	if (!c)
		return -1;
	cp_buf_init(&c->rx, srv->cfg.max_message);
	c->base.session = broker_session_new(srv->cfg.cp, srv->cfg.ids, srv->hub, &ws_io, c);
	if (!c->base.session) {
		free(c);
		return -1;
	}
	broker_session_set_hooks(c->base.session, &broker_http_session_hooks, srv);
	c->wsi = wsi;
	broker_http_sess_link(srv, &c->base, BROKER_SESS_WS);
	touch(c);
	heard(c);
	c->last_ping_ms = c->last_heard_ms;
	*slot = c;
	cp_log(CP_LOG_DEBUG, "ws.open", "sessions", json_integer(srv->nsessions), NULL);
	return 0;
}

static void on_closed(struct ws_conn *c)
{
	c->wsi = NULL;
	c->base.gone = 1;
	free_queue(c);
	cp_log(CP_LOG_DEBUG, "ws.close", "running", json_integer(broker_session_running(c->base.session)),
	       NULL);
	/* Running executions are detached for the grace period (or abandoned
	 * without one); drained() (and so the retirement to the reaper) may come
	 * from inside this call. */
	broker_session_close(c->base.session, 0);
}

static void deliver(struct ws_conn *c)
{
	if (c->rx_binary) {
		broker_session_not_text(c->base.session);
	} else if (c->rx_over) {
		broker_session_oversize(c->base.session, c->rx_total, c->base.srv->cfg.max_message);
	} else {
		broker_session_message(c->base.session, cp_buf_ptr(&c->rx), cp_buf_len(&c->rx));
	}
	c->rx_total = 0;
	c->rx_over = 0;
	if (cp_buf_cap(&c->rx) > (1u << 20)) /* do not keep a big buffer for an idle session */
		cp_buf_free(&c->rx);
	else
		cp_buf_reset(&c->rx);
}

static int on_receive(struct ws_conn *c, struct lws *wsi, const char *in, size_t len)
{
	touch(c);
	heard(c);
	if (!c->in_msg) {
		c->in_msg = 1;
		c->rx_binary = lws_frame_is_binary(wsi);
	}
	c->rx_total += len;
	if (!c->rx_over) {
		int rc = cp_buf_add(&c->rx, in, len, NULL);
		if (rc == CP_E_TOO_BIG) {
			/* Only counted from now on, and refused whole at the end. */
			c->rx_over = 1;
			cp_buf_free(&c->rx);
		} else if (rc) {
			return -1; /* out of memory: the connection is dropped */
		}
	}
	if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
		c->in_msg = 0;
		deliver(c);
	}
	return 0;
}

static int on_writeable(struct ws_conn *c, struct lws *wsi)
{
	if (c->ping_due) {
		/* One lws_write per callback: the queue waits for the next one. A
		 * PING with a payload: lws reports no RECEIVE_PONG for an empty
		 * PONG. */
		static const char payload[] = "codepod";
		unsigned char ping[LWS_PRE + sizeof payload];
		memcpy(ping + LWS_PRE, payload, sizeof payload - 1);
		c->ping_due = 0;
		if (lws_write(wsi, ping + LWS_PRE, sizeof payload - 1, LWS_WRITE_PING) < 0)
			return -1;
		if (c->head || c->finishing)
			lws_callback_on_writable(wsi);
		return 0;
	}
	struct out_msg *m = c->head;
	if (m) {
		c->head = m->next;
		if (!c->head)
			c->tail = NULL;
		c->queued -= m->len;
		int n = lws_write(wsi, m->buf + LWS_PRE, m->len, LWS_WRITE_TEXT);
		free(m);
		if (n < 0)
			return -1;
		touch(c);
	}
	if (c->head) {
		lws_callback_on_writable(wsi);
		return 0;
	}
	if (c->finishing) {
		static const char bye[] = "server shutting down";
		lws_close_reason(wsi, LWS_CLOSE_STATUS_GOINGAWAY, (unsigned char *)bye, sizeof bye - 1);
		return -1;
	}
	return 0;
}

int broker_http_ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                     void *in, size_t len)
{
	struct ws_conn **slot = user;
	struct ws_conn *c = slot ? *slot : NULL;
	struct lws_context *ctx = lws_get_context(wsi);
	struct broker_http *srv = ctx ? lws_context_user(ctx) : NULL;
	switch (reason) {
	case LWS_CALLBACK_ESTABLISHED:
		return on_established(srv, wsi, slot);
	case LWS_CALLBACK_RECEIVE:
		if (broker_wsmask_unmasked(lws_get_socket_fd(wsi))) {
			/* RFC 6455 5.1: a client frame without a mask closes, 1002 */
			if (srv)
				broker_http_metrics_count(srv->metrics, "unmasked_frame");
			lws_close_reason(wsi, LWS_CLOSE_STATUS_PROTOCOL_ERR, (unsigned char *)unmasked_why,
			                 sizeof unmasked_why - 1);
			return -1;
		}
		return c ? on_receive(c, wsi, in, len) : -1;
	case LWS_CALLBACK_SERVER_WRITEABLE:
		return c ? on_writeable(c, wsi) : 0;
	case LWS_CALLBACK_RECEIVE_PONG:
		if (c)
			heard(c);
		return 0;
	case LWS_CALLBACK_CLOSED:
		broker_wsmask_untrack(lws_get_socket_fd(wsi));
		if (c) {
			*slot = NULL;
			on_closed(c);
		}
		return 0;
	default:
		return 0;
	}
}

/* Called once a second: a peer silent for ws_idle_timeout_s is dropped, one
 * not pinged for ws_ping_interval_s gets a PING, and a session with nothing
 * running and no traffic for idle_timeout_s is closed. */
void broker_http_ws_sweep(struct sess_base *b, uint64_t now_ms)
{
	struct ws_conn *c = (struct ws_conn *)b;
	const struct broker_http_config *cfg = &b->srv->cfg;
	if (!c->wsi)
		return;
	/* an unmasked control frame (a ping) reaches no callback of ours: the
	 * sweep drops its connection (outside lws's receive path lws 4.1 sends
	 * no close frame: the 1002 is told only for a data frame) */
	if (!c->unmasked && broker_wsmask_unmasked(lws_get_socket_fd(c->wsi))) {
		c->unmasked = 1;
		broker_http_metrics_count(b->srv->metrics, "unmasked_frame");
		lws_close_reason(c->wsi, LWS_CLOSE_STATUS_PROTOCOL_ERR, (unsigned char *)unmasked_why,
		                 sizeof unmasked_why - 1);
		kill_conn(c, "unmasked frame");
		return;
	}
	if (now_ms - c->last_heard_ms > (uint64_t)cfg->ws_idle_timeout_s * 1000) {
		kill_conn(c, "silent peer: no pong or message within --ws-idle-timeout");
		return;
	}
	if (now_ms - c->last_ping_ms >= (uint64_t)cfg->ws_ping_interval_s * 1000 && !c->ping_due) {
		c->ping_due = 1;
		c->last_ping_ms = now_ms;
		lws_callback_on_writable(c->wsi);
	}
	if (broker_session_running(b->session) > 0)
		return;
	if (now_ms - c->last_active_ms > (uint64_t)b->srv->cfg.idle_timeout_s * 1000)
		kill_conn(c, "idle");
}

void broker_http_ws_finish(struct sess_base *b)
{
	struct ws_conn *c = (struct ws_conn *)b;
	if (!c->wsi)
		return;
	c->finishing = 1;
	lws_callback_on_writable(c->wsi);
}
