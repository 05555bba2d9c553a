/* Unit tests for runner/continuation.c: key files, and every way a
 * continuation is refused (an edited byte anywhere, a cut, another key,
 * past its expiry, another conversation, over the size bound). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runner/continuation.h"

#define HEX64 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define HEX64B "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

static struct codepod_keyring *ring(const char *text)
{
	struct codepod_keyring *kr = NULL;
	struct cp_err err = { 0 };
	int rc = codepod_keyring_parse(text, strlen(text), &kr, &err);
	if (rc)
		fail_msg("keyring: %s", err.msg);
	return kr;
}

static char *seal(struct codepod_keyring *kr, const char *conv, long long exp)
{
	json_t *b = json_pack("{s:s,s:I,s:I,s:s,s:[{s:s,s:o}]}", "conv", conv, "iat", 1000LL,
	                      "exp", exp, "jti", "0123456789abcdef0123456789abcdef", "log", "t",
	                      "read", "o", json_pack("{s:i}", "n", 7));
	char *out = NULL;
	struct cp_err err = { 0 };
	assert_int_equal(codepod_continuation_seal(kr, b, &out, &err), 0);
	json_decref(b);
	return out;
}

static int open_rc(struct codepod_keyring *kr, const char *t, size_t n, const char *conv,
                   uint64_t now, char *msg)
{
	json_t *v = NULL;
	struct cp_err err = { 0 };
	int rc = codepod_continuation_open(kr, t, n, conv, now, &v, &err);
	if (msg)
		strcpy(msg, rc ? err.msg : "");
	json_decref(v);
	return rc;
}

static void test_round_trip(void **state)
{
	(void)state;
	struct codepod_keyring *kr = ring("k1:" HEX64 "\n");
	char *t = seal(kr, "conv-a", 2000);
	assert_non_null(strchr(t, '.'));
	assert_memory_equal(t, "k1.", 3);
	json_t *v = NULL;
	struct cp_err err = { 0 };
	assert_int_equal(codepod_continuation_open(kr, t, strlen(t), "conv-a", 1999, &v, &err), 0);
	const json_t *o = json_object_get(json_array_get(json_object_get(v, "log"), 0), "o");
	assert_int_equal(json_integer_value(json_object_get(o, "n")), 7);
	assert_string_equal(json_string_value(json_object_get(v, "kid")), "k1");
	json_decref(v);
	free(t);
	codepod_keyring_free(kr);
}

static void test_every_byte_edited(void **state)
{
	(void)state;
	struct codepod_keyring *kr = ring("k1:" HEX64 "\n");
	char *t = seal(kr, "c", 2000);
	size_t n = strlen(t);
	char msg[256];
	for (size_t i = 0; i < n; i++) {
		char *c = strdup(t);
		c[i] = c[i] == 'A' ? 'B' : 'A';
		assert_int_equal(open_rc(kr, c, n, "c", 1000, msg), CP_E_INVALID_REQUEST);
		assert_null(strstr(msg, c + 3)); /* quotes nothing of it */
		free(c);
	}
	free(t);
	codepod_keyring_free(kr);
}

static void test_truncated(void **state)
{
	(void)state;
	struct codepod_keyring *kr = ring("k1:" HEX64 "\n");
	char *t = seal(kr, "c", 2000);
	size_t n = strlen(t);
	for (size_t cut = 0; cut < n; cut++)
		assert_int_equal(open_rc(kr, t, cut, "c", 1000, NULL), CP_E_INVALID_REQUEST);
	assert_int_equal(open_rc(kr, t, n, "c", 1000, NULL), 0);
	free(t);
	codepod_keyring_free(kr);
}

static void test_other_key_and_rotation(void **state)
{
	(void)state;
	struct codepod_keyring *a = ring("k1:" HEX64 "\n");
	struct codepod_keyring *b = ring("k2:" HEX64B "\n");
	struct codepod_keyring *same_id = ring("k1:" HEX64B "\n");
	struct codepod_keyring *both = ring("# rotation\nk2:" HEX64B "\n\nk1:" HEX64 "\n");
	char msg[256];
	char *t = seal(a, "c", 2000);
	assert_int_equal(open_rc(b, t, strlen(t), "c", 1000, msg), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "key"));
	assert_int_equal(open_rc(same_id, t, strlen(t), "c", 1000, msg), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "signature"));
	assert_int_equal(open_rc(both, t, strlen(t), "c", 1000, NULL), 0); /* every key verifies */
	assert_string_equal(codepod_keyring_signer(both), "k2");          /* the first signs */
	char *t2 = seal(both, "c", 2000);
	assert_memory_equal(t2, "k2.", 3);
	assert_int_equal(open_rc(a, t2, strlen(t2), "c", 1000, NULL), CP_E_INVALID_REQUEST);
	free(t);
	free(t2);
	codepod_keyring_free(a);
	codepod_keyring_free(b);
	codepod_keyring_free(same_id);
	codepod_keyring_free(both);
}

static void test_expired_and_conversation(void **state)
{
	(void)state;
	struct codepod_keyring *kr = ring("k1:" HEX64 "\n");
	char *t = seal(kr, "conv-a", 2000);
	char msg[256];
	assert_int_equal(open_rc(kr, t, strlen(t), "conv-a", 2000, msg), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "expired"));
	assert_int_equal(open_rc(kr, t, strlen(t), "conv-b", 1000, msg), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(msg, "another conversation"));
	assert_int_equal(open_rc(kr, t, strlen(t), "conv-a", 1999, NULL), 0);
	free(t);
	codepod_keyring_free(kr);
}

static void test_size_bound(void **state)
{
	(void)state;
	struct codepod_keyring *kr = ring("k1:" HEX64 "\n");
	size_t big = CODEPOD_CONTINUATION_MAX_BYTES;
	char *s = malloc(big + 1);
	memset(s, 'a', big);
	s[big] = '\0';
	json_t *b = json_pack("{s:s,s:I,s:I,s:s,s:s}", "conv", "c", "iat", 1LL, "exp", 2LL, "jti",
	                      "0123456789abcdef0123456789abcdef", "pad", s);
	char *out = NULL;
	struct cp_err err = { 0 };
	assert_int_equal(codepod_continuation_seal(kr, b, &out, &err), CP_E_TOO_BIG);
	assert_non_null(strstr(err.msg, "over the limit"));
	assert_int_equal(open_rc(kr, s, big + 1, "c", 1, err.msg), CP_E_INVALID_REQUEST);
	assert_non_null(strstr(err.msg, "over the limit"));
	json_decref(b);
	free(s);
	codepod_keyring_free(kr);
}

static void test_key_file_errors(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",                      /* no key */
		"k1:00112233\n",         /* too short */
		":" HEX64 "\n",          /* no id */
		"k 1:" HEX64 "\n",       /* bad id */
		"k1:" HEX64 "0\n",       /* odd */
		"k1:" HEX64 "\nk1:" HEX64B "\n", /* twice */
		"k1:zz112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct codepod_keyring *kr = NULL;
		struct cp_err err = { 0 };
		assert_int_equal(codepod_keyring_parse(bad[i], strlen(bad[i]), &kr, &err), CP_E_PARSE);
		assert_null(kr);
		assert_null(strstr(err.msg, "00112233")); /* never the secret */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_every_byte_edited),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_other_key_and_rotation),
		cmocka_unit_test(test_expired_and_conversation),
		cmocka_unit_test(test_size_bound),
		cmocka_unit_test(test_key_file_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
