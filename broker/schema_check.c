/*
 * schema_check.c - the JSON Schema subset of schema_check.h.
 *
 * One recursive walk over schema and value together; the instance path is
 * a cp_buf grown and cut back as the walk goes down and up, written as the
 * SDK writes Ajv's instancePath ("input.a.0.b"). The keyword order is
 * Ajv's: $ref, type, then the keywords of any type (const, enum, not,
 * anyOf, oneOf, allOf), then those of numbers, strings, arrays and objects.
 */
#include "broker/schema_check.h"

#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

#define PATH_MAX_BYTES 400

struct walk {
	const json_t *root;
	struct cp_buf path; /* "input" then ".key" per level */
	long work;
	int depth;
	char *msg;
	size_t cap;
};

static int check(struct walk *w, const json_t *s, const json_t *v);

/* Fills the message: "<path> <text>"; returns 1 (a mismatch). */
static int fail(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct walk *w, const char *fmt, ...)
{
	char text[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	snprintf(w->msg, w->cap, "%.*s %s", (int)cp_buf_len(&w->path), cp_buf_ptr(&w->path), text);
	return 1;
}

/* A number as JavaScript prints it (1, 0.01, 1e+21 aside). */
static void num_text(const json_t *n, char *out, size_t cap)
{
	if (json_is_integer(n)) {
		snprintf(out, cap, "%lld", (long long)json_integer_value(n));
		return;
	}
	double d = json_real_value(n);
	snprintf(out, cap, "%.15g", d);
	if (strtod(out, NULL) != d)
		snprintf(out, cap, "%.17g", d);
}

/* ---- the path ---- */

/* Appends ".key" (with ~ and / written ~0 and ~1, as Ajv's pointer does);
 * returns the length to cut back to. */
static size_t path_push(struct walk *w, const char *key, size_t n)
{
	size_t mark = cp_buf_len(&w->path);

	if (mark > PATH_MAX_BYTES)
		return mark; /* deep enough to find it; the rest is left out */
	cp_buf_add(&w->path, ".", 1, NULL);
	for (size_t i = 0; i < n; i++) {
		if (key[i] == '~')
			cp_buf_add(&w->path, "~0", 2, NULL);
		else if (key[i] == '/')
			cp_buf_add(&w->path, "~1", 2, NULL);
		else
			cp_buf_add(&w->path, &key[i], 1, NULL);
	}
	return mark;
}

static size_t path_push_index(struct walk *w, size_t i)
{
	char t[24];
	int n = snprintf(t, sizeof t, "%zu", i);

	return path_push(w, t, (size_t)n);
}

static void path_pop(struct walk *w, size_t mark)
{
	cp_buf_truncate(&w->path, mark);
}

/* ---- $ref ---- */

/* A local JSON pointer ("#", "#/a/b" with ~0 ~1); NULL when it is not one. */
static const json_t *resolve(const json_t *root, const char *ref)
{
	const json_t *cur = root;
	char seg[256];

	if (ref[0] != '#')
		return NULL;
	ref++;
	if (*ref == '\0')
		return root;
	if (*ref != '/')
		return NULL;
	while (cur && *ref == '/') {
		size_t n = 0;
		ref++;
		while (*ref && *ref != '/') {
			char ch = *ref++;
			if (ch == '~' && (*ref == '0' || *ref == '1'))
				ch = *ref++ == '0' ? '~' : '/';
			else if (ch == '%')
				return NULL; /* percent escapes: not judged */
			if (n + 1 >= sizeof seg)
				return NULL;
			seg[n++] = ch;
		}
		seg[n] = '\0';
		if (json_is_object(cur)) {
			cur = json_object_getn(cur, seg, n);
		} else if (json_is_array(cur) && n > 0 && n < 10) {
			char *end = NULL;
			unsigned long i = strtoul(seg, &end, 10);
			cur = *end == '\0' ? json_array_get(cur, i) : NULL;
		} else {
			cur = NULL;
		}
	}
	return cur;
}

/* ---- type ---- */

/* Past 2^53 every double is whole; below, a cast tells (no libm). */
static int whole_double(double d)
{
	if (!isfinite(d))
		return 0;
	if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
		return 1;
	return (double)(long long)d == d;
}

static int is_whole(const json_t *v)
{
	if (json_is_integer(v))
		return 1;
	return json_is_real(v) && whole_double(json_real_value(v));
}

static int type_is(const char *t, const json_t *v)
{
	if (!strcmp(t, "string"))
		return json_is_string(v);
	if (!strcmp(t, "number"))
		return json_is_number(v);
	if (!strcmp(t, "integer"))
		return is_whole(v);
	if (!strcmp(t, "boolean"))
		return json_is_boolean(v);
	if (!strcmp(t, "null"))
		return json_is_null(v);
	if (!strcmp(t, "array"))
		return json_is_array(v);
	if (!strcmp(t, "object"))
		return json_is_object(v);
	return 1; /* a type this subset does not know: not judged */
}

/* "must be string" or "must be string,null", as Ajv lists a type list
 * ("nullable" lets null through but is not named). */
static int check_type(struct walk *w, const json_t *s, const json_t *v)
{
	const json_t *type = json_object_get(s, "type");
	int nullable = json_is_true(json_object_get(s, "nullable"));
	char names[200] = "";
	size_t n = 0;

	if (!type || (nullable && json_is_null(v)))
		return 0;
	if (json_is_string(type)) {
		if (type_is(json_string_value(type), v))
			return 0;
		return fail(w, "must be %.40s", json_string_value(type));
	}
	if (!json_is_array(type))
		return 0;
	for (size_t i = 0; i < json_array_size(type); i++) {
		const char *t = json_string_value(json_array_get(type, i));
		if (!t || type_is(t, v))
			return 0;
		int k = snprintf(names + n, sizeof names - n, "%s%.40s", n ? "," : "", t);
		if (k > 0 && (size_t)k < sizeof names - n)
			n += (size_t)k;
	}
	if (json_array_size(type) == 0)
		return 0;
	return fail(w, "must be %s", names);
}

/* ---- any type ---- */

static int check_enum(struct walk *w, const json_t *s, const json_t *v)
{
	const json_t *c = json_object_get(s, "const");
	const json_t *e = json_object_get(s, "enum");

	if (c && !json_equal(c, v))
		return fail(w, "must be equal to constant");
	if (!json_is_array(e))
		return 0;
	for (size_t i = 0; i < json_array_size(e); i++)
		if (json_equal(json_array_get(e, i), v))
			return 0;
	return fail(w, "must be equal to one of the allowed values");
}

/* Whether v matches s, without keeping the message of a failure. */
static int matches(struct walk *w, const json_t *s, const json_t *v)
{
	char *msg = w->msg;
	size_t cap = w->cap, mark = cp_buf_len(&w->path);
	char scratch[8];

	w->msg = scratch;
	w->cap = sizeof scratch;
	int bad = check(w, s, v);
	w->msg = msg;
	w->cap = cap;
	path_pop(w, mark);
	return !bad;
}

static int check_combinators(struct walk *w, const json_t *s, const json_t *v)
{
	const json_t *not = json_object_get(s, "not");
	const json_t *any = json_object_get(s, "anyOf");
	const json_t *one = json_object_get(s, "oneOf");
	const json_t *all = json_object_get(s, "allOf");
	size_t n = 0;

	if (not && matches(w, not, v))
		return fail(w, "must NOT be valid");
	/* Ajv's first error of a failed anyOf (or a oneOf nothing matches) is
	 * its first branch's. */
	if (json_is_array(any) && json_array_size(any)) {
		int ok = 0;
		for (size_t i = 0; !ok && i < json_array_size(any); i++)
			ok = matches(w, json_array_get(any, i), v);
		if (!ok)
			return check(w, json_array_get(any, 0), v) ? 1 : fail(w, "must match a schema in anyOf");
	}
	if (json_is_array(one) && json_array_size(one)) {
		for (size_t i = 0; n < 2 && i < json_array_size(one); i++)
			n += (size_t)matches(w, json_array_get(one, i), v);
		if (n == 0 && check(w, json_array_get(one, 0), v))
			return 1;
		if (n != 1)
			return fail(w, "must match exactly one schema in oneOf");
	}
	for (size_t i = 0; json_is_array(all) && i < json_array_size(all); i++)
		if (check(w, json_array_get(all, i), v))
			return 1;
	return 0;
}

/* ---- numbers ---- */

static int check_number(struct walk *w, const json_t *s, const json_t *v)
{
	static const struct {
		const char *key, *op;
		int want; /* the sign (x - bound) must not have */
		int strict;
	} limits[] = {
		{ "maximum", "<=", 1, 0 }, { "minimum", ">=", -1, 0 },
		{ "exclusiveMaximum", "<", 1, 1 }, { "exclusiveMinimum", ">", -1, 1 },
	};
	double x = json_number_value(v);
	char t[40];

	for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
		const json_t *b = json_object_get(s, limits[i].key);
		if (!json_is_number(b))
			continue;
		double d = x - json_number_value(b);
		int bad = limits[i].want > 0 ? (limits[i].strict ? d >= 0 : d > 0)
		                             : (limits[i].strict ? d <= 0 : d < 0);
		if (bad) {
			num_text(b, t, sizeof t);
			return fail(w, "must be %s %s", limits[i].op, t);
		}
	}
	const json_t *m = json_object_get(s, "multipleOf");
	if (json_is_number(m) && json_number_value(m) > 0) {
		double q = x / json_number_value(m); /* Ajv's test: (x / m) % 1 */
		if (!whole_double(q)) {
			num_text(m, t, sizeof t);
			return fail(w, "must be multiple of %s", t);
		}
	}
	return 0;
}

