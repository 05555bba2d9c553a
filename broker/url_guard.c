/*
 * url_guard.c - the broker URL rules (url_guard.h): --broker-allow entries,
 * codepod's own listeners, and the addresses refused by default.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "broker/url_guard.h"

#define MAX_NAME 253
#define MAX_SELF 128

/* An address as the rules see it: IPv4 (in b[0..3]) or IPv6. */
struct ip {
	int v4;
	unsigned char b[16];
};

struct cidr {
	struct ip ip;
	unsigned bits;
};

struct self {
	struct ip ip;
	unsigned port;
};

struct broker_urlguard {
	int listed; /* --broker-allow given: exactly what it names */
	struct cidr cidrs[BROKER_URLGUARD_MAX];
	size_t ncidrs;
	char names[BROKER_URLGUARD_MAX][MAX_NAME + 1];
	size_t nnames;
	struct self self[MAX_SELF]; /* listeners, and every local address of a wildcard one */
	size_t nself;
};

/* IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64
 * (64:ff9b::a.b.c.d) addresses reach the IPv4 address they carry. */
static struct ip from_v6(const unsigned char b[16])
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const unsigned char compat[12] = { 0 };
	static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };
	struct ip ip = { 0, { 0 } };
	int carries = !memcmp(b, mapped, 12) || !memcmp(b, nat64, 12) ||
	              (!memcmp(b, compat, 12) && (b[12] | b[13] | b[14]) != 0);
	if (carries) {
		ip.v4 = 1;
		memcpy(ip.b, b + 12, 4);
	} else {
		memcpy(ip.b, b, 16);
	}
	return ip;
}

static int from_sockaddr(const struct sockaddr *sa, struct ip *ip, unsigned *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
		*ip = (struct ip){ 1, { 0 } };
		memcpy(ip->b, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
		*ip = from_v6(in6->sin6_addr.s6_addr);
		*port = ntohs(in6->sin6_port);
		return 0;
	}
	return -1;
}

static void ip_text(const struct ip *ip, char *buf, size_t cap)
{
	if (!inet_ntop(ip->v4 ? AF_INET : AF_INET6, ip->b, buf, (socklen_t)cap))
		snprintf(buf, cap, "?");
}

static int in_prefix(const struct ip *ip, const struct ip *net, unsigned bits)
{
	if (ip->v4 != net->v4)
		return 0;
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(ip->b, net->b, whole))
		return 0;
	if (!rest)
		return 1;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (ip->b[whole] & mask) == (net->b[whole] & mask);
}

/* Link-local and cloud metadata addresses. */
static const char *denied_rule(const struct ip *ip)
{
	static const struct ip v6_metadata = { 0, { 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0,
	                                            0, 0, 0x02, 0x54 } };
	if (ip->v4 && ip->b[0] == 169 && ip->b[1] == 254)
		return "169.254.0.0/16";
	if (!ip->v4 && ip->b[0] == 0xfe && (ip->b[1] & 0xc0) == 0x80)
		return "fe80::/10";
	if (in_prefix(ip, &v6_metadata, 128))
		return "fd00:ec2::254";
	return NULL;
}

static int is_unspecified(const struct ip *ip)
{
	static const unsigned char zero[16] = { 0 };
	return !memcmp(ip->b, zero, ip->v4 ? 4 : 16);
}

/* An address given as such: dotted IPv4 strictly, or IPv6 (brackets allowed). */
static int parse_ip_strict(const char *s, struct ip *ip)
{
	char buf[INET6_ADDRSTRLEN + 2];
	size_t n = strlen(s);
	if (n >= sizeof buf)
		return -1;
	if (s[0] == '[' && n > 2 && s[n - 1] == ']') {
		memcpy(buf, s + 1, n - 2);
		buf[n - 2] = '\0';
	} else {
		memcpy(buf, s, n + 1);
	}
	unsigned char b[16];
	if (inet_pton(AF_INET, buf, b) == 1) {
		*ip = (struct ip){ 1, { 0 } };
		memcpy(ip->b, b, 4);
		return 0;
	}
	if (inet_pton(AF_INET6, buf, b) == 1) {
		*ip = from_v6(b);
		return 0;
	}
	return -1;
}

/* A URL's host as the C library would read it: IPv4 in every spelling
 * inet_aton() takes (decimal, hex, octal, fewer parts), or IPv6. */
static int parse_host_ip(const char *host, struct ip *ip)
{
	struct in_addr a;
	if (!strchr(host, ':') && inet_aton(host, &a)) {
		*ip = (struct ip){ 1, { 0 } };
		memcpy(ip->b, &a, 4);
		return 0;
	}
	return strchr(host, ':') ? parse_ip_strict(host, ip) : -1;
}

