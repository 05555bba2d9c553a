/*
 * etags.c - the ETags codepod already knows (etags.h): a small table,
 * searched from end to end (a file operation's cost is a runner start and
 * the file's bytes; 512 string compares are nothing beside them).
 */
#include <stdlib.h>
#include <string.h>

#include "runner/etags.h"

#define SEEN_DIGITS 24 /* a 64-bit number, and a nanosecond time, in decimal */

struct etag_entry {
	char *conversation; /* NULL: free */
	char *path;
	json_t *hint;       /* {"seen":{...},"etag":"..."} */
};

struct codepod_etags {
	struct etag_entry e[CODEPOD_ETAGS_MAX];
	unsigned next; /* the slot replaced next */
};

struct codepod_etags *codepod_etags_new(void)
{
	return calloc(1, sizeof(struct codepod_etags));
}

static void clear(struct etag_entry *x)
{
	free(x->conversation);
	free(x->path);
	json_decref(x->hint);
	memset(x, 0, sizeof *x);
}

void codepod_etags_free(struct codepod_etags *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < CODEPOD_ETAGS_MAX; i++)
		clear(&t->e[i]);
	free(t);
}

static struct etag_entry *find(const struct codepod_etags *t, const char *conversation,
                               const char *path)
{
	for (unsigned i = 0; t && i < CODEPOD_ETAGS_MAX; i++) {
		const struct etag_entry *x = &t->e[i];
		if (x->conversation && !strcmp(x->conversation, conversation) && !strcmp(x->path, path))
			return (struct etag_entry *)x;
	}
	return NULL;
}

json_t *codepod_etags_hint(const struct codepod_etags *t, const char *conversation,
                           const char *path)
{
	const struct etag_entry *x = find(t, conversation, path);
	return x ? json_incref(x->hint) : NULL;
}

static int digits(const json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = s ? strlen(s) : 0;
	return n > 0 && n <= SEEN_DIGITS && strspn(s, "0123456789") == n;
}

void codepod_etags_note(struct codepod_etags *t, const char *conversation, const char *path,
                        const json_t *seen, const char *etag)
{
	static const char *const keys[] = { "dev", "ino", "size", "mtime", "ctime" };
	if (!t || !conversation || !path || !etag || strlen(etag) != 64 ||
	    strspn(etag, "0123456789abcdef") != 64 || !json_is_object(seen) ||
	    json_object_size(seen) != sizeof keys / sizeof keys[0])
		return;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!digits(json_object_get(seen, keys[i])))
			return;
	struct etag_entry *x = find(t, conversation, path);
	if (!x) {
		x = &t->e[t->next];
		t->next = (t->next + 1) % CODEPOD_ETAGS_MAX;
	}
	clear(x);
	x->conversation = strdup(conversation);
	x->path = strdup(path);
	x->hint = json_pack("{s:O,s:s}", "seen", seen, "etag", etag);
	if (!x->conversation || !x->path || !x->hint)
		clear(x);
}

void codepod_etags_forget(struct codepod_etags *t, const char *conversation)
{
	for (unsigned i = 0; t && i < CODEPOD_ETAGS_MAX; i++)
		if (t->e[i].conversation && !strcmp(t->e[i].conversation, conversation))
			clear(&t->e[i]);
}
