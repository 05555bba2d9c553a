/* exec_frame.c - channel byte codec of the exec WebSocket (v4/v5). */
#include "k8s/api/exec_frame.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

/* Channels a server may name, v4 and v5. */
static int known_channel(unsigned c, enum k8s_exec_proto proto)
{
	return c <= K8S_EXEC_RESIZE || (c == K8S_EXEC_CLOSE && proto == K8S_EXEC_V5);
}

int k8s_exec_frame_parse(const void *msg, size_t len, enum k8s_exec_proto proto,
                         struct k8s_exec_msg *out, struct cp_err *err)
{
	const unsigned char *b = msg;
	memset(out, 0, sizeof *out);
	out->first = out->final = 1;
	out->closed_channel = -1;
	if (len == 0) {
		out->channel = K8S_EXEC_NONE;
		return 0;
	}
	if (!known_channel(b[0], proto))
		return cp_err_set(err, CP_E_PARSE, "exec: unknown channel %u (v%d)", b[0], (int)proto);
	out->channel = b[0];
	out->data = b + 1;
	out->len = len - 1;
	if (out->channel == K8S_EXEC_CLOSE) {
		/* "if the message after 0xFF is not exactly one byte, or ch >= number
		 * of channels" the server drops the connection; so do we. */
		if (len != 2 || b[1] > K8S_EXEC_RESIZE)
			return cp_err_set(err, CP_E_PARSE, "exec: malformed CLOSE message (%zu bytes)", len);
		out->closed_channel = b[1];
	}
	return 0;
}

int k8s_exec_frame_data(int channel, const void *data, size_t len,
                        unsigned char *out, size_t cap, size_t *written,
                        struct cp_err *err)
{
	if (channel != K8S_EXEC_STDIN && channel != K8S_EXEC_RESIZE)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "exec: cannot send on channel %d", channel);
	if (len >= cap)
		return cp_err_set(err, CP_E_TOO_BIG, "exec: frame of %zu bytes over buffer of %zu",
		                  len + 1, cap);
	out[0] = (unsigned char)channel;
	if (len)
		memcpy(out + 1, data, len);
	*written = len + 1;
	return 0;
}

void k8s_exec_frame_close(int channel, unsigned char out[2])
{
	out[0] = K8S_EXEC_CLOSE;
	out[1] = (unsigned char)channel;
}

int k8s_exec_frame_resize(unsigned width, unsigned height, unsigned char *out,
                          size_t cap, size_t *written, struct cp_err *err)
{
	char json[64];
	int n = snprintf(json, sizeof json, "{\"Width\":%u,\"Height\":%u}", width, height);
	return k8s_exec_frame_data(K8S_EXEC_RESIZE, json, (size_t)n, out, cap, written, err);
}

struct k8s_exec_reasm {
	enum k8s_exec_proto proto;
	size_t max_msg;
	int in_msg;       /* a message is in progress */
	int channel;      /* its channel, K8S_EXEC_NONE until the byte is seen */
	size_t total;     /* payload bytes seen in this message */
	struct cp_buf buf; /* buffered control message: channel byte + payload */
};

struct k8s_exec_reasm *k8s_exec_reasm_new(enum k8s_exec_proto proto, size_t max_msg)
{
	if (max_msg == 0)
		return NULL;
	struct k8s_exec_reasm *r = calloc(1, sizeof *r);
	if (r) {
		r->proto = proto;
		r->max_msg = max_msg;
		r->channel = K8S_EXEC_NONE;
		/* max_msg is checked on its own (streamed channels count too);
		 * the buffer's limit only backs it up. */
		cp_buf_init(&r->buf, max_msg < SIZE_MAX ? max_msg + 1 : SIZE_MAX);
	}
	return r;
}

void k8s_exec_reasm_free(struct k8s_exec_reasm *r)
{
	if (!r)
		return;
	cp_buf_free(&r->buf);
	free(r);
}

static void reset(struct k8s_exec_reasm *r)
{
	r->in_msg = 0;
	r->channel = K8S_EXEC_NONE;
	r->total = 0;
	cp_buf_reset(&r->buf);
}

static int streamed(int channel)
{
	return channel == K8S_EXEC_STDOUT || channel == K8S_EXEC_STDERR;
}

static int fail(struct k8s_exec_reasm *r, int rc)
{
	reset(r);
	return rc;
}

int k8s_exec_reasm_feed(struct k8s_exec_reasm *r, const void *frag, size_t len,
                        int first, int final, struct k8s_exec_msg *out,
                        struct cp_err *err)
{
	const unsigned char *p = frag;
	memset(out, 0, sizeof *out);
	out->channel = K8S_EXEC_NONE;
	out->closed_channel = -1;
	if (first && r->in_msg)
		return fail(r, cp_err_set(err, CP_E_PARSE, "exec: new message before the previous one ended"));
	if (!first && !r->in_msg)
		return fail(r, cp_err_set(err, CP_E_PARSE, "exec: continuation fragment without a message"));
	int is_first_piece = 0;
	if (first) {
		r->in_msg = 1;
		cp_buf_reset(&r->buf); /* the previous message's bytes were lent until now */
	}
	if (r->channel == K8S_EXEC_NONE && len > 0) {
		/* The channel byte: the first byte of the message. */
		if (!known_channel(p[0], r->proto))
			return fail(r, cp_err_set(err, CP_E_PARSE, "exec: unknown channel %u (v%d)",
			                          p[0], (int)r->proto));
		r->channel = p[0];
		p++;
		len--;
		is_first_piece = 1;
		if (!streamed(r->channel) && cp_buf_add(&r->buf, frag, 1, NULL))
			return fail(r, cp_err_set(err, CP_E_NOMEM, "exec: out of memory"));
	}
	if (len > r->max_msg - r->total)
		return fail(r, cp_err_set(err, CP_E_TOO_BIG, "exec: channel %d message over %zu bytes",
		                          r->channel, r->max_msg));
	r->total += len;
	if (r->channel == K8S_EXEC_NONE) {
		if (final)
			reset(r); /* an empty message: nothing to deliver */
		return 0;
	}
	if (streamed(r->channel)) {
		out->channel = r->channel;
		out->data = p;
		out->len = len;
		out->first = is_first_piece;
		out->final = final != 0;
		if (final)
			reset(r);
		/* Empty middle pieces carry nothing worth a callback. */
		return (len > 0 || out->first || out->final) ? 1 : 0;
	}
	if (cp_buf_add(&r->buf, p, len, NULL))
		return fail(r, cp_err_set(err, CP_E_NOMEM, "exec: out of memory"));
	if (!final)
		return 0;
	int rc = k8s_exec_frame_parse(cp_buf_ptr(&r->buf), cp_buf_len(&r->buf), r->proto, out, err);
	/* `out` points into r->buf, valid until the next feed: the bytes stay
	 * until the next message starts. */
	r->in_msg = 0;
	r->channel = K8S_EXEC_NONE;
	r->total = 0;
	return rc ? rc : 1;
}