/* Lower case, without a trailing dot; -1 when it is no host name. */
static int norm_name(const char *s, size_t n, char out[MAX_NAME + 1])
{
	if (n && s[n - 1] == '.')
		n--;
	if (n == 0 || n > MAX_NAME)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!isalnum(c) && c != '-' && c != '.' && c != '_')
			return -1;
		out[i] = (char)tolower(c);
	}
	out[n] = '\0';
	return 0;
}

static int add_entry(struct broker_urlguard *g, const char *s, size_t n, struct cp_err *err)
{
	char buf[MAX_NAME + 8];
	if (n >= sizeof buf)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--broker-allow: an entry is too long");
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (g->ncidrs + g->nnames >= BROKER_URLGUARD_MAX)
		return cp_err_set(err, CP_E_INVALID_REQUEST, "--broker-allow: at most %d entries",
		                  BROKER_URLGUARD_MAX);
	char *slash = strchr(buf, '/');
	struct cidr c;
	if (slash) {
		*slash = '\0';
		char *end = NULL;
		unsigned long bits = strtoul(slash + 1, &end, 10);
		if (parse_ip_strict(buf, &c.ip) || !slash[1] || *end || !isdigit((unsigned char)slash[1]) ||
		    bits > (c.ip.v4 ? 32u : 128u) || (strchr(buf, ':') && c.ip.v4))
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "--broker-allow %.*s: not ADDRESS/PREFIX", (int)n, s);
		c.bits = (unsigned)bits;
		g->cidrs[g->ncidrs++] = c;
		return 0;
	}
	if (parse_ip_strict(buf, &c.ip) == 0) {
		c.bits = c.ip.v4 ? 32 : 128;
		g->cidrs[g->ncidrs++] = c;
		return 0;
	}
	if (norm_name(buf, n, g->names[g->nnames]))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "--broker-allow %.*s: not a host name, an address or ADDRESS/PREFIX",
		                  (int)n, s);
	g->nnames++;
	return 0;
}

int broker_urlguard_new(const char *const *allow, struct broker_urlguard **out,
                        struct cp_err *err)
{
	struct broker_urlguard *g = calloc(1, sizeof *g);
	*out = NULL;
	if (!g)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	for (size_t i = 0; allow && allow[i]; i++) {
		for (const char *p = allow[i]; *p;) {
			size_t n = strcspn(p, ",");
			const char *s = p;
			size_t len = n;
			while (len && isspace((unsigned char)*s)) {
				s++;
				len--;
			}
			while (len && isspace((unsigned char)s[len - 1]))
				len--;
			int rc = len ? add_entry(g, s, len, err) : 0;
			if (rc) {
				free(g);
				return rc;
			}
			g->listed = 1;
			p += n;
			if (*p == ',')
				p++;
		}
	}
	*out = g;
	return 0;
}

void broker_urlguard_free(struct broker_urlguard *g)
{
	free(g);
}

static void add_self_ip(struct broker_urlguard *g, const struct ip *ip, unsigned port)
{
	if (g->nself < MAX_SELF)
		g->self[g->nself++] = (struct self){ *ip, port };
}

int broker_urlguard_add_self(struct broker_urlguard *g, const struct sockaddr *sa,
                             struct cp_err *err)
{
	struct ip ip;
	unsigned port;
	if (from_sockaddr(sa, &ip, &port))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "a listener that is not IPv4 or IPv6");
	add_self_ip(g, &ip, port);
	if (!is_unspecified(&ip))
		return 0;
	/* every address of this host reaches a wildcard listener */
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
			struct ip a;
			unsigned ignored;
			if (i->ifa_addr && from_sockaddr(i->ifa_addr, &a, &ignored) == 0)
				add_self_ip(g, &a, port);
		}
		freeifaddrs(ifs);
	}
	return 0;
}

