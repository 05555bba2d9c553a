/*
 * ws_mask.h - is every frame a WebSocket client sends masked (RFC 6455
 * 5.1: a server must close the connection on an unmasked one)?
 * libwebsockets 4.1 accepts unmasked client frames and tells its callbacks
 * nothing about masking, so the server follows each connection's bytes
 * itself, as lws reads them: the request head, then the frame headers
 * (length, mask bit), skipping the payloads. The WebSocket callback asks
 * before it handles a message and closes with 1002 when a frame was not
 * masked.
 *
 * How the bytes are seen: this module defines recv(), which libwebsockets
 * calls for every read of a plain socket; it makes the system call itself
 * and, for a descriptor the server tracks, feeds what was read (not what
 * was only peeked) to the parser. Every other descriptor passes through
 * untouched. A WebSocket is tracked from the byte its connection was
 * accepted at, so an upgrade is allowed only as a connection's first
 * request (broker_wsmask_upgradable()).
 *
 * Ownership: a static table of descriptors, no allocation. Context: the
 * loop thread tracks and asks; recv() may run on any thread (an untracked
 * descriptor costs one atomic load).
 */
#ifndef BROKER_WS_MASK_H
#define BROKER_WS_MASK_H

#include <stddef.h>
#include <stdint.h>

/* One connection's parse (exposed for the unit test). */
struct broker_wsmask {
	unsigned char in_frames; /* the first request head has ended */
	unsigned char started;   /* a byte other than CR or LF was seen */
	unsigned char crlf;      /* how much of "\r\n\r\n" was just seen */
	unsigned char fstate;    /* the frame header's parse state */
	unsigned char need;      /* extended-length or mask bytes still to come */
	unsigned char masked;    /* the frame being read has a mask */
	unsigned char unmasked;  /* a frame without a mask was seen: sticky */
	uint64_t len;            /* the payload still to skip, or the length being read */
};

/* Feed @n bytes read from the connection. */
void broker_wsmask_feed(struct broker_wsmask *m, const unsigned char *p, size_t n);

/* A connection was accepted on @fd: follow it from its first byte. */
void broker_wsmask_track(int fd);
/* Stop following @fd (closed, or its first request was not an upgrade). */
void broker_wsmask_untrack(int fd);
/* May @fd become a WebSocket: followed from its first byte, and this is
 * its first request? */
int broker_wsmask_upgradable(int fd);
/* Did the client on @fd send an unmasked frame? */
int broker_wsmask_unmasked(int fd);

#endif
