/*
 * super_frame.h - the framing of the supervisor's stream (kube_super.h,
 * k8s/backend/supervisor.js): 0xC5, a kind byte, the channel (uint32 BE), the
 * payload length (uint32 BE), the payload. What comes from the pod is
 * untrusted (a program there can write into the stream): this decoder checks
 * the magic, the kind and the length of every frame before any byte of its
 * payload is used, and keeps no more than KUBE_SFRAME_MAX_CTL bytes.
 *
 * Loop context: none (pure). Ownership: the parser is the caller's (no
 * allocation); buffers given to the sink are borrowed for the call.
 */
#ifndef K8S_SUPER_FRAME_H
#define K8S_SUPER_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* KUBE_SFRAME_MAGIC, KUBE_SFRAME_HDR, and a KUBE_SFRAME_<NAME> per kind
 * (its letter), from the one table of the stream's grammar. */
enum {
#define KUBE_SFRAME_CONST(name, value) KUBE_SFRAME_##name = (value),
#define KUBE_SFRAME_KIND(letter, name, way, class)
#include "k8s/backend/super_frame_kinds.def"
#undef KUBE_SFRAME_KIND
#undef KUBE_SFRAME_CONST
};
enum kube_sframe_kind {
#define KUBE_SFRAME_CONST(name, value)
#define KUBE_SFRAME_KIND(letter, name, way, class) KUBE_SFRAME_##name = (letter),
#include "k8s/backend/super_frame_kinds.def"
#undef KUBE_SFRAME_KIND
#undef KUBE_SFRAME_CONST
};
#define KUBE_SFRAME_MAX_DATA (1u << 20) /* O, E: the supervisor sends pipe reads */
#define KUBE_SFRAME_MAX_CTL 4096u       /* H, X, F, D, R */

struct kube_sframe_sink {
	/* O/E payload bytes, in pieces as they arrive (a frame may come in
	 * several calls). Non-zero: stop feeding at once. */
	int (*data)(void *ud, char kind, uint32_t chan, const char *buf, size_t len);
	/* A whole H/X/F/D/R frame. Non-zero: stop feeding at once. */
	int (*ctl)(void *ud, char kind, uint32_t chan, const char *buf, size_t len);
};

struct kube_sframe_parser {
	unsigned char hdr[KUBE_SFRAME_HDR];
	size_t hdr_len;
	char kind;
	uint32_t chan, left;
	char ctl[KUBE_SFRAME_MAX_CTL];
	size_t ctl_len;
};

void kube_sframe_init(struct kube_sframe_parser *p);

/* What a frame of @kind from the pod carries. */
enum kube_sframe_class {
	KUBE_SFRAME_NOT_FROM_POD, /* no kind the supervisor sends */
	KUBE_SFRAME_DATA,         /* a runner's bytes */
	KUBE_SFRAME_CTL,          /* a control message */
};
enum kube_sframe_class kube_sframe_from_pod(char kind);

/* 0 when all was consumed (or a sink asked to stop), -1 on a frame that
 * breaks the rules (*why says which; the stream is unusable from there). */
int kube_sframe_feed(struct kube_sframe_parser *p, const char *buf, size_t len, const struct kube_sframe_sink *sink,
             void *ud, const char **why);

/* The header of a frame going to the supervisor. */
void kube_sframe_header(unsigned char out[KUBE_SFRAME_HDR], char kind, uint32_t chan, uint32_t len);

#endif
