/*
 * super_frame.c - the supervisor stream's frame decoder (super_frame.h).
 */
#include <string.h>

#include "k8s/backend/super_frame.h"

void kube_sframe_init(struct kube_sframe_parser *p)
{
	memset(p, 0, sizeof *p);
}

#define KUBE_SFRAME_FROM_POD_DATA KUBE_SFRAME_DATA
#define KUBE_SFRAME_FROM_POD_CTL KUBE_SFRAME_CTL
#define KUBE_SFRAME_TO_POD_DATA KUBE_SFRAME_NOT_FROM_POD
#define KUBE_SFRAME_TO_POD_CTL KUBE_SFRAME_NOT_FROM_POD

enum kube_sframe_class kube_sframe_from_pod(char kind)
{
	switch (kind) {
#define KUBE_SFRAME_CONST(name, value)
#define KUBE_SFRAME_KIND(letter, name, way, class) \
	case letter: return KUBE_SFRAME_##way##_##class;
#include "k8s/backend/super_frame_kinds.def"
#undef KUBE_SFRAME_KIND
#undef KUBE_SFRAME_CONST
	default: return KUBE_SFRAME_NOT_FROM_POD;
	}
}

static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

int kube_sframe_feed(struct kube_sframe_parser *p, const char *buf, size_t len, const struct kube_sframe_sink *sink,
             void *ud, const char **why)
{
	while (len > 0) {
		if (p->hdr_len < KUBE_SFRAME_HDR) {
			size_t take = KUBE_SFRAME_HDR - p->hdr_len < len ? KUBE_SFRAME_HDR - p->hdr_len : len;
			memcpy(p->hdr + p->hdr_len, buf, take);
			p->hdr_len += take;
			buf += take;
			len -= take;
			if (p->hdr_len < KUBE_SFRAME_HDR)
				return 0;
			p->kind = (char)p->hdr[1];
			p->chan = be32(p->hdr + 2);
			p->left = be32(p->hdr + 6);
			p->ctl_len = 0;
			int data = kube_sframe_from_pod(p->kind) == KUBE_SFRAME_DATA;
			int ctl = kube_sframe_from_pod(p->kind) == KUBE_SFRAME_CTL;
			if (p->hdr[0] != KUBE_SFRAME_MAGIC || (!data && !ctl)) {
				*why = "a malformed frame header";
				return -1;
			}
			if (p->left > (data ? KUBE_SFRAME_MAX_DATA : KUBE_SFRAME_MAX_CTL)) {
				*why = "a frame over its size limit";
				return -1;
			}
			if (p->left == 0) {
				p->hdr_len = 0;
				if (ctl && sink->ctl(ud, p->kind, p->chan, p->ctl, 0))
					return 0;
				continue;
			}
		}
		size_t take = p->left < len ? p->left : len;
		int data = kube_sframe_from_pod(p->kind) == KUBE_SFRAME_DATA;
		if (data) {
			if (sink->data(ud, p->kind, p->chan, buf, take)) {
				p->left -= (uint32_t)take;
				if (p->left == 0)
					p->hdr_len = 0;
				return 0;
			}
		} else {
			memcpy(p->ctl + p->ctl_len, buf, take);
			p->ctl_len += take;
		}
		buf += take;
		len -= take;
		p->left -= (uint32_t)take;
		if (p->left == 0) {
			p->hdr_len = 0;
			if (!data && sink->ctl(ud, p->kind, p->chan, p->ctl, p->ctl_len))
				return 0;
		}
	}
	return 0;
}

void kube_sframe_header(unsigned char out[KUBE_SFRAME_HDR], char kind, uint32_t chan, uint32_t len)
{
	out[0] = KUBE_SFRAME_MAGIC;
	out[1] = (unsigned char)kind;
	out[2] = (unsigned char)(chan >> 24);
	out[3] = (unsigned char)(chan >> 16);
	out[4] = (unsigned char)(chan >> 8);
	out[5] = (unsigned char)chan;
	out[6] = (unsigned char)(len >> 24);
	out[7] = (unsigned char)(len >> 16);
	out[8] = (unsigned char)(len >> 8);
	out[9] = (unsigned char)len;
}
