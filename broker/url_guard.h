/*
 * url_guard.h - which broker URLs POST /v1/executions may send tool calls
 * to. A caller names the broker; without a guard it could make codepod
 * POST to a cloud's metadata service or to codepod's own listener.
 *
 * The rules, checked on the URL when the request arrives and again on every
 * address libcurl is about to connect to (so a name that resolves, or is
 * rebound, to a refused address is refused too):
 *   - a URL with a user name or password is refused (credentials go in
 *     broker.headers);
 *   - codepod's own listeners are refused (broker_urlguard_add_self);
 *   - without --broker-allow, link-local and metadata addresses are refused:
 *     169.254.0.0/16, fe80::/10, fd00:ec2::254, in every spelling (decimal,
 *     hex and octal IPv4, IPv4-mapped and NAT64 IPv6 are read as the IPv4
 *     address they carry); loopback and private addresses stay allowed (a
 *     broker beside codepod is common);
 *   - with --broker-allow, exactly what it names: an address inside one of
 *     its CIDRs (or single addresses), or a URL whose host is one of its
 *     names, when the address that name connects to is not link-local or
 *     metadata (a CIDR entry admits those).
 * A refusal is CP_E_INVALID_REQUEST whose message names the rule.
 *
 * Ownership: broker_urlguard_new() returns an object freed with
 * broker_urlguard_free(); nothing else is kept of the arguments.
 * Context: broker_urlguard_new() and broker_urlguard_add_self() run before
 * the loop (add_self may read the host's interface addresses); the checks
 * never block and keep no state.
 */
#ifndef BROKER_URL_GUARD_H
#define BROKER_URL_GUARD_H

#include <stddef.h>
#include <sys/socket.h>

#include "base/err.h"

struct broker_urlguard;

/* At most this many --broker-allow entries, all lists together. */
#define BROKER_URLGUARD_MAX 256

/**
 * broker_urlguard_new() - a guard from the --broker-allow values.
 * @allow: NULL-terminated; each a HOST, an address or an ADDRESS/PREFIX,
 *         or several of them comma-separated; NULL or empty: the default
 *         rules.
 *
 * Return: 0, CP_E_INVALID_REQUEST naming the entry that is neither, or
 * CP_E_NOMEM.
 */
int broker_urlguard_new(const char *const *allow, struct broker_urlguard **out,
                        struct cp_err *err);
void broker_urlguard_free(struct broker_urlguard *g);

/**
 * broker_urlguard_add_self() - one of codepod's own listeners, as bound:
 * @sa's port, and its address (the unspecified address: every address of
 * this host, loopback included).
 */
int broker_urlguard_add_self(struct broker_urlguard *g, const struct sockaddr *sa,
                             struct cp_err *err);

/**
 * broker_urlguard_url() - the URL as given: its form (http or https, no
 * user or password) and, when its host is an address in any spelling, that
 * address. A host name is checked where it connects.
 * @host: set to the URL's host, lower case, without brackets or a trailing
 *        dot (NUL-terminated, at most @cap bytes), for broker_urlguard_addr().
 */
int broker_urlguard_url(const struct broker_urlguard *g, const char *url, char *host,
                        size_t cap, struct cp_err *err);

/**
 * broker_urlguard_addr() - may a request to the URL whose host is @host
 * connect to @sa (with its port)?
 */
int broker_urlguard_addr(const struct broker_urlguard *g, const char *host,
                         const struct sockaddr *sa, struct cp_err *err);

#endif