static int is_loopback(const struct ip *ip)
{
	static const unsigned char one[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
	return ip->v4 ? ip->b[0] == 127 : !memcmp(ip->b, one, 16);
}

/* Does a connection to @ip:@port reach one of codepod's own listeners? */
static int is_self(const struct broker_urlguard *g, const struct ip *ip, unsigned port)
{
	for (size_t i = 0; i < g->nself; i++) {
		const struct self *s = &g->self[i];
		if (s->port != port)
			continue;
		/* the unspecified address connects to this host; a wildcard
		 * listener takes loopback too */
		if (is_unspecified(ip) || (is_unspecified(&s->ip) && is_loopback(ip)))
			return 1;
		if (s->ip.v4 == ip->v4 && !memcmp(s->ip.b, ip->b, ip->v4 ? 4 : 16))
			return 1;
	}
	return 0;
}

static int name_listed(const struct broker_urlguard *g, const char *host)
{
	char n[MAX_NAME + 1];
	if (!host || norm_name(host, strlen(host), n))
		return 0;
	for (size_t i = 0; i < g->nnames; i++)
		if (!strcmp(g->names[i], n))
			return 1;
	return 0;
}

static int check_ip(const struct broker_urlguard *g, const char *host, const struct ip *ip,
                    unsigned port, struct cp_err *err)
{
	char text[INET6_ADDRSTRLEN];
	ip_text(ip, text, sizeof text);
	if (is_self(g, ip, port))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "broker.url: %s port %u is codepod's own listener, never a broker",
		                  text, port);
	const char *denied = denied_rule(ip);
	if (g->listed) {
		for (size_t i = 0; i < g->ncidrs; i++)
			if (in_prefix(ip, &g->cidrs[i].ip, g->cidrs[i].bits))
				return 0;
		if (!denied && name_listed(g, host))
			return 0;
		if (!denied)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "broker.url: %s is not named by --broker-allow", text);
	}
	if (denied)
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "broker.url: %s is a link-local or metadata address (%s), refused "
		                  "unless --broker-allow names it", text, denied);
	return 0;
}

int broker_urlguard_addr(const struct broker_urlguard *g, const char *host,
                         const struct sockaddr *sa, struct cp_err *err)
{
	struct ip ip;
	unsigned port;
	if (from_sockaddr(sa, &ip, &port))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "broker.url: only IPv4 and IPv6 addresses are brokers");
	return check_ip(g, host, &ip, port, err);
}

static int url_fail(CURLU *u, struct cp_err *err, const char *why)
{
	curl_url_cleanup(u);
	return cp_err_set(err, CP_E_INVALID_REQUEST, "broker.url: %s", why);
}

int broker_urlguard_url(const struct broker_urlguard *g, const char *url, char *host,
                        size_t cap, struct cp_err *err)
{
	CURLU *u = curl_url();
	char *part = NULL;
	if (!u)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	if (cap)
		host[0] = '\0';
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &part, 0) != CURLUE_OK ||
	    (strcmp(part, "http") && strcmp(part, "https"))) {
		curl_free(part);
		return url_fail(u, err, "not a valid http:// or https:// URL");
	}
	curl_free(part);
	part = NULL;
	int user = curl_url_get(u, CURLUPART_USER, &part, 0) == CURLUE_OK;
	curl_free(part);
	part = NULL;
	int pass = curl_url_get(u, CURLUPART_PASSWORD, &part, 0) == CURLUE_OK;
	curl_free(part);
	part = NULL;
	if (user || pass)
		return url_fail(u, err, "a user name or password in the URL is refused "
		                        "(send credentials in broker.headers)");
	if (curl_url_get(u, CURLUPART_HOST, &part, 0) != CURLUE_OK || !part[0]) {
		curl_free(part);
		return url_fail(u, err, "the URL has no host");
	}
	char h[MAX_NAME + 3];
	size_t n = strlen(part);
	const char *p = part;
	if (n >= 2 && p[0] == '[' && p[n - 1] == ']') {
		p++;
		n -= 2;
	}
	if (n >= sizeof h) {
		curl_free(part);
		return url_fail(u, err, "the host is too long");
	}
	for (size_t i = 0; i < n; i++)
		h[i] = (char)tolower((unsigned char)p[i]);
	h[n] = '\0';
	curl_free(part);
	part = NULL;
	if (n && h[n - 1] == '.' && !strchr(h, ':'))
		h[--n] = '\0';
	if (cap) {
		snprintf(host, cap, "%s", h);
	}
	unsigned long port = 0;
	if (curl_url_get(u, CURLUPART_PORT, &part, CURLU_DEFAULT_PORT) == CURLUE_OK)
		port = strtoul(part, NULL, 10);
	curl_free(part);
	curl_url_cleanup(u);
	struct ip ip;
	if (parse_host_ip(h, &ip) == 0)
		return check_ip(g, h, &ip, (unsigned)port, err);
	/* A name: where it connects decides, unless nothing listed could admit it. */
	if (g->listed && g->ncidrs == 0 && !name_listed(g, h))
		return cp_err_set(err, CP_E_INVALID_REQUEST,
		                  "broker.url: %s is not named by --broker-allow", h);
	return 0;
}