/* ---- strings ---- */

static size_t code_points(const char *s, size_t n)
{
	size_t count = 0;

	for (size_t i = 0; i < n; i++)
		count += ((unsigned char)s[i] & 0xC0) != 0x80;
	return count;
}

/*
 * regcomp copies a repeated atom once per repetition (a+ twice, a{9} nine
 * times, nested groups multiply), so a short pattern can cost gigabytes:
 * the translation keeps an estimate of the compiled size and refuses a
 * pattern past it, or quantifiers stacked on quantifiers (which JavaScript
 * refuses too, but for its lazy `?`, dropped here: it cannot change
 * whether a search matches).
 */
#define ERE_MAX_SIZE 4000L
#define ERE_MAX_GROUPS 16

struct ere {
	struct cp_buf b;
	long size[ERE_MAX_GROUPS + 1]; /* each open group's estimate */
	int depth;
	long last;    /* the last atom's estimate, 0 after a quantifier */
	int quant;    /* the last token was a quantifier */
};

/* An atom of estimate n ends; 0 or -1 (over the budget). */
static int ere_atom(struct ere *e, long n)
{
	e->last = n;
	e->quant = 0;
	e->size[e->depth] += n;
	return e->size[e->depth] > ERE_MAX_SIZE ? -1 : 0;
}

