/* Unit tests for broker/url_guard.c: which broker URLs and which addresses
 * POST /v1/executions may send tool calls to (url_guard.h). Nothing here
 * connects anywhere: the rules are checked as data. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/url_guard.h"

static struct broker_urlguard *guard(const char *allow)
{
	const char *list[] = { allow, NULL };
	struct broker_urlguard *g = NULL;
	struct cp_err err = { 0 };
	if (broker_urlguard_new(allow ? list : NULL, &g, &err))
		fail_msg("--broker-allow %s refused: %s", allow, err.msg);
	return g;
}

/* 0, or the refusal's message in @msg. */
static int url(const struct broker_urlguard *g, const char *u, char *msg, size_t cap)
{
	struct cp_err err = { 0 };
	char host[300];
	int rc = broker_urlguard_url(g, u, host, sizeof host, &err);
	if (rc) {
		assert_int_equal(rc, CP_E_INVALID_REQUEST);
		assert_int_equal(err.code, CP_E_INVALID_REQUEST);
		snprintf(msg, cap, "%s", err.msg);
	}
	return rc;
}

static void refused(const struct broker_urlguard *g, const char *u, const char *rule)
{
	char msg[1024] = "";
	if (url(g, u, msg, sizeof msg) == 0)
		fail_msg("%s was admitted", u);
	if (!strstr(msg, rule))
		fail_msg("%s: \"%s\" does not name the rule \"%s\"", u, msg, rule);
}

static void admitted(const struct broker_urlguard *g, const char *u)
{
	char msg[1024] = "";
	if (url(g, u, msg, sizeof msg))
		fail_msg("%s refused: %s", u, msg);
}

static int addr(const struct broker_urlguard *g, const char *host, const char *ip, unsigned port)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	struct cp_err err = { 0 };
	if (inet_pton(AF_INET, ip, &in.sin_addr) == 1)
		return broker_urlguard_addr(g, host, (struct sockaddr *)&in, &err);
	assert_int_equal(inet_pton(AF_INET6, ip, &in6.sin6_addr), 1);
	return broker_urlguard_addr(g, host, (struct sockaddr *)&in6, &err);
}

#define LINK_LOCAL "link-local or metadata"

static void test_metadata_in_every_spelling_is_refused_by_default(void **state)
{
	(void)state;
	struct broker_urlguard *g = guard(NULL);
	static const char *const v4[] = {
		"http://169.254.169.254/latest/meta-data/",
		"http://169.254.169.254:80/",
		"https://169.254.1.1/",
		"http://2852039166/",            /* decimal */
		"http://0xa9fea9fe/",            /* hex */
		"http://0XA9FEA9FE/",
		"http://0251.0376.0251.0376/",   /* octal */
		"http://0xa9.0xfe.0xa9.0xfe/",
		"http://169.254.43518/",         /* fewer parts */
		"http://169.16689662/",
		"http://[::ffff:169.254.169.254]/", /* IPv4-mapped */
		"http://[::ffff:a9fe:a9fe]/",
		"http://[64:ff9b::169.254.169.254]/", /* NAT64 */
		"http://[::169.254.169.254]/",   /* IPv4-compatible */
		"http://169.254.169.254./",
	};
	for (size_t i = 0; i < sizeof v4 / sizeof v4[0]; i++)
		refused(g, v4[i], "169.254.0.0/16");
	refused(g, "http://[fe80::1]/", "fe80::/10");
	refused(g, "http://[FE80::a:b:c:d]:8080/", "fe80::/10");
	refused(g, "http://[febf::1]/", "fe80::/10");
	refused(g, "http://[fd00:ec2::254]/", "fd00:ec2::254");
	refused(g, "http://[fd00:0ec2:0000::0254]/", "fd00:ec2::254");
	refused(g, "http://[fd00:ec2::254]/", LINK_LOCAL);
	/* loopback, private and public addresses and names stay allowed */
	admitted(g, "http://127.0.0.1:8080/tools");
	admitted(g, "http://0x7f000001:8080/tools");
	admitted(g, "http://10.1.2.3/");
	admitted(g, "http://192.168.0.1/");
	admitted(g, "http://[::1]:9000/");
	admitted(g, "http://[fd00:ec2::253]/");
	admitted(g, "http://[fec0::1]/");
	admitted(g, "http://169.253.255.255/");
	admitted(g, "http://169.255.0.1/");
	admitted(g, "https://broker.example/tools");
	/* a name is checked where it connects */
	assert_int_equal(addr(g, "broker.example", "169.254.169.254", 80), CP_E_INVALID_REQUEST);
	assert_int_equal(addr(g, "broker.example", "::ffff:169.254.169.254", 80), CP_E_INVALID_REQUEST);
	assert_int_equal(addr(g, "broker.example", "fe80::1", 80), CP_E_INVALID_REQUEST);
	assert_int_equal(addr(g, "broker.example", "10.0.0.1", 80), 0);
	broker_urlguard_free(g);
}

