/*
 * fuzz_serve.c - `codepod serve --listen` (broker/http_server*.c on
 * libwebsockets) on arbitrary bytes from a real TCP client on 127.0.0.1:
 * HTTP requests, request bodies, the WebSocket upgrade and WebSocket
 * frames carrying session messages. The engine runs over a fake backend
 * whose runner answers every program with Y and R "1".
 *
 * One server for the whole run (set up on the first input, port 0, found
 * back as the process's one listening socket). Byte 0 picks what the rest
 * is:
 *   0  raw bytes: the whole request, headers and all
 *   1  the body of an authorized POST /v1/executions
 *   2  the body of an authorized POST /v1/declarations
 *   3  the path of an authorized GET (up to the first newline)
 *   4  session messages, one per line, each in a masked text frame after
 *      a valid upgrade to /v1/session (subprotocol codepod.v1)
 *   5  raw WebSocket frames after that upgrade
 * The client then half-closes and reads until the server closes (at most
 * 2 s: a bounded wait, not a check); the server must stay up for the next
 * input. Invariants: no crash, no sanitizer report, and the server still
 * answers GET /healthz with 200 at the end of every input.
 * FUZZ_SERVE_TRACE=1 prints the start of each reply.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <uv.h>

#include "runner/codepod.h"
#include "fake_scripted.h"
#include "broker/http_server.h"
#include "base/idset.h"
#include "base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TOKEN "fuzz-token"
#define FUZZ_MAX_INPUT (256u * 1024u)

/* The fake runner's answer to every program (fake_scripted.h): Y, R "1". */
static const uint8_t SCRIPT[] = "Y\0\x0a{\"pid\":42}" "R\0\x01" "1";

/* ---- the server, once ---- */

static struct {
	uv_loop_t loop;
	struct fake_backend fb;
	struct codepod *cp;
	struct cp_idset *ids;
	struct broker_http *srv;
	char dir[64], token_file[96];
	int port;
} g;

static void remove_token(void)
{
	unlink(g.token_file);
	rmdir(g.dir);
}

/* The port of this process's one listening TCP socket (the server's). */
static int listening_port(void)
{
	DIR *d = opendir("/proc/self/fd");
	int port = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL && !port) {
		int fd = (int)strtol(e->d_name, NULL, 10);
		int on = 0;
		socklen_t len = sizeof on;
		struct sockaddr_in sa;
		socklen_t salen = sizeof sa;
		if (e->d_name[0] == '.' ||
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) || !on ||
		    getsockname(fd, (struct sockaddr *)&sa, &salen) || sa.sin_family != AF_INET)
			continue;
		port = ntohs(sa.sin_port);
	}
	if (d)
		closedir(d);
	return port;
}

static void setup(void)
{
	cp_log_set_level(CP_LOG_ERROR);
	if (uv_loop_init(&g.loop))
		abort();
	snprintf(g.dir, sizeof g.dir, "/tmp/fuzz-serve-XXXXXX");
	if (!mkdtemp(g.dir))
		abort();
	snprintf(g.token_file, sizeof g.token_file, "%s/token", g.dir);
	FILE *f = fopen(g.token_file, "w");
	if (!f || fputs(TOKEN "\n", f) < 0 || fclose(f))
		abort();
	atexit(remove_token);
	fake_backend_init(&g.fb, &g.loop, SCRIPT, sizeof SCRIPT - 1);
	g.cp = fake_engine_new(&g.loop, &g.fb.base);
	g.ids = cp_idset_new(1024);
	if (!g.ids)
		abort();
	static const char *const listen[] = { "127.0.0.1:0" };
	struct broker_http_config hc;
	broker_http_config_defaults(&hc);
	hc.loop = &g.loop;
	hc.cp = g.cp;
	hc.ids = g.ids;
	hc.listen = listen;
	hc.nlisten = 1;
	hc.token_file = g.token_file;
	hc.max_message = 64 * 1024;
	hc.max_body = 64 * 1024;
	hc.header_timeout_s = 2;
	hc.idle_timeout_s = 2;
	hc.webhook_timeout_ms = 200;
	struct cp_err err;
	if (broker_http_start(&hc, &g.srv, &err)) {
		fprintf(stderr, "fuzz_serve: %s\n", err.msg);
		abort();
	}
	g.port = listening_port();
	if (!g.port)
		abort();
}

/* ---- one client connection ---- */

struct buf {
	unsigned char *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + n)
			cap *= 2;
		unsigned char *np = realloc(b->p, cap);
		if (!np)
			abort();
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* A masked client frame (RFC 6455 5.2), FIN set. */
static void ws_frame(struct buf *b, unsigned opcode, const uint8_t *d, size_t n)
{
	unsigned char h[14];
	size_t k = 0;
	static const unsigned char mask[4] = { 0x12, 0x34, 0x56, 0x78 };
	h[k++] = (unsigned char)(0x80u | opcode);
	if (n < 126) {
		h[k++] = (unsigned char)(0x80u | n);
	} else if (n < 65536) {
		h[k++] = 0x80u | 126u;
		h[k++] = (unsigned char)(n >> 8);
		h[k++] = (unsigned char)n;
	} else {
		h[k++] = 0x80u | 127u;
		for (int i = 7; i >= 0; i--)
			h[k++] = (unsigned char)((uint64_t)n >> (8 * i));
	}
	memcpy(h + k, mask, 4);
	k += 4;
	put(b, h, k);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)(d[i] ^ mask[i & 3]);
		put(b, &c, 1);
	}
}