/* The last atom repeated up to k times in all. */
static int ere_repeat(struct ere *e, long k)
{
	if (e->quant || e->last == 0 || k > ERE_MAX_SIZE)
		return -1;
	e->size[e->depth] += e->last * (k - 1);
	e->last = 0;
	e->quant = 1;
	return e->size[e->depth] > ERE_MAX_SIZE ? -1 : 0;
}

/* "{m}", "{m,}" or "{m,n}" at *c: the count k, the length in *len; 0 if none. */
static long brace_count(const char *c, size_t *len)
{
	const char *p = c + 1;
	long m = 0, n = -1;

	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9' && m <= ERE_MAX_SIZE)
		m = m * 10 + (*p++ - '0');
	if (*p == ',') {
		p++;
		n = *p == '}' ? m + 1 : 0;
		while (*p >= '0' && *p <= '9' && n <= ERE_MAX_SIZE)
			n = n * 10 + (*p++ - '0');
	}
	if (*p != '}')
		return 0;
	*len = (size_t)(p - c) + 1;
	return (n > m ? n : m) + 1;
}

/*
 * A JavaScript pattern as a POSIX extended one, or NULL when it has what
 * ERE reads otherwise: \d \D \w \W \s \S become classes; other escapes of
 * punctuation stay (ERE reads them alike); escapes of letters or digits
 * (\b, \u, back references), a backslash inside brackets other than those
 * classes, "(?", and patterns too costly to compile (above) are refused.
 */