static void test_userinfo_and_other_schemes_are_refused(void **state)
{
	(void)state;
	struct broker_urlguard *g = guard(NULL);
	refused(g, "http://user:pw@127.0.0.1:8080/", "user name or password");
	refused(g, "http://user@broker.example/", "user name or password");
	refused(g, "http://:pw@broker.example/", "user name or password");
	refused(g, "ftp://broker.example/", "http");
	refused(g, "file:///etc/passwd", "http");
	refused(g, "not a url", "http");
	broker_urlguard_free(g);
}

static void test_codepods_own_listener_is_refused(void **state)
{
	(void)state;
	struct broker_urlguard *g = guard(NULL);
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(8443) };
	struct cp_err err = { 0 };
	inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
	assert_int_equal(broker_urlguard_add_self(g, (struct sockaddr *)&in, &err), 0);
	refused(g, "http://127.0.0.1:8443/v1/executions", "codepod's own listener");
	refused(g, "http://0x7f000001:8443/", "codepod's own listener");
	refused(g, "http://2130706433:8443/", "codepod's own listener");
	refused(g, "http://[::ffff:127.0.0.1]:8443/", "codepod's own listener");
	refused(g, "http://0.0.0.0:8443/", "codepod's own listener");
	admitted(g, "http://127.0.0.1:8444/");
	admitted(g, "http://127.0.0.2:8443/"); /* another loopback address: not ours */
	assert_int_equal(addr(g, "localhost", "127.0.0.1", 8443), CP_E_INVALID_REQUEST);
	/* a wildcard listener: every loopback address at its port */
	struct sockaddr_in6 any = { .sin6_family = AF_INET6, .sin6_port = htons(9000),
	                            .sin6_addr = IN6ADDR_ANY_INIT };
	assert_int_equal(broker_urlguard_add_self(g, (struct sockaddr *)&any, &err), 0);
	refused(g, "http://127.0.0.2:9000/", "codepod's own listener");
	refused(g, "http://[::1]:9000/", "codepod's own listener");
	broker_urlguard_free(g);
}

static void test_an_explicit_list_admits_exactly_what_it_names(void **state)
{
	(void)state;
	struct broker_urlguard *g = guard("broker.internal, 10.0.0.0/8,[fd12::1]");
	admitted(g, "http://BROKER.internal./tools");
	admitted(g, "http://10.200.3.4:8080/");
	admitted(g, "http://012.1.2.3/"); /* 10.1.2.3 in octal */
	admitted(g, "http://[fd12::1]/");
	refused(g, "http://127.0.0.1/", "not named by --broker-allow");
	refused(g, "http://11.0.0.1/", "not named by --broker-allow");
	refused(g, "http://[fd12::2]/", "not named by --broker-allow");
	/* a name not listed: refused where it connects (a CIDR could admit it) */
	admitted(g, "http://other.example/");
	assert_int_equal(addr(g, "other.example", "192.168.1.1", 80), CP_E_INVALID_REQUEST);
	assert_int_equal(addr(g, "other.example", "10.9.9.9", 80), 0);
	/* a listed name resolving to a metadata address is still refused */
	assert_int_equal(addr(g, "broker.internal", "169.254.169.254", 80), CP_E_INVALID_REQUEST);
	assert_int_equal(addr(g, "broker.internal", "192.168.1.1", 80), 0);
	broker_urlguard_free(g);

	/* names only: an unlisted name is refused at once */
	g = guard("localhost");
	refused(g, "http://broker.example/", "not named by --broker-allow");
	admitted(g, "http://localhost:8080/");
	refused(g, "http://127.0.0.1:8080/", "not named by --broker-allow");
	broker_urlguard_free(g);

	/* a CIDR names a link-local range on purpose */
	g = guard("169.254.10.0/24");
	admitted(g, "http://169.254.10.7/");
	refused(g, "http://169.254.169.254/", LINK_LOCAL);
	broker_urlguard_free(g);
}

static void test_bad_entries_are_refused(void **state)
{
	(void)state;
	static const char *const bad[] = { "10.0.0.0/33", "10.0.0.0/", "/8", "fd00::/129",
	                                   "a b", "http://x", "10.0.0.0/8x", "x/8",
	                                   "::ffff:1.2.3.4/64" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *list[] = { bad[i], NULL };
		struct broker_urlguard *g = NULL;
		struct cp_err err = { 0 };
		if (broker_urlguard_new(list, &g, &err) != CP_E_INVALID_REQUEST || g)
			fail_msg("--broker-allow %s was taken", bad[i]);
		assert_non_null(strstr(err.msg, "--broker-allow"));
	}
	/* commas, blanks, repeats */
	const char *list[] = { "a.example,,b.example", " 10.0.0.1 ", NULL };
	struct broker_urlguard *g = NULL;
	struct cp_err err = { 0 };
	assert_int_equal(broker_urlguard_new(list, &g, &err), 0);
	admitted(g, "http://b.example/");
	admitted(g, "http://10.0.0.1/");
	refused(g, "http://10.0.0.2/", "not named");
	broker_urlguard_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metadata_in_every_spelling_is_refused_by_default),
		cmocka_unit_test(test_userinfo_and_other_schemes_are_refused),
		cmocka_unit_test(test_codepods_own_listener_is_refused),
		cmocka_unit_test(test_an_explicit_list_admits_exactly_what_it_names),
		cmocka_unit_test(test_bad_entries_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
