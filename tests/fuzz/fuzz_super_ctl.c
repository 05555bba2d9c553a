/* fuzz_super_ctl.c - a control frame from the pod's supervisor
 * (kube_super_ctl_parse, k8s/backend/kube_super.h) on arbitrary bytes:
 * byte 0 picks the kind (H, X, F, D, R; U, O, S, which are no control
 * frame of the pod's; or itself), byte 1 the channel and whether a ready
 * frame came before, the rest is the payload. A frame is
 * either refused with a message that carries no byte of it, or decided as
 * its kind says, with an exit that holds together and a detail of valid
 * UTF-8 within its buffer (it ends up in the outcome's JSON). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "k8s/backend/kube_super.h"
#include "k8s/backend/super_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_exit(char kind, const struct codepod_proc_exit *ex)
{
	/* "oom" counts only on an exit by SIGKILL (the container's cgroup
	 * counted an OOM kill as the runner died of it). */
	if ((ex->oom && (kind != 'X' || ex->signal != 9)) || ex->lost ||
	    strnlen(ex->detail, sizeof ex->detail) >= sizeof ex->detail)
		abort();
	json_t *d = json_string(ex->detail); /* NULL for invalid UTF-8 */
	if (!d)
		abort();
	json_decref(d);
	if (kind == 'F') {
		if (!ex->unavailable || ex->code != -1 || ex->signal || !ex->detail[0])
			abort();
	} else if (ex->unavailable || ex->detail[0] ||
	           (ex->signal ? ex->signal > 127 || ex->code != -1 : ex->code < 0 || ex->code > 255)) {
		abort();
	}
}

/* A refusal names the rule (and a number at most), never the pod's bytes. */
static int names_a_rule(const char *msg)
{
	static const char *const whole[] = {
		"a control frame over its size limit", "a malformed killed frame", "a malformed usage frame",
		"a second ready frame", "a malformed ready frame", "a malformed exit frame",
		"a malformed start-failure frame", "a X frame on channel 0, the supervisor's own",
		"a F frame on channel 0, the supervisor's own", "a D frame on channel 0, the supervisor's own",
		"a R frame on channel 0, the supervisor's own",
	};
	static const char *const numbered[] = {
		"a control frame of unknown kind 0x", "a ready frame on channel ",
	};
	for (size_t i = 0; i < sizeof whole / sizeof *whole; i++)
		if (strcmp(msg, whole[i]) == 0)
			return 1;
	for (size_t i = 0; i < sizeof numbered / sizeof *numbered; i++) {
		size_t n = strlen(numbered[i]);
		if (strncmp(msg, numbered[i], n) == 0 && msg[n] &&
		    strspn(msg + n, "0123456789abcdef") == strlen(msg + n))
			return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char kinds[] = { 'H', 'X', 'F', 'D', 'R', 'U', 'O', 'S' };
	static const uint32_t chans[] = { 0, 1, 2, 0xffffffffu };
	if (size < 2)
		return 0;
	char kind = (data[0] & 0x80) ? (char)data[0] : kinds[data[0] & 7];
	uint32_t chan = chans[data[1] & 3];
	int ready = (data[1] >> 2) & 1;
	const char *buf = (const char *)data + 2;
	size_t len = size - 2;
	struct kube_ctl c;
	struct cp_err err;
	memset(&err, 0, sizeof err);
	memset(&c, 0x5a, sizeof c);
	int rc = kube_super_ctl_parse(kind, chan, buf, len, ready, &c, &err);
	if (rc != 0) {
		if (rc != CP_E_PARSE || err.code != CP_E_PARSE || !err.msg[0] ||
		    strnlen(err.msg, sizeof err.msg) >= sizeof err.msg)
			abort();
		if (!names_a_rule(err.msg))
			abort();
		return 0;
	}
	if (len > KUBE_SFRAME_MAX_CTL || (kind != 'H' && chan == 0))
		abort();
	switch (kind) {
	case 'H':
		if (c.act != KUBE_CTL_READY || chan != 0 || ready)
			abort();
		break;
	case 'D':
		if (c.act != KUBE_CTL_KILLED || (!len && c.usage.known))
			abort();
		break;
	case 'R':
		if (c.act != KUBE_CTL_USAGE || !len)
			abort();
		break;
	case 'X':
	case 'F':
		if (c.act != KUBE_CTL_EXITED)
			abort();
		check_exit(kind, &c.exit);
		break;
	default:
		abort();
	}
	return 0;
}