static char *pattern_to_ere(const char *p)
{
	static const char *const out_cls[][2] = {
		{ "d", "[0-9]" }, { "D", "[^0-9]" }, { "w", "[[:alnum:]_]" },
		{ "W", "[^[:alnum:]_]" }, { "s", "[[:space:]]" }, { "S", "[^[:space:]]" },
	};
	static const char *const in_cls[][2] = {
		{ "d", "0-9" }, { "w", "[:alnum:]_" }, { "s", "[:space:]" },
	};
	struct ere e = { 0 };
	int in = 0;

	cp_buf_set_limit(&e.b, 16384, NULL);
	for (const char *c = p; *c; c++) {
		const char *rep = NULL;
		size_t blen = 0;
		long k = 0;
		int rc = 0;
		if (c[0] == '(' && c[1] == '?')
			goto refuse;
		if (in && c[0] == '[' && c[1] && strchr(":.=", c[1]))
			goto refuse; /* a POSIX class in ERE, literal text in JavaScript */
		if (in && c[0] != ']' && c[0] != '\\') {
			rc = cp_buf_add(&e.b, c, 1, NULL);
		} else if (!in && c[0] == '[') {
			in = 1;
			rc = cp_buf_add(&e.b, c, 1, NULL);
			if (rc == 0 && c[1] == '^')
				rc = cp_buf_add(&e.b, ++c, 1, NULL);
			if (rc == 0 && c[1] == ']')
				rc = cp_buf_add(&e.b, ++c, 1, NULL);
		} else if (in && c[0] == ']') {
			in = 0;
			rc = cp_buf_add(&e.b, c, 1, NULL);
			if (rc == 0)
				rc = ere_atom(&e, 1);
		} else if (c[0] == '\\') {
			char x = c[1];
			for (size_t i = 0; !in && i < sizeof out_cls / sizeof out_cls[0]; i++)
				if (x && x == out_cls[i][0][0])
					rep = out_cls[i][1];
			for (size_t i = 0; in && i < sizeof in_cls / sizeof in_cls[0]; i++)
				if (x && x == in_cls[i][0][0])
					rep = in_cls[i][1];
			if (rep) {
				rc = cp_buf_add(&e.b, rep, strlen(rep), NULL);
			} else if (!in && x && strchr(".[]{}()*+?^$|\\/", x)) {
				/* Ajv compiles with the u flag, where \- outside brackets is an
				 * error (the SDK then checks nothing): left out here too. */
				if (x == '/')
					rc = cp_buf_add(&e.b, &x, 1, NULL);
				else
					rc = cp_buf_add(&e.b, c, 2, NULL);
			} else {
				goto refuse;
			}
			c++;
			if (rc == 0 && !in)
				rc = ere_atom(&e, 1);
		} else if (c[0] == '(') {
			if (e.depth == ERE_MAX_GROUPS)
				goto refuse;
			e.size[++e.depth] = 0;
			e.quant = 0;
			rc = cp_buf_add(&e.b, c, 1, NULL);
		} else if (c[0] == ')') {
			if (e.depth == 0)
				goto refuse;
			long n = e.size[e.depth--];
			rc = cp_buf_add(&e.b, c, 1, NULL);
			if (rc == 0)
				rc = ere_atom(&e, n > 0 ? n : 1);
		} else if (c[0] == '*' || c[0] == '+' || c[0] == '?') {
			if (c[0] == '?' && e.quant) {
				e.quant = 0; /* lazy: the same matches exist */
				e.last = 0;
				continue;
			}
			rc = ere_repeat(&e, 2);
			if (rc == 0)
				rc = cp_buf_add(&e.b, c, 1, NULL);
		} else if (c[0] == '{' && (k = brace_count(c, &blen)) > 0) {
			rc = ere_repeat(&e, k);
			if (rc == 0)
				rc = cp_buf_add(&e.b, c, blen, NULL);
			c += blen - 1;
		} else if (c[0] == '|') {
			e.quant = 0;
			e.last = 0;
			rc = cp_buf_add(&e.b, c, 1, NULL);
		} else {
			rc = cp_buf_add(&e.b, c, 1, NULL);
			if (rc == 0 && c[0] != '^' && c[0] != '$')
				rc = ere_atom(&e, 1);
		}
		if (rc)
			goto refuse;
	}
	if (in || e.depth)
		goto refuse;
	char *out = cp_buf_take(&e.b, NULL, NULL);
	cp_buf_free(&e.b);
	return out;
refuse:
	cp_buf_free(&e.b);
	return NULL;
}

