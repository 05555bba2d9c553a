/*
 * fakekube_fixture.h - start and stop tests/fakekube/serve from a cmocka
 * group setup (STYLE 8.12), and talk to its control endpoints.
 *
 * fakekube_start(): a mktemp -d folder, `serve DIR/kubeconfig --state-dir
 * DIR/state --portfile DIR/port --pidfile DIR/pid` with its output in
 * DIR/server.log, then waits (20 s at most) until GET /version answers over
 * TLS with X-Fakekube-Pid equal to the child's pid. fakekube_stop() checks
 * the server is still alive, sends SIGTERM, waits 10 s at most (then
 * SIGKILL), prints the log when asked, and removes the folder.
 * fakekube_ctl() makes one blocking request to the server with the client
 * certificate (control endpoints such as /fakekube/faults; test-only code,
 * blocking libcurl is fine here). Tests run from the repository root.
 *
 * Ownership: struct fakekube is caller storage (static in the test file);
 * every string in it is an inline array. fakekube_ctl() returns a new body
 * in *out (free()) when out is not NULL.
 *
 * All functions are static: include this header in one test file each.
 */
#ifndef FAKEKUBE_FIXTURE_H
#define FAKEKUBE_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

struct fakekube {
	char dir[128];
	char kubeconfig[256];
	char state[256];
	char ca[256], cert[256], key[256], token_file[256];
	char token[128];
	char server[128]; /* https://127.0.0.1:PORT */
	int port;
	pid_t pid;
};

static inline long fk_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int fk_read(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

struct fk_buf {
	char *p;
	size_t n;
};

static size_t fk_write(char *p, size_t sz, size_t n, void *ud)
{
	struct fk_buf *b = ud;
	char *nb = realloc(b->p, b->n + sz * n + 1);
	if (!nb)
		return 0;
	memcpy(nb + b->n, p, sz * n);
	b->n += sz * n;
	nb[b->n] = '\0';
	b->p = nb;
	return sz * n;
}

struct fk_hdr {
	char pid[32];
};

static size_t fk_header(char *p, size_t sz, size_t n, void *ud)
{
	struct fk_hdr *h = ud;
	size_t len = sz * n;
	if (len > 15 && !strncasecmp(p, "X-Fakekube-Pid:", 15)) {
		size_t i = 15, k = 0;
		while (i < len && p[i] == ' ')
			i++;
		while (i < len && p[i] >= '0' && p[i] <= '9' && k < sizeof h->pid - 1)
			h->pid[k++] = p[i++];
		h->pid[k] = '\0';
	}
	return len;
}

/* One blocking request; returns the HTTP status or -1. */
static int fakekube_req(struct fakekube *fx, const char *method, const char *path,
                        const char *body, char **out, char pid_hdr[32], long timeout_ms)
{
	CURL *e = curl_easy_init();
	if (!e)
		return -1;
	char url[512];
	snprintf(url, sizeof url, "%s%s", fx->server, path);
	struct fk_buf b = {NULL, 0};
	struct fk_hdr h = {""};
	struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_CAINFO, fx->ca);
	curl_easy_setopt(e, CURLOPT_SSLCERT, fx->cert);
	curl_easy_setopt(e, CURLOPT_SSLKEY, fx->key);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fk_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, fk_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, &h);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	if (body)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	long code = -1;
	if (curl_easy_perform(e) == CURLE_OK)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(e);
	curl_slist_free_all(hd);
	if (pid_hdr)
		snprintf(pid_hdr, 32, "%s", h.pid);
	if (out)
		*out = b.p;
	else
		free(b.p);
	return (int)code;
}

/* A control request (/fakekube/...): returns the HTTP status. */
static int fakekube_ctl(struct fakekube *fx, const char *method, const char *path,
                        const char *body, char **out)
{
	return fakekube_req(fx, method, path, body, out, NULL, 10000);
}

static int fakekube_start(struct fakekube *fx)
{
	memset(fx, 0, sizeof *fx);
	snprintf(fx->dir, sizeof fx->dir, "/tmp/fakekube.XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	char portfile[300], pidfile[300], log[300];
	snprintf(fx->kubeconfig, sizeof fx->kubeconfig, "%s/kubeconfig", fx->dir);
	snprintf(fx->state, sizeof fx->state, "%s/state", fx->dir);
	snprintf(portfile, sizeof portfile, "%s/port", fx->dir);
	snprintf(pidfile, sizeof pidfile, "%s/pid", fx->dir);
	snprintf(log, sizeof log, "%s/server.log", fx->dir);
	snprintf(fx->ca, sizeof fx->ca, "%s/state/pki/ca.crt", fx->dir);
	snprintf(fx->cert, sizeof fx->cert, "%s/state/pki/client.crt", fx->dir);
	snprintf(fx->key, sizeof fx->key, "%s/state/pki/client.key", fx->dir);
	snprintf(fx->token_file, sizeof fx->token_file, "%s/state/pki/token", fx->dir);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl("tests/fakekube/serve", "serve", fx->kubeconfig, "--state-dir", fx->state,
		      "--portfile", portfile, "--pidfile", pidfile, (char *)NULL);
		_exit(127);
	}
	fx->pid = pid;
	long end = fk_now_ms() + 20000;
	while (fk_now_ms() < end) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr, "fakekube: serve exited early (see %s)\n", log);
			fx->pid = 0;
			return -1;
		}
		char port[32];
		if (fk_read(portfile, port, sizeof port) == 0 && access(fx->kubeconfig, R_OK) == 0 &&
		    fk_read(fx->token_file, fx->token, sizeof fx->token) == 0) {
			fx->port = (int)strtol(port, NULL, 10);
			snprintf(fx->server, sizeof fx->server, "https://127.0.0.1:%d", fx->port);
			char got[32];
			/* The pid header proves we reached the server we started. */
			if (fakekube_req(fx, "GET", "/version", NULL, NULL, got, 2000) == 200 &&
			    strtol(got, NULL, 10) == (long)pid)
				return 0;
		}
		usleep(50 * 1000);
	}
	fprintf(stderr, "fakekube: serve did not come up in 20 s\n");
	return -1;
}

static int fk_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* Returns 0 when the server was alive and ended on SIGTERM with status 0. */
static int fakekube_stop(struct fakekube *fx, int print_log)
{
	int rc = 0, st = 0;
	if (fx->pid > 0) {
		if (waitpid(fx->pid, &st, WNOHANG) == fx->pid) {
			fprintf(stderr, "fakekube: server died during the tests\n");
			rc = -1;
		} else {
			kill(fx->pid, SIGTERM);
			long end = fk_now_ms() + 10000;
			int done = 0;
			while (!done && fk_now_ms() < end) {
				done = waitpid(fx->pid, &st, WNOHANG) == fx->pid;
				if (!done)
					usleep(20 * 1000);
			}
			if (!done) {
				kill(fx->pid, SIGKILL);
				waitpid(fx->pid, &st, 0);
				rc = -1;
			} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				rc = -1;
			}
		}
	}
	if (print_log || rc) {
		char log[300];
		snprintf(log, sizeof log, "%s/server.log", fx->dir);
		FILE *f = fopen(log, "r");
		char line[1024];
		while (f && fgets(line, sizeof line, f))
			fprintf(stderr, "fakekube| %s", line);
		if (f)
			fclose(f);
	}
	if (fx->dir[0])
		nftw(fx->dir, fk_rm, 16, FTW_DEPTH | FTW_PHYS);
	curl_global_cleanup();
	return rc;
}

#endif
