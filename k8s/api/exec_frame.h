/*
 * exec_frame.h - the channel codec of Kubernetes exec over WebSocket
 * (v4.channel.k8s.io and v5.channel.k8s.io, binary messages).
 *
 * Every data message starts with one channel byte: 0 stdin, 1 stdout,
 * 2 stderr, 3 error (a Status JSON, the last data message), 4 resize
 * ({"Width":W,"Height":H}), and in v5 only 255 = CLOSE, whose one payload
 * byte names the half-closed channel ("a 2-byte binary message [0xFF, ch]").
 * The server's first message is a lone channel byte: a zero-length payload,
 * not data. libwebsockets may hand a message over in fragments, and only the
 * first fragment carries the channel byte: struct k8s_exec_reasm puts the
 * channel back on every piece.
 *
 * Pure: no I/O, no loop. One object is used by one thread at a time.
 *
 * Ownership: k8s_exec_frame_parse() fills a struct k8s_exec_msg whose `data`
 * is *borrowed* from the message passed in (valid while that buffer is).
 * Builders write into caller-owned buffers. k8s_exec_reasm_new() returns a
 * new object freed with k8s_exec_reasm_free(); the pieces it returns are
 * borrowed, valid until the next k8s_exec_reasm_feed() or _free().
 */
#ifndef K8S_EXEC_FRAME_H
#define K8S_EXEC_FRAME_H

#include <stddef.h>

#include "base/err.h"

enum k8s_exec_channel {
	K8S_EXEC_NONE = -1,   /* zero-length message or payload: a no-op */
	K8S_EXEC_STDIN = 0,
	K8S_EXEC_STDOUT = 1,
	K8S_EXEC_STDERR = 2,
	K8S_EXEC_ERROR = 3,
	K8S_EXEC_RESIZE = 4,
	K8S_EXEC_CLOSE = 255  /* v5 only */
};

enum k8s_exec_proto { K8S_EXEC_V4 = 4, K8S_EXEC_V5 = 5 };

struct k8s_exec_msg {
	int channel;              /* enum k8s_exec_channel */
	const unsigned char *data; /* payload after the channel byte (borrowed) */
	size_t len;
	int closed_channel;       /* K8S_EXEC_CLOSE: the channel being closed */
	int first, final;         /* reassembler pieces: first/last of a message */
};

/**
 * k8s_exec_frame_parse() - demultiplex one complete message.
 * @proto: the negotiated protocol (CLOSE exists in v5 only).
 * Returns 0 (a zero-length message gives channel K8S_EXEC_NONE; a lone
 * channel byte gives that channel with len 0), CP_E_PARSE for an unknown
 * channel or a CLOSE that is not exactly [0xFF, ch] with ch <= 4.
 */
int k8s_exec_frame_parse(const void *msg, size_t len, enum k8s_exec_proto proto,
                         struct k8s_exec_msg *out, struct cp_err *err);

/**
 * k8s_exec_frame_data() - build [channel] + data into @out (@cap bytes).
 * Sets *@written to len + 1. Returns 0, CP_E_TOO_BIG when @cap is too small,
 * CP_E_INVALID_REQUEST for a channel other than stdin (0) or resize (4).
 */
int k8s_exec_frame_data(int channel, const void *data, size_t len,
                        unsigned char *out, size_t cap, size_t *written,
                        struct cp_err *err);

/* The v5 CLOSE message for @channel (normally stdin): writes 2 bytes. */
void k8s_exec_frame_close(int channel, unsigned char out[2]);

/**
 * k8s_exec_frame_resize() - build a resize message
 * [4]{"Width":W,"Height":H} into @out. Returns 0 or CP_E_TOO_BIG.
 */
int k8s_exec_frame_resize(unsigned width, unsigned height, unsigned char *out,
                          size_t cap, size_t *written, struct cp_err *err);

struct k8s_exec_reasm;

/**
 * k8s_exec_reasm_new() - reassembler for fragmented messages.
 * @proto: negotiated protocol.
 * @max_msg: largest accepted message payload (channel byte excluded), > 0.
 *
 * Stdout and stderr pieces are passed through as they arrive (not copied,
 * first/final set); every other channel (error Status, CLOSE, stdin, resize)
 * is buffered and returned whole with first = final = 1.
 */
struct k8s_exec_reasm *k8s_exec_reasm_new(enum k8s_exec_proto proto, size_t max_msg);

/**
 * k8s_exec_reasm_feed() - one received fragment.
 * @frag, @len: the fragment's bytes (borrowed).
 * @first, @final: whether it starts / ends a message (lws_is_first_fragment,
 *                 lws_is_final_fragment).
 * @out: receives a piece when 1 is returned.
 * Returns 1 with a piece, 0 when nothing is to be delivered yet,
 * CP_E_TOO_BIG over max_msg, CP_E_PARSE for a bad channel or a fragment out
 * of sequence, CP_E_NOMEM. After an error the current message is dropped
 * and the next fragment must be a first one.
 */
int k8s_exec_reasm_feed(struct k8s_exec_reasm *r, const void *frag, size_t len,
                        int first, int final, struct k8s_exec_msg *out,
                        struct cp_err *err);

void k8s_exec_reasm_free(struct k8s_exec_reasm *r);

#endif