/* 1: it does not match; 0: it does, or the pattern cannot be judged. */
static int pattern_mismatch(const char *pattern, const char *s, size_t n)
{
	char *ere = strlen(s) == n ? pattern_to_ere(pattern) : NULL;
	regex_t re;
	int bad = 0;

	if (!ere)
		return 0;
	if (regcomp(&re, ere, REG_EXTENDED | REG_NOSUB) == 0) {
		bad = regexec(&re, s, 0, NULL, 0) == REG_NOMATCH;
		regfree(&re);
	}
	free(ere);
	return bad;
}

static int check_string(struct walk *w, const json_t *s, const json_t *v)
{
	const json_t *max = json_object_get(s, "maxLength");
	const json_t *min = json_object_get(s, "minLength");
	const json_t *pat = json_object_get(s, "pattern");
	double len = (double)code_points(json_string_value(v), json_string_length(v));
	char t[40];

	if (json_is_number(max) && len > json_number_value(max)) {
		num_text(max, t, sizeof t);
		return fail(w, "must NOT have more than %s characters", t);
	}
	if (json_is_number(min) && len < json_number_value(min)) {
		num_text(min, t, sizeof t);
		return fail(w, "must NOT have fewer than %s characters", t);
	}
	if (json_is_string(pat) && json_string_length(pat) < 4096 &&
	    pattern_mismatch(json_string_value(pat), json_string_value(v), json_string_length(v)))
		return fail(w, "must match pattern \"%.200s\"", json_string_value(pat));
	return 0;
}

/* ---- arrays ---- */

/* Whether "items" says its items are scalars (Ajv then takes another loop,
 * which names the pair the other way round). */
static int scalar_items(const json_t *s)
{
	const json_t *t = json_object_get(json_object_get(s, "items"), "type");
	size_t n = json_is_array(t) ? json_array_size(t) : 1;

	if (!json_is_string(t) && !(json_is_array(t) && n > 0))
		return 0;
	for (size_t i = 0; i < n; i++) {
		const char *name = json_string_value(json_is_array(t) ? json_array_get(t, i) : t);
		if (!name || !strcmp(name, "object") || !strcmp(name, "array"))
			return 0;
	}
	return 1;
}

/* Ajv's loops, its pair: for scalar items the last item with an equal one
 * after it ("## after and it"); otherwise the last item with an equal one
 * before it ("## before and it"). */
static int check_unique(struct walk *w, const json_t *s, const json_t *v)
{
	size_t n = json_array_size(v);
	int scalar = scalar_items(s);

	for (size_t i = n; i-- > 0;) {
		w->work += (long)n;
		if (w->work > BROKER_SCHEMA_MAX_WORK)
			return 0;
		if (scalar) {
			for (size_t k = i + 1; k < n; k++)
				if (json_equal(json_array_get(v, i), json_array_get(v, k)))
					return fail(w, "must NOT have duplicate items (items ## %zu and %zu "
					               "are identical)", k, i);
			continue;
		}
		for (size_t j = i; j-- > 0;)
			if (json_equal(json_array_get(v, i), json_array_get(v, j)))
				return fail(w, "must NOT have duplicate items (items ## %zu and %zu "
				               "are identical)", j, i);
	}
	return 0;
}

static int check_array(struct walk *w, const json_t *s, const json_t *v)
{
	const json_t *max = json_object_get(s, "maxItems");
	const json_t *min = json_object_get(s, "minItems");
	const json_t *prefix = json_object_get(s, "prefixItems");
	const json_t *items = json_object_get(s, "items");
	size_t n = json_array_size(v), from = 0;
	char t[40];

	if (json_is_number(max) && (double)n > json_number_value(max)) {
		num_text(max, t, sizeof t);
		return fail(w, "must NOT have more than %s items", t);
	}
	if (json_is_number(min) && (double)n < json_number_value(min)) {
		num_text(min, t, sizeof t);
		return fail(w, "must NOT have fewer than %s items", t);
	}
	if (json_is_true(json_object_get(s, "uniqueItems")) && check_unique(w, s, v))
		return 1;
	if (json_is_array(prefix)) {
		for (; from < n && from < json_array_size(prefix); from++) {
			size_t mark = path_push_index(w, from);
			int bad = check(w, json_array_get(prefix, from), json_array_get(v, from));
			path_pop(w, mark);
			if (bad)
				return 1;
		}
		from = json_array_size(prefix);
		if (json_is_false(items) && n > from)
			return fail(w, "must NOT have more than %zu items", from);
	} else if (json_is_array(items)) {
		return 0; /* draft 7's tuple form: not judged */
	}
	for (size_t i = from; items && !json_is_false(items) && i < n; i++) {
		size_t mark = path_push_index(w, i);
		int bad = check(w, items, json_array_get(v, i));
		path_pop(w, mark);
		if (bad)
			return 1;
	}
	return 0;
}

