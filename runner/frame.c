#include "runner/frame.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

#define HDR_MARK 0x1e
#define LEN_DIGITS_MAX 20
/* Payload buffers larger than this are released after their frame. */
#define KEEP_BUF_MAX (1u << 20)

/* Offsets inside "\x1ecp1 <32 hex> K <len>\n". */
enum { OFF_NONCE = 5, OFF_SP1 = OFF_NONCE + CODEPOD_FRAME_NONCE_LEN, OFF_KIND, OFF_SP2, OFF_LEN };

/* hdr_parse() results besides a positive header length. */
enum { HDR_BAD = -1, HDR_MORE = 0 };

struct codepod_frame_parser {
	char nonce[CODEPOD_FRAME_NONCE_LEN];
	size_t max_payload;
	int err; /* sticky negative cp_code, 0 if none */

	char hold[CODEPOD_FRAME_HDR_MAX]; /* a header prefix split across feeds */
	size_t hold_len;

	int in_payload;
	char kind;
	size_t need; /* announced payload length */
	/* The payload collected across feeds. Its limit is the frame's own
	 * length, so it never grows past what the frame announced. */
	struct cp_buf pbuf;
};

static int is_lhex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int valid_nonce(const char *nonce)
{
	size_t i;

	if (!nonce)
		return 0;
	for (i = 0; i < CODEPOD_FRAME_NONCE_LEN; i++)
		if (!is_lhex(nonce[i]))
			return 0;
	return 1;
}

static int valid_kind(char k)
{
	static const char kinds[] = {
#define CODEPOD_FRAME_KIND(letter, name, final) letter,
#include "runner/frame_kinds.def"
#undef CODEPOD_FRAME_KIND
	};

	return memchr(kinds, k, sizeof kinds) != NULL;
}

/* Constant-time comparison: the time taken does not depend on where the
 * program's guess of the nonce first differs. */
