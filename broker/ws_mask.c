/*
 * ws_mask.c - following WebSocket client frames as libwebsockets reads them
 * (ws_mask.h says why and how).
 */
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "broker/ws_mask.h"

/* Descriptors past this are not followed (lws serves fewer: its
 * fd_limit_per_thread), and so cannot become WebSockets. */
#define MAX_FD 65536

enum { HDR0, HDR1, EXTLEN, KEY, PAYLOAD };

static _Atomic unsigned char tracked[MAX_FD];
static struct broker_wsmask table[MAX_FD];

static void feed_frames(struct broker_wsmask *m, const unsigned char *p, size_t n)
{
	while (n) {
		switch (m->fstate) {
		case HDR0: /* FIN, RSV, opcode: lws checks those */
			p++, n--;
			m->fstate = HDR1;
			continue;
		case HDR1: {
			unsigned char b = *p++;
			n--;
			m->masked = (b & 0x80) != 0;
			if (!m->masked)
				m->unmasked = 1;
			m->len = b & 0x7f;
			m->need = 0;
			if (m->len >= 126) {
				m->need = m->len == 126 ? 2 : 8;
				m->len = 0;
				m->fstate = EXTLEN;
			} else {
				m->fstate = KEY;
				m->need = m->masked ? 4 : 0;
			}
			break;
		}
		case EXTLEN:
			m->len = m->len << 8 | *p++;
			n--;
			if (--m->need == 0) {
				m->fstate = KEY;
				m->need = m->masked ? 4 : 0;
			}
			break;
		case KEY:
			if (m->need) {
				p++, n--;
				m->need--;
			}
			break;
		case PAYLOAD: {
			uint64_t skip = m->len < n ? m->len : n;
			p += skip;
			n -= (size_t)skip;
			m->len -= skip;
			break;
		}
		}
		if (m->fstate == KEY && m->need == 0)
			m->fstate = PAYLOAD;
		if (m->fstate == PAYLOAD && m->len == 0)
			m->fstate = HDR0;
	}
}

void broker_wsmask_feed(struct broker_wsmask *m, const unsigned char *p, size_t n)
{
	static const char end[] = "\r\n\r\n";
	while (n && !m->in_frames) {
		unsigned char c = *p++;
		n--;
		if (!m->started && (c == '\r' || c == '\n'))
			continue; /* blank lines before the request line are skipped */
		m->started = 1;
		if (c == (unsigned char)end[m->crlf])
			m->crlf++;
		else
			m->crlf = c == '\r' ? 1 : 0;
		if (m->crlf == 4)
			m->in_frames = 1;
	}
	feed_frames(m, p, n);
}

void broker_wsmask_track(int fd)
{
	if (fd < 0 || fd >= MAX_FD)
		return;
	memset(&table[fd], 0, sizeof table[fd]);
	atomic_store(&tracked[fd], 1);
}

void broker_wsmask_untrack(int fd)
{
	if (fd >= 0 && fd < MAX_FD)
		atomic_store(&tracked[fd], 0);
}

int broker_wsmask_upgradable(int fd)
{
	return fd >= 0 && fd < MAX_FD && atomic_load(&tracked[fd]) && table[fd].in_frames;
}

int broker_wsmask_unmasked(int fd)
{
	return fd >= 0 && fd < MAX_FD && atomic_load(&tracked[fd]) && table[fd].unmasked;
}

/* libwebsockets reads plain sockets with recv(): this definition, in the
 * program, is the one its calls bind to. The system call is made here, as
 * the C library's recv() would. */
ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t n = (ssize_t)syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
	if (n > 0 && !(flags & MSG_PEEK) && fd >= 0 && fd < MAX_FD &&
	    atomic_load_explicit(&tracked[fd], memory_order_relaxed))
		broker_wsmask_feed(&table[fd], buf, (size_t)n);
	return n;
}