/* ---- objects ---- */

static int check_object(struct walk *w, const json_t *s, const json_t *v)
{
	const json_t *max = json_object_get(s, "maxProperties");
	const json_t *min = json_object_get(s, "minProperties");
	const json_t *req = json_object_get(s, "required");
	const json_t *props = json_object_get(s, "properties");
	const json_t *addl = json_object_get(s, "additionalProperties");
	double n = (double)json_object_size(v);
	const char *key;
	size_t klen;
	json_t *sub;
	char t[40];

	if (json_is_number(max) && n > json_number_value(max)) {
		num_text(max, t, sizeof t);
		return fail(w, "must NOT have more than %s properties", t);
	}
	if (json_is_number(min) && n < json_number_value(min)) {
		num_text(min, t, sizeof t);
		return fail(w, "must NOT have fewer than %s properties", t);
	}
	for (size_t i = 0; json_is_array(req) && i < json_array_size(req); i++) {
		const json_t *r = json_array_get(req, i);
		if (json_is_string(r) && !json_object_getn(v, json_string_value(r), json_string_length(r)))
			return fail(w, "must have required property '%.100s'", json_string_value(r));
	}
	if (addl && !json_is_true(addl)) {
		json_object_keylen_foreach((json_t *)v, key, klen, sub) {
			if (++w->work > BROKER_SCHEMA_MAX_WORK)
				return 0;
			if (json_is_object(props) && json_object_getn(props, key, klen))
				continue;
			if (json_is_false(addl))
				return fail(w, "must NOT have additional properties");
			size_t mark = path_push(w, key, klen);
			int bad = check(w, addl, sub);
			path_pop(w, mark);
			if (bad)
				return 1;
		}
	}
	json_object_keylen_foreach((json_t *)props, key, klen, sub) {
		const json_t *pv = json_object_getn(v, key, klen);
		if (!pv)
			continue;
		size_t mark = path_push(w, key, klen);
		int bad = check(w, sub, pv);
		path_pop(w, mark);
		if (bad)
			return 1;
	}
	return 0;
}

/* ---- one schema ---- */

static int check_schema(struct walk *w, const json_t *s, const json_t *v)
{
	const json_t *ref = json_object_get(s, "$ref");

	if (json_is_string(ref)) {
		const json_t *t = resolve(w->root, json_string_value(ref));
		if (t && check(w, t, v))
			return 1;
	}
	if (check_type(w, s, v) || check_enum(w, s, v) || check_combinators(w, s, v))
		return 1;
	if (json_is_number(v) && check_number(w, s, v))
		return 1;
	if (json_is_string(v) && check_string(w, s, v))
		return 1;
	if (json_is_array(v) && check_array(w, s, v))
		return 1;
	if (json_is_object(v) && check_object(w, s, v))
		return 1;
	return 0;
}

static int check(struct walk *w, const json_t *s, const json_t *v)
{
	if (++w->work > BROKER_SCHEMA_MAX_WORK)
		return 0;
	if (json_is_false(s))
		return fail(w, "boolean schema is false");
	if (!json_is_object(s) || w->depth >= BROKER_SCHEMA_MAX_DEPTH)
		return 0;
	w->depth++;
	int bad = check_schema(w, s, v);
	w->depth--;
	return bad;
}

int broker_schema_check(const json_t *schema, const json_t *value, char *msg, size_t cap)
{
	struct walk w = { .root = schema, .msg = msg, .cap = cap };
	char scratch[8];

	if (!schema || !msg || cap == 0) {
		w.msg = scratch;
		w.cap = sizeof scratch;
	}
	if (!schema)
		return 0;
	cp_buf_set_limit(&w.path, PATH_MAX_BYTES + 64 + 4 * 256, NULL);
	cp_buf_add(&w.path, "input", 5, NULL);
	int bad = check(&w, schema, value);
	cp_buf_free(&w.path);
	return bad;
}