static int ct_equal(const char *a, const char *b, size_t n)
{
	unsigned char diff = 0;
	size_t i;

	for (i = 0; i < n; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

/*
 * Checks h[0..n) (h[0] is 0x1E) against the header grammar, byte by byte, so
 * that HDR_MORE means "every byte so far fits a header". Held-back bytes are
 * therefore never 0x1E after the first, which lets a failed hold be emitted
 * as raw in one piece. Returns the header length, HDR_MORE or HDR_BAD.
 */
static int hdr_parse(const struct codepod_frame_parser *p, const char *h, size_t n,
                     char *kind, unsigned long long *len)
{
	static const char magic[] = "\x1e" "cp1 ";
	unsigned long long v = 0;
	size_t i;

	for (i = 0; i < OFF_NONCE; i++) {
		if (i >= n)
			return HDR_MORE;
		if (h[i] != magic[i])
			return HDR_BAD;
	}
	for (; i < OFF_SP1; i++) {
		if (i >= n)
			return HDR_MORE;
		if (!is_lhex(h[i]))
			return HDR_BAD;
	}
	if (!ct_equal(h + OFF_NONCE, p->nonce, CODEPOD_FRAME_NONCE_LEN))
		return HDR_BAD;
	if (n <= OFF_SP1)
		return HDR_MORE;
	if (h[OFF_SP1] != ' ')
		return HDR_BAD;
	if (n <= OFF_KIND)
		return HDR_MORE;
	if (!valid_kind(h[OFF_KIND]))
		return HDR_BAD;
	if (n <= OFF_SP2)
		return HDR_MORE;
	if (h[OFF_SP2] != ' ')
		return HDR_BAD;
	for (i = OFF_LEN;; i++) {
		unsigned d;

		if (i >= n)
			return HDR_MORE;
		if (h[i] == '\n')
			break;
		if (h[i] < '0' || h[i] > '9' || i - OFF_LEN >= LEN_DIGITS_MAX)
			return HDR_BAD;
		d = (unsigned)(h[i] - '0');
		if (v > (ULLONG_MAX - d) / 10)
			return HDR_BAD;
		v = v * 10 + d;
	}
	if (i == OFF_LEN)
		return HDR_BAD;
	*kind = h[OFF_KIND];
	*len = v;
	return (int)(i + 1);
}

static void emit_raw(const struct codepod_frame_sink *sink, void *ud, const char *buf, size_t len)
{
	if (len > 0 && sink->raw)
		sink->raw(ud, buf, len);
}

static void emit_frame(const struct codepod_frame_sink *sink, void *ud, char kind,
                       const char *payload, size_t len)
{
	if (sink->frame)
		sink->frame(ud, kind, payload, len);
}

/* Sets the sticky error and returns it. */
static int fail(struct codepod_frame_parser *p, int code)
{
	p->err = code;
	p->in_payload = 0;
	p->hold_len = 0;
	cp_buf_reset(&p->pbuf);
	return code;
}

/* A complete header was read: deliver an empty frame now, or wait for the payload. */
static int start_frame(struct codepod_frame_parser *p, char kind, unsigned long long len,
                       const struct codepod_frame_sink *sink, void *ud, struct cp_err *err)
{
	if (len > p->max_payload) {
		fail(p, CP_E_TOO_BIG);
		return cp_err_set(err, CP_E_TOO_BIG,
		                  "frame %c announces %llu bytes, over the %zu-byte limit",
		                  kind, len, p->max_payload);
	}
	if (len == 0) {
		emit_frame(sink, ud, kind, "", 0);
		return 0;
	}
	p->in_payload = 1;
	p->kind = kind;
	p->need = (size_t)len;
	cp_buf_reset(&p->pbuf);
	/* Cannot fail: the buffer is empty. */
	cp_buf_set_limit(&p->pbuf, p->need, NULL);
	return 0;
}

/* Consumes payload bytes from buf; returns how many, or a negative code. */
static long take_payload(struct codepod_frame_parser *p, const char *buf, size_t len,
                         const struct codepod_frame_sink *sink, void *ud, struct cp_err *err)
{
	size_t want = p->need - cp_buf_len(&p->pbuf);
	size_t n = len < want ? len : want;

	if (cp_buf_len(&p->pbuf) == 0 && len >= want) {
		/* Whole payload in the caller's buffer: no copy. */
		p->in_payload = 0;
		emit_frame(sink, ud, p->kind, buf, want);
		return (long)want;
	}
	/* n is at most what the frame still needs: only memory can fail. */
	if (cp_buf_add(&p->pbuf, buf, n, NULL)) {
		fail(p, CP_E_NOMEM);
		return cp_err_set(err, CP_E_NOMEM, "cannot buffer a %zu-byte frame", p->need);
	}
	if (cp_buf_len(&p->pbuf) == p->need) {
		p->in_payload = 0;
		emit_frame(sink, ud, p->kind, cp_buf_ptr(&p->pbuf), p->need);
		if (cp_buf_cap(&p->pbuf) > KEEP_BUF_MAX)
			cp_buf_free(&p->pbuf);
		else
			cp_buf_reset(&p->pbuf);
	}
	return (long)n;
}

/*
 * A header prefix is held back: complete it from buf. Returns the bytes of
 * buf consumed (0 when the hold was not a header and went out as raw), or a
 * negative code.
 */
static long resume_hold(struct codepod_frame_parser *p, const char *buf, size_t len,
                        const struct codepod_frame_sink *sink, void *ud, struct cp_err *err)
{
	char tmp[2 * CODEPOD_FRAME_HDR_MAX];
	size_t add = CODEPOD_FRAME_HDR_MAX - p->hold_len;
	unsigned long long flen = 0;
	char kind = 0;
	int r, rc;

	if (add > len)
		add = len;
	memcpy(tmp, p->hold, p->hold_len);
	memcpy(tmp + p->hold_len, buf, add);
	r = hdr_parse(p, tmp, p->hold_len + add, &kind, &flen);
	if (r == HDR_MORE && p->hold_len + add < CODEPOD_FRAME_HDR_MAX) {
		memcpy(p->hold + p->hold_len, buf, add);
		p->hold_len += add;
		return (long)add;
	}
	if (r <= 0) {
		/* Not a header: the held bytes hold no other 0x1E (see hdr_parse). */
		emit_raw(sink, ud, p->hold, p->hold_len);
		p->hold_len = 0;
		return 0;
	}
	add = (size_t)r - p->hold_len;
	p->hold_len = 0;
	rc = start_frame(p, kind, flen, sink, ud, err);
	return rc < 0 ? rc : (long)add;
}

/*
 * Scans buf for the next header; everything before it goes out as one raw
 * piece. Returns the bytes consumed, or a negative code.
 */
static long scan(struct codepod_frame_parser *p, const char *buf, size_t len,
                 const struct codepod_frame_sink *sink, void *ud, struct cp_err *err)
{
	size_t cur = 0;

	for (;;) {
		const char *m = memchr(buf + cur, HDR_MARK, len - cur);
		unsigned long long flen = 0;
		char kind = 0;
		size_t at, avail;
		int r, rc;

		if (!m) {
			emit_raw(sink, ud, buf, len);
			return (long)len;
		}
		at = (size_t)(m - buf);
		avail = len - at < CODEPOD_FRAME_HDR_MAX ? len - at : CODEPOD_FRAME_HDR_MAX;
		r = hdr_parse(p, m, avail, &kind, &flen);
		if (r == HDR_BAD || (r == HDR_MORE && avail >= CODEPOD_FRAME_HDR_MAX)) {
			cur = at + 1;
			continue;
		}
		emit_raw(sink, ud, buf, at);
		if (r == HDR_MORE) {
			memcpy(p->hold, m, avail);
			p->hold_len = avail;
			return (long)len;
		}
		rc = start_frame(p, kind, flen, sink, ud, err);
		return rc < 0 ? rc : (long)(at + (size_t)r);
	}
}

struct codepod_frame_parser *codepod_frame_parser_new(const char *nonce, size_t max_payload)
{
	struct codepod_frame_parser *p = NULL;

	if (!valid_nonce(nonce))
		return NULL;
	p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	memcpy(p->nonce, nonce, CODEPOD_FRAME_NONCE_LEN);
	p->max_payload = max_payload;
	cp_buf_init(&p->pbuf, 0); /* each frame sets its own limit */
	return p;
}

void codepod_frame_parser_free(struct codepod_frame_parser *p)
{
	if (!p)
		return;
	cp_buf_free(&p->pbuf);
	free(p);
}

int codepod_frame_feed(struct codepod_frame_parser *p, const char *buf, size_t len,
                  const struct codepod_frame_sink *sink, void *ud, struct cp_err *err)
{
	size_t pos = 0;

	if (p->err)
		return cp_err_set(err, p->err, "frame stream already failed (%s)",
		                  p->err == CP_E_TOO_BIG ? "frame too big" : "out of memory");
	while (pos < len) {
		long n;

		if (p->in_payload)
			n = take_payload(p, buf + pos, len - pos, sink, ud, err);
		else if (p->hold_len > 0)
			n = resume_hold(p, buf + pos, len - pos, sink, ud, err);
		else
			n = scan(p, buf + pos, len - pos, sink, ud, err);
		if (n < 0)
			return (int)n;
		pos += (size_t)n;
	}
	return 0;
}

int codepod_frame_finish(struct codepod_frame_parser *p, const struct codepod_frame_sink *sink, void *ud)
{
	int cut = 0;

	if (p->err)
		return 0;
	if (p->hold_len > 0) {
		emit_raw(sink, ud, p->hold, p->hold_len);
		p->hold_len = 0;
	}
	if (p->in_payload) {
		emit_raw(sink, ud, cp_buf_ptr(&p->pbuf), cp_buf_len(&p->pbuf));
		p->in_payload = 0;
		cp_buf_reset(&p->pbuf);
		cut = 1;
	}
	return cut;
}

int codepod_frame_header(char *out, size_t cap, const char *nonce, char kind, size_t len)
{
	int n;

	if (!out || !valid_nonce(nonce) || !valid_kind(kind))
		return -1;
	n = snprintf(out, cap, "\x1e" "cp1 %.32s %c %zu\n", nonce, kind, len);
	if (n < 0 || (size_t)n >= cap)
		return -1;
	return n;
}