static const char UPGRADE[] =
	"GET /v1/session HTTP/1.1\r\nHost: fuzz\r\nUpgrade: websocket\r\n"
	"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: codepod.v1\r\n"
	"Authorization: Bearer " TOKEN "\r\n\r\n";

static void request(struct buf *b, const uint8_t *d, size_t n, unsigned mode)
{
	char hdr[512];
	switch (mode) {
	case 1:
	case 2:
		snprintf(hdr, sizeof hdr,
		         "POST %s HTTP/1.1\r\nHost: fuzz\r\nAuthorization: Bearer " TOKEN "\r\n"
		         "Connection: close\r\nContent-Type: application/json\r\n"
		         "Content-Length: %zu\r\n\r\n",
		         mode == 1 ? "/v1/executions" : "/v1/declarations", n);
		puts_(b, hdr);
		put(b, d, n);
		break;
	case 3: {
		size_t k = 0;
		while (k < n && k < 300 && d[k] != '\n' && d[k] != '\r')
			k++;
		puts_(b, "GET ");
		put(b, d, k);
		puts_(b, " HTTP/1.1\r\nHost: fuzz\r\nAuthorization: Bearer " TOKEN "\r\n"
		         "Connection: close\r\n\r\n");
		break;
	}
	case 4: {
		puts_(b, UPGRADE);
		size_t start = 0;
		for (size_t i = 0; i <= n; i++) {
			if (i == n || d[i] == '\n') {
				if (i > start)
					ws_frame(b, 0x1, d + start, i - start);
				start = i + 1;
			}
		}
		break;
	}
	case 5:
		puts_(b, UPGRADE);
		put(b, d, n);
		break;
	default:
		put(b, d, n);
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_client(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)g.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || (connect(fd, (struct sockaddr *)&sa, sizeof sa) && errno != EINPROGRESS))
		abort();
	return fd;
}

/* Sends @b, half-closes (when @half_close), reads until the server closes,
 * @want bytes came back, nothing came for 100 ms after the request was
 * sent (only when @want is 0: a WebSocket session's answers are in), or
 * @secs pass;
 * what came back goes to *reply when not NULL. */
static void exchange(const struct buf *b, int half_close, size_t want, double secs,
                     struct buf *reply)
{
	int fd = connect_client();
	size_t sent = 0;
	int shut = 0;
	char rbuf[8192];
	double quiet_from = 0;
	for (double end = now_s() + secs; now_s() < end;) {
		if (sent == b->n && quiet_from == 0)
			quiet_from = now_s();
		if (!want && quiet_from > 0 && now_s() - quiet_from > 0.1)
			break; /* an answer is awaited only when @want says how much */
		uv_run(&g.loop, UV_RUN_NOWAIT);
		if (sent < b->n) {
			ssize_t w = send(fd, b->p + sent, b->n - sent, MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR && errno != ENOTCONN)
				break;
		} else if (half_close && !shut) {
			shutdown(fd, SHUT_WR);
			shut = 1;
		}
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, 2) > 0) {
			ssize_t r = recv(fd, rbuf, sizeof rbuf, 0);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
				break;
			if (r > 0)
				quiet_from = now_s();
			if (r > 0 && reply)
				put(reply, rbuf, (size_t)r);
			if (want && reply && reply->n >= want)
				break;
		}
	}
	close(fd);
	/* Let the server see the close and clean up. */
	for (int i = 0; i < 20; i++) {
		uv_run(&g.loop, UV_RUN_NOWAIT);
		usleep(200);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!g.srv)
		setup();
	if (size == 0 || size > FUZZ_MAX_INPUT)
		return 0;
	struct buf b = { 0 }, got = { 0 };
	int trace = getenv("FUZZ_SERVE_TRACE") != NULL;
	request(&b, data + 1, size - 1, data[0] % 6u);
	unsigned mode = data[0] % 6u;
	exchange(&b, mode == 0 || mode == 5, 0, 2.0, trace ? &got : NULL);
	if (trace)
		fprintf(stderr, "mode %u: %.*s\n---\n", mode, (int)(got.n < 400 ? got.n : 400),
		        got.p ? (const char *)got.p : "");
	free(b.p);
	free(got.p);
	/* The server survived and still serves. */
	struct buf probe = { 0 }, reply = { 0 };
	puts_(&probe, "GET /healthz HTTP/1.1\r\nHost: fuzz\r\n\r\n");
	exchange(&probe, 0, 12, 10.0, &reply);
	if (reply.n < 12 || memcmp(reply.p, "HTTP/1.1 200", 12) != 0) {
		fprintf(stderr, "fuzz_serve: GET /healthz got %zu bytes: %.*s\n", reply.n,
		        (int)(reply.n < 300 ? reply.n : 300), reply.p ? (const char *)reply.p : "");
		abort();
	}
	free(probe.p);
	free(reply.p);
	return 0;
}
