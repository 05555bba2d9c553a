/*
 * decl.c - JSON Schema to TypeScript declarations (see decl.h).
 *
 * Every schema renders to a "piece": its text and the precedence of its
 * outermost operator, so that `(A | B)[]` and `(A | B) & C` get their
 * parentheses and nothing else does. Pieces are bounded buffers (the output
 * cap applies to each), and every schema visited is charged to a node budget,
 * so a hostile schema costs at most the budget, never its expansion.
 */
#include "base/hex.h"
#include "broker/decl.h"
#include "broker/decl_alias.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

/* Comparisons allowed for "required" look-ups and duplicate tool names. */
#define MAX_WORK 50000000L
/* Unions and intersections longer than this keep their duplicates. */
#define DEDUPE_MAX 64

enum prec { P_ATOM = 0, P_INTER = 1, P_UNION = 2 };

struct piece {
	struct cp_buf b; /* BROKER_DECL_MAX_OUT at most (see buf_add) */
	enum prec prec;
	int nullish; /* null, or a union with a null member */
};

struct pieces {
	struct piece *v;
	size_t n, cap;
};

struct ctx {
	const json_t *root; /* the document local $refs resolve against */
	const json_t *stack[BROKER_DECL_MAX_DEPTH + 2]; /* $ref targets being expanded */
	int nstack;
	int depth;
	long nodes;
	long work;
	struct cp_err *err;
};

static int render(struct ctx *c, const json_t *s, struct piece *out);

/* ---- bounded buffers ---- */

/*
 * Pieces start zeroed and are zeroed again when moved out of (`struct piece
 * p = { 0 }`, memset): a zeroed cp_buf is empty with a limit of 0, so every
 * buffer takes the output cap on its first byte.
 */
static int buf_add(struct ctx *c, struct cp_buf *b, const char *s, size_t n)
{
	if (b->limit == 0)
		cp_buf_set_limit(b, BROKER_DECL_MAX_OUT, NULL); /* empty: cannot fail */
	int rc = cp_buf_add(b, s, n, NULL);
	if (rc == CP_E_TOO_BIG)
		return cp_err_set(c->err, CP_E_TOO_BIG, "declarations over %lu bytes",
		                  (unsigned long)BROKER_DECL_MAX_OUT);
	if (rc)
		return cp_err_set(c->err, CP_E_NOMEM, "out of memory");
	return 0;
}

static int buf_str(struct ctx *c, struct cp_buf *b, const char *s)
{
	return buf_add(c, b, s, strlen(s));
}

/* Appends the whole of @from. */
static int buf_cat(struct ctx *c, struct cp_buf *b, const struct cp_buf *from)
{
	return buf_add(c, b, cp_buf_ptr(from), cp_buf_len(from));
}

static int ends_with(const struct cp_buf *b, char ch)
{
	size_t n = cp_buf_len(b);

	return n && cp_buf_ptr(b)[n - 1] == ch;
}

static int is_text(const struct cp_buf *b, const char *s)
{
	size_t n = strlen(s);

	return cp_buf_len(b) == n && memcmp(cp_buf_ptr(b), s, n) == 0;
}

static int same_text(const struct cp_buf *a, const struct cp_buf *b)
{
	return cp_buf_len(a) == cp_buf_len(b) &&
	       memcmp(cp_buf_ptr(a), cp_buf_ptr(b), cp_buf_len(a)) == 0;
}

static int set_text(struct ctx *c, struct piece *out, const char *s, enum prec prec)
{
	cp_buf_reset(&out->b);
	out->prec = prec;
	out->nullish = strcmp(s, "null") == 0;
	return buf_str(c, &out->b, s);
}

static int pieces_push(struct ctx *c, struct pieces *ps, struct piece *p)
{
	struct piece *v = cp_array_grow(ps->v, &ps->cap, ps->n + 1, sizeof *v, NULL);

	if (!v)
		return cp_err_set(c->err, CP_E_NOMEM, "out of memory");
	ps->v = v;
	ps->v[ps->n++] = *p;
	memset(p, 0, sizeof *p);
	return 0;
}

static void pieces_free(struct pieces *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		cp_buf_free(&ps->v[i].b);
	free(ps->v);
	memset(ps, 0, sizeof *ps);
}

static int charge(struct ctx *c, long units)
{
	c->work += units;
	if (c->work > MAX_WORK)
		return cp_err_set(c->err, CP_E_TOO_BIG, "schemas too large to render");
	return 0;
}

/* ---- text: literals, names, comments ---- */

/* A JSON string literal is a TypeScript string literal too. */
static int add_string_literal(struct ctx *c, struct cp_buf *b, const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);
	char *t = NULL;
	int rc;

	if (!j)
		return cp_err_set(c->err, CP_E_INVALID_REQUEST, "a name or string is not UTF-8");
	t = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
	json_decref(j);
	if (!t)
		return cp_err_set(c->err, CP_E_NOMEM, "out of memory");
	rc = buf_str(c, b, t);
	free(t);
	return rc;
}

/* Property and tool names: bare when an identifier, quoted otherwise. */
static int add_name(struct ctx *c, struct cp_buf *b, const char *s, size_t n)
{
	if (broker_decl_is_identifier(s, n))
		return buf_add(c, b, s, n);
	return add_string_literal(c, b, s, n);
}

/* A scalar as a literal type; objects and arrays have none (return 1). */
static int literal(struct ctx *c, const json_t *v, struct piece *out)
{
	char *t = NULL;
	int rc;

	if (json_is_string(v)) {
		out->prec = P_ATOM;
		return add_string_literal(c, &out->b, json_string_value(v), json_string_length(v));
	}
	out->nullish = json_is_null(v);
	if (json_is_true(v) || json_is_false(v) || json_is_null(v) || json_is_number(v)) {
		t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		if (!t)
			return cp_err_set(c->err, CP_E_NOMEM, "out of memory");
		/* `-1[]` is not an array of -1: treat a sign as an operator. */
		out->prec = t[0] == '-' ? P_INTER : P_ATOM;
		rc = buf_str(c, &out->b, t);
		free(t);
		return rc;
	}
	return 1;
}

/*
 * Comment text: a star followed by a slash would end the comment, so it is
 * written "*\/"; control characters become spaces; with fold, every run of
 * whitespace becomes one space (a property's comment stays on its line).
 */
static int add_comment_text(struct ctx *c, struct cp_buf *b, const char *s, size_t n, int fold)
{
	int rc = 0, space = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		unsigned char ch = (unsigned char)s[i];
		int ws = ch < 0x20 || ch == 0x7f || ch == ' ';
		if (ws && (fold || ch != '\n')) {
			space = 1;
			continue;
		}
		if (space && ch != '\n' && cp_buf_len(b) && !ends_with(b, '\n'))
			rc = buf_add(c, b, " ", 1);
		space = 0;
		if (rc == 0 && ch == '/' && ends_with(b, '*'))
			rc = buf_add(c, b, "\\", 1);
		if (rc == 0)
			rc = buf_add(c, b, (const char *)&s[i], 1);
	}
	return rc;
}

/* Cleans a description into *text (one line when fold); empty if nothing. */
static int clean_description(struct ctx *c, const json_t *d, int fold, struct cp_buf *text)
{
	size_t start = 0, len;
	const char *t;
	int rc;

	if (!json_is_string(d))
		return 0;
	rc = add_comment_text(c, text, json_string_value(d), json_string_length(d), fold);
	if (rc)
		return rc;
	/* Drop blank lines around the text. */
	t = cp_buf_ptr(text);
	len = cp_buf_len(text);
	while (len && t[len - 1] == '\n')
		len--;
	while (start < len && t[start] == '\n')
		start++;
	cp_buf_truncate(text, len);
	cp_buf_tail(text, len - start);
	return 0;
}

/* ---- $ref ---- */

/* One JSON-pointer step: ~1 is '/', ~0 is '~'; NULL if it goes nowhere. */
static const json_t *step(const json_t *cur, char *seg, size_t n)
{
	size_t w = 0, idx = 0;

	for (size_t r = 0; r < n; r++) {
		if (seg[r] == '~' && r + 1 < n && (seg[r + 1] == '0' || seg[r + 1] == '1')) {
			seg[w++] = seg[r + 1] == '0' ? '~' : '/';
			r++;
		} else {
			seg[w++] = seg[r];
		}
	}
	if (json_is_object(cur))
		return json_object_getn(cur, seg, w);
	if (!json_is_array(cur) || w == 0 || w > 9 || (w > 1 && seg[0] == '0'))
		return NULL;
	for (size_t i = 0; i < w; i++) {
		if (seg[i] < '0' || seg[i] > '9')
			return NULL;
		idx = idx * 10 + (size_t)(seg[i] - '0');
	}
	return json_array_get(cur, idx);
}

/*
 * The target of a local reference, NULL when it has none. The fragment is
 * percent-decoded first, then read as a JSON pointer (RFC 6901 section 6).
 */
static const json_t *resolve(const json_t *root, const char *ref, size_t n)
{
	const json_t *cur = root;
	char *p = NULL;
	size_t len = 0, i = 1, seg;

	if (n == 0 || ref[0] != '#')
		return NULL;
	p = malloc(n);
	if (!p)
		return NULL;
	while (i < n) {
		int hi = i + 2 < n ? cp_hex_digit(ref[i + 1]) : -1, lo = i + 2 < n ? cp_hex_digit(ref[i + 2]) : -1;
		if (ref[i] == '%' && hi >= 0 && lo >= 0) {
			p[len++] = (char)(hi * 16 + lo);
			i += 3;
		} else {
			p[len++] = ref[i++];
		}
	}
	if (len && p[0] != '/')
		cur = NULL; /* "#anchor": not a pointer */
	for (i = 0; cur && i < len; i = seg) {
		seg = ++i;
		while (seg < len && p[seg] != '/')
			seg++;
		cur = step(cur, p + i, seg - i);
	}
	free(p);
	return cur;
}

static int on_stack(const struct ctx *c, const json_t *t)
{
	for (int i = 0; i < c->nstack; i++)
		if (c->stack[i] == t)
			return 1;
	return 0;
}

static int render_ref(struct ctx *c, const json_t *ref, struct piece *out)
{
	const json_t *t = resolve(c->root, json_string_value(ref), json_string_length(ref));
	int rc;

	if (!t || on_stack(c, t) || c->nstack >= (int)(sizeof c->stack / sizeof c->stack[0]))
		return set_text(c, out, "unknown", P_ATOM);
	c->stack[c->nstack++] = t;
	rc = render(c, t, out);
	c->nstack--;
	return rc;
}

/* ---- unions and intersections ---- */

static int join_pieces(struct ctx *c, struct piece *v, size_t n, int is_union, struct piece *out)
{
	const char *op = is_union ? " | " : " & ";
	size_t kept = 0;
	int rc = 0;

	for (size_t i = 0; is_union && i < n; i++)
		if (is_text(&v[i].b, "unknown"))
			return set_text(c, out, "unknown", P_ATOM);
	for (size_t i = 0; i < n; i++) {
		int drop = is_text(&v[i].b, is_union ? "never" : "unknown");
		for (size_t j = 0; !drop && n <= DEDUPE_MAX && j < kept; j++)
			drop = same_text(&v[j].b, &v[i].b);
		if (drop)
			cp_buf_free(&v[i].b);
		else
			v[kept++] = v[i];
	}
	for (size_t i = kept; i < n; i++)
		memset(&v[i], 0, sizeof v[i]);
	if (kept == 0)
		return set_text(c, out, is_union ? "never" : "unknown", P_ATOM);
	if (kept == 1) {
		*out = v[0];
		memset(&v[0], 0, sizeof v[0]);
		return 0;
	}
	out->prec = is_union ? P_UNION : P_INTER;
	out->nullish = 0;
	for (size_t i = 0; i < kept && rc == 0; i++) {
		int paren = !is_union && v[i].prec == P_UNION;
		out->nullish |= is_union && v[i].nullish;
		if (i)
			rc = buf_str(c, &out->b, op);
		if (rc == 0 && paren)
			rc = buf_str(c, &out->b, "(");
		if (rc == 0)
			rc = buf_cat(c, &out->b, &v[i].b);
		if (rc == 0 && paren)
			rc = buf_str(c, &out->b, ")");
	}
	return rc;
}

static int join(struct ctx *c, struct pieces *ps, int is_union, struct piece *out)
{
	return join_pieces(c, ps->v, ps->n, is_union, out);
}

/* Renders each schema of an array into ps. */
static int render_each(struct ctx *c, const json_t *arr, struct pieces *ps)
{
	struct piece p = { 0 };
	int rc = 0;

	for (size_t i = 0; i < json_array_size(arr) && rc == 0; i++) {
		rc = render(c, json_array_get(arr, i), &p);
		if (rc == 0)
			rc = pieces_push(c, ps, &p);
	}
	cp_buf_free(&p.b);
	return rc;
}

/* ---- arrays ---- */

/* `T[]`, or `(T)[]` when T has an operator. */
static int add_array_of(struct ctx *c, struct cp_buf *b, const struct piece *item)
{
	int rc = 0;

	if (item->prec != P_ATOM)
		rc = buf_str(c, b, "(");
	if (rc == 0)
		rc = buf_cat(c, b, &item->b);
	if (rc == 0 && item->prec != P_ATOM)
		rc = buf_str(c, b, ")");
	return rc ? rc : buf_str(c, b, "[]");
}

/* `[A, B]` closed when rest is false, `[A, B, ...R[]]` otherwise. */
static int render_tuple(struct ctx *c, const json_t *elems, const json_t *rest, struct piece *out)
{
	struct pieces ps = { 0 };
	struct piece r = { 0 };
	int rc = render_each(c, elems, &ps);

	out->prec = P_ATOM;
	if (rc == 0)
		rc = buf_str(c, &out->b, "[");
	for (size_t i = 0; i < ps.n && rc == 0; i++) {
		if (i)
			rc = buf_str(c, &out->b, ", ");
		if (rc == 0)
			rc = buf_cat(c, &out->b, &ps.v[i].b);
	}
	if (rc == 0 && !json_is_false(rest)) {
		rc = render(c, rest, &r);
		if (rc == 0)
			rc = buf_str(c, &out->b, ps.n ? ", ..." : "...");
		if (rc == 0)
			rc = add_array_of(c, &out->b, &r);
	}
	if (rc == 0)
		rc = buf_str(c, &out->b, "]");
	cp_buf_free(&r.b);
	pieces_free(&ps);
	return rc;
}

static int render_array(struct ctx *c, const json_t *s, struct piece *out)
{
	const json_t *prefix = json_object_get(s, "prefixItems");
	const json_t *items = json_object_get(s, "items");
	struct piece item = { 0 };
	int rc;

	if (json_is_array(prefix))
		return render_tuple(c, prefix, items, out);
	if (json_is_array(items))
		return render_tuple(c, items, json_object_get(s, "additionalItems"), out);
	rc = render(c, items, &item);
	out->prec = P_ATOM;
	if (rc == 0)
		rc = add_array_of(c, &out->b, &item);
	cp_buf_free(&item.b);
	return rc;
}

/* ---- objects ---- */

static int is_required(struct ctx *c, const json_t *req, const char *key, size_t n, int *yes)
{
	size_t count = json_array_size(req);
	int rc = charge(c, (long)count);

	*yes = 0;
	for (size_t i = 0; i < count && rc == 0 && !*yes; i++) {
		const json_t *r = json_array_get(req, i);
		*yes = json_is_string(r) && json_string_length(r) == n &&
		       memcmp(json_string_value(r), key, n) == 0;
	}
	return rc;
}

/* A property's description, or that of the local $ref it only is. */
static const json_t *property_description(const struct ctx *c, const json_t *s)
{
	const json_t *d = json_object_get(s, "description");
	const json_t *ref = json_object_get(s, "$ref");
	const json_t *t = NULL;

	if (d || !json_is_string(ref))
		return d;
	t = resolve(c->root, json_string_value(ref), json_string_length(ref));
	return json_object_get(t, "description");
}

/* A keyword of a property's schema, or of the local $ref it only is. */
static const json_t *property_keyword(const struct ctx *c, const json_t *s, const char *key)
{
	const json_t *v = json_object_get(s, key);
	const json_t *ref = json_object_get(s, "$ref");

	if (v || !json_is_string(ref))
		return v;
	return json_object_get(resolve(c->root, json_string_value(ref), json_string_length(ref)), key);
}

/* " @tag value": a string keyword as its text, any other value as compact
 * JSON; each cut to DOC_VALUE_MAX bytes (at a character start) with "...". */
#define DOC_VALUE_MAX 200
static int add_doc_tag(struct ctx *c, struct cp_buf *text, const char *tag, const json_t *v,
                       int as_text)
{
	char *dump = NULL;
	const char *s = NULL;
	size_t n = 0;
	int rc;

	if (!v || (as_text && !json_is_string(v)))
		return 0;
	if (json_is_string(v) && as_text) {
		s = json_string_value(v);
		n = json_string_length(v);
	} else {
		dump = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		if (!dump)
			return cp_err_set(c->err, CP_E_NOMEM, "out of memory");
		s = dump;
		n = strlen(dump);
	}
	size_t keep = n;
	if (keep > DOC_VALUE_MAX) {
		keep = DOC_VALUE_MAX;
		while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
			keep--;
	}
	rc = buf_str(c, text, cp_buf_len(text) ? " @" : "@");
	if (rc == 0)
		rc = buf_str(c, text, tag);
	if (rc == 0)
		rc = buf_str(c, text, " ");
	if (rc == 0)
		rc = add_comment_text(c, text, s, keep, 1);
	if (rc == 0 && keep < n)
		rc = buf_str(c, text, "...");
	free(dump);
	return rc;
}

/* A schema whose "type" is "integer", or a list holding it with no "number". */
static int is_integer(const json_t *type)
{
	int integer = 0, number = 0;

	if (json_is_string(type))
		return strcmp(json_string_value(type), "integer") == 0;
	for (size_t i = 0; i < json_array_size(type); i++) {
		const char *t = json_string_value(json_array_get(type, i));
		integer |= t && strcmp(t, "integer") == 0;
		number |= t && strcmp(t, "number") == 0;
	}
	return integer && !number;
}

/* The bounds a validator enforces and TypeScript cannot say: numbers only
 * (draft 4's boolean exclusiveMinimum says nothing on its own). */
static const char *const bound_keywords[] = {
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
	"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
};

static int add_bound_tags(struct ctx *c, struct cp_buf *text, const json_t *s)
{
	int rc = 0;

	if (is_integer(property_keyword(c, s, "type")))
		rc = buf_str(c, text, cp_buf_len(text) ? " @integer" : "@integer");
	for (size_t i = 0; rc == 0 && i < sizeof bound_keywords / sizeof bound_keywords[0]; i++) {
		const json_t *v = property_keyword(c, s, bound_keywords[i]);
		if (json_is_number(v))
			rc = add_doc_tag(c, text, bound_keywords[i], v, 0);
	}
	if (rc == 0 && json_is_true(property_keyword(c, s, "uniqueItems")))
		rc = buf_str(c, text, cp_buf_len(text) ? " @uniqueItems" : "@uniqueItems");
	return rc;
}

/* What the model needs beyond the type: integer, the bounds, format,
 * pattern, default, and up to three examples, as JSDoc tags after the
 * description. */
static int add_doc_tags(struct ctx *c, struct cp_buf *text, const json_t *s)
{
	const json_t *ex = property_keyword(c, s, "examples");
	int rc = add_bound_tags(c, text, s);

	if (rc == 0)
		rc = add_doc_tag(c, text, "format", property_keyword(c, s, "format"), 1);

	if (rc == 0)
		rc = add_doc_tag(c, text, "pattern", property_keyword(c, s, "pattern"), 1);
	if (rc == 0)
		rc = add_doc_tag(c, text, "default", property_keyword(c, s, "default"), 0);
	for (size_t i = 0; rc == 0 && json_is_array(ex) && i < json_array_size(ex) && i < 3; i++)
		rc = add_doc_tag(c, text, "example", json_array_get(ex, i), 0);
	return rc;
}

/* `/` `** text @tags *` `/ ` before a property, on one line. */
static int add_property_doc(struct ctx *c, struct cp_buf *b, const json_t *s)
{
	struct cp_buf text = { 0 };
	int rc = clean_description(c, property_description(c, s), 1, &text);

	if (rc == 0 && json_is_object(s))
		rc = add_doc_tags(c, &text, s);

	if (rc == 0 && cp_buf_len(&text)) {
		rc = buf_str(c, b, "/** ");
		if (rc == 0)
			rc = buf_cat(c, b, &text);
		if (rc == 0)
			rc = buf_str(c, b, " */ ");
	}
	cp_buf_free(&text);
	return rc;
}

/*
 * One property into b; its type also goes onto types (for the index
 * signature), and *optional is set when the property is optional.
 */
static int add_property(struct ctx *c, struct cp_buf *b, const json_t *obj, const char *key,
                        size_t n, const json_t *sub, struct pieces *types, int *optional)
{
	struct piece t = { 0 };
	int req = 0;
	int rc = is_required(c, json_object_get(obj, "required"), key, n, &req);

	if (rc == 0)
		rc = add_property_doc(c, b, sub);
	if (rc == 0)
		rc = add_name(c, b, key, n);
	if (rc == 0)
		rc = buf_str(c, b, req ? ": " : "?: ");
	if (rc == 0)
		rc = render(c, sub, &t);
	if (rc == 0)
		rc = buf_cat(c, b, &t.b);
	if (rc == 0)
		rc = buf_str(c, b, "; ");
	if (rc == 0)
		rc = pieces_push(c, types, &t);
	*optional |= !req;
	cp_buf_free(&t.b);
	return rc;
}

/* The index signature's type, or none (has = 0). */
static int render_index(struct ctx *c, const json_t *s, struct piece *idx, int *has)
{
	const json_t *addl = json_object_get(s, "additionalProperties");

	*has = 0;
	if (json_is_false(addl) || (!addl && json_is_object(json_object_get(s, "properties"))))
		return 0;
	*has = 1;
	if (!addl || json_is_true(addl))
		return set_text(c, idx, "unknown", P_ATOM);
	return render(c, addl, idx);
}

/*
 * `[key: string]: T; ` where TypeScript wants every named property to fit
 * the index type too: T | (property types) | undefined (for optional ones).
 * Moves idx and the types into the union.
 */
static int add_index(struct ctx *c, struct cp_buf *b, struct piece *idx, struct pieces *types,
                     int optional)
{
	struct pieces all = { 0 };
	struct piece u = { 0 };
	int rc = pieces_push(c, &all, idx);

	for (size_t i = 0; i < types->n && rc == 0; i++)
		rc = pieces_push(c, &all, &types->v[i]);
	if (rc == 0 && optional)
		rc = set_text(c, &u, "undefined", P_ATOM);
	if (rc == 0 && optional)
		rc = pieces_push(c, &all, &u);
	if (rc == 0)
		rc = join(c, &all, 1, &u);
	if (rc == 0)
		rc = buf_str(c, b, "[key: string]: ");
	if (rc == 0)
		rc = buf_cat(c, b, &u.b);
	if (rc == 0)
		rc = buf_str(c, b, "; ");
	cp_buf_free(&u.b);
	pieces_free(&all);
	return rc;
}

static int render_object(struct ctx *c, const json_t *s, struct piece *out)
{
	const json_t *props = json_object_get(s, "properties");
	struct pieces types = { 0 };
	struct piece idx = { 0 };
	const char *key = NULL;
	size_t n = 0;
	json_t *sub = NULL;
	int has = 0, optional = 0;
	int rc = render_index(c, s, &idx, &has);

	out->prec = P_ATOM;
	if (rc == 0 && !has && json_object_size(props) == 0) {
		rc = buf_str(c, &out->b, "{}");
		goto done;
	}
	if (rc == 0)
		rc = buf_str(c, &out->b, "{ ");
	json_object_keylen_foreach((json_t *)props, key, n, sub) {
		if (rc == 0)
			rc = add_property(c, &out->b, s, key, n, sub, &types, &optional);
	}
	if (rc == 0 && has)
		rc = add_index(c, &out->b, &idx, &types, optional);
	if (rc == 0)
		rc = buf_str(c, &out->b, "}");
done:
	cp_buf_free(&idx.b);
	pieces_free(&types);
	return rc;
}

/* ---- types ---- */

static int render_type(struct ctx *c, const json_t *s, const char *name, struct piece *out)
{
	static const char *const simple[][2] = {
		{ "string", "string" }, { "number", "number" }, { "integer", "number" },
		{ "boolean", "boolean" }, { "null", "null" },
	};

	for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
		if (strcmp(name, simple[i][0]) == 0)
			return set_text(c, out, simple[i][1], P_ATOM);
	if (strcmp(name, "array") == 0)
		return render_array(c, s, out);
	if (strcmp(name, "object") == 0)
		return render_object(c, s, out);
	return set_text(c, out, "unknown", P_ATOM);
}

static int render_enum(struct ctx *c, const json_t *e, struct piece *out)
{
	struct pieces ps = { 0 };
	struct piece p = { 0 };
	int rc = 0;

	for (size_t i = 0; i < json_array_size(e) && rc == 0; i++) {
		if (++c->nodes > BROKER_DECL_MAX_NODES)
			rc = cp_err_set(c->err, CP_E_TOO_BIG, "enum too large to render");
		if (rc == 0)
			rc = literal(c, json_array_get(e, i), &p);
		if (rc == 1) {
			rc = set_text(c, out, "unknown", P_ATOM);
			goto done;
		}
		if (rc == 0)
			rc = pieces_push(c, &ps, &p);
	}
	if (rc == 0)
		rc = join(c, &ps, 1, out);
done:
	cp_buf_free(&p.b);
	pieces_free(&ps);
	return rc;
}

static int render_type_list(struct ctx *c, const json_t *s, const json_t *types, struct piece *out)
{
	struct pieces ps = { 0 };
	struct piece p = { 0 };
	int rc = 0;

	for (size_t i = 0; i < json_array_size(types) && rc == 0; i++) {
		const json_t *t = json_array_get(types, i);
		if (json_is_string(t))
			rc = render_type(c, s, json_string_value(t), &p);
		else
			rc = set_text(c, &p, "unknown", P_ATOM);
		if (rc == 0)
			rc = pieces_push(c, &ps, &p);
	}
	if (rc == 0)
		rc = ps.n ? join(c, &ps, 1, out) : set_text(c, out, "unknown", P_ATOM);
	cp_buf_free(&p.b);
	pieces_free(&ps);
	return rc;
}

/* What const, enum and type say (or imply) about a schema object. */
static int render_base(struct ctx *c, const json_t *s, struct piece *out)
{
	const json_t *v = json_object_get(s, "const");
	const json_t *type = json_object_get(s, "type");
	int rc;

	if (v) {
		rc = literal(c, v, out);
		return rc == 1 ? set_text(c, out, "unknown", P_ATOM) : rc;
	}
	v = json_object_get(s, "enum");
	if (json_is_array(v))
		return render_enum(c, v, out);
	if (json_is_string(type))
		return render_type(c, s, json_string_value(type), out);
	if (json_is_array(type))
		return render_type_list(c, s, type, out);
	if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties"))
		return render_object(c, s, out);
	if (json_object_get(s, "items") || json_object_get(s, "prefixItems"))
		return render_array(c, s, out);
	return set_text(c, out, "unknown", P_ATOM);
}

/* A union of anyOf or oneOf, pushed onto parts when the schema has one. */
static int push_union(struct ctx *c, const json_t *arr, struct pieces *parts)
{
	struct pieces ps = { 0 };
	struct piece p = { 0 };
	int rc = 0;

	if (!json_is_array(arr))
		return 0;
	rc = render_each(c, arr, &ps);
	if (rc == 0)
		rc = join(c, &ps, 1, &p);
	if (rc == 0)
		rc = pieces_push(c, parts, &p);
	cp_buf_free(&p.b);
	pieces_free(&ps);
	return rc;
}

/* The schema object: base & anyOf & oneOf & allOf..., then nullable. */
static int render_schema(struct ctx *c, const json_t *s, struct piece *out)
{
	const json_t *ref = json_object_get(s, "$ref");
	const json_t *all = json_object_get(s, "allOf");
	struct pieces parts = { 0 };
	struct piece p = { 0 }, pair[2];
	int rc = json_is_string(ref) ? render_ref(c, ref, &p) : render_base(c, s, &p);

	if (rc == 0)
		rc = pieces_push(c, &parts, &p);
	if (rc == 0 && !json_is_string(ref)) {
		rc = push_union(c, json_object_get(s, "anyOf"), &parts);
		if (rc == 0)
			rc = push_union(c, json_object_get(s, "oneOf"), &parts);
		if (rc == 0 && json_is_array(all))
			rc = render_each(c, all, &parts);
	}
	if (rc == 0)
		rc = join(c, &parts, 0, &p);
	if (rc == 0 && !p.nullish && json_is_true(json_object_get(s, "nullable"))) {
		memset(pair, 0, sizeof pair);
		pair[0] = p;
		memset(&p, 0, sizeof p);
		rc = set_text(c, &pair[1], "null", P_ATOM);
		if (rc == 0)
			rc = join_pieces(c, pair, 2, 1, &p);
		cp_buf_free(&pair[0].b);
		cp_buf_free(&pair[1].b);
	}
	if (rc == 0) {
		cp_buf_free(&out->b);
		*out = p;
		memset(&p, 0, sizeof p);
	}
	cp_buf_free(&p.b);
	pieces_free(&parts);
	return rc;
}

/* Any schema into out (empty on entry); bounded by depth and node budget. */
static int render(struct ctx *c, const json_t *s, struct piece *out)
{
	int rc;

	cp_buf_reset(&out->b);
	out->prec = P_ATOM;
	out->nullish = 0;
	if (++c->nodes > BROKER_DECL_MAX_NODES)
		return cp_err_set(c->err, CP_E_TOO_BIG,
		                  "schemas expand past %ld nodes (a $ref explosion?)",
		                  BROKER_DECL_MAX_NODES);
	if (json_is_false(s))
		return set_text(c, out, "never", P_ATOM);
	if (!json_is_object(s) || c->depth >= BROKER_DECL_MAX_DEPTH)
		return set_text(c, out, "unknown", P_ATOM);
	c->depth++;
	rc = render_schema(c, s, out);
	c->depth--;
	return rc;
}

/* ---- tools ---- */

/* A document (inputSchema or outputSchema) with its own $ref root. */
static int render_document(struct ctx *c, const json_t *doc, struct cp_buf *b)
{
	struct piece p = { 0 };
	int rc;

	c->root = doc;
	c->nstack = 0;
	c->depth = 0;
	if (doc)
		c->stack[c->nstack++] = doc;
	rc = render(c, doc, &p);
	if (rc == 0)
		rc = buf_cat(c, b, &p.b);
	cp_buf_free(&p.b);
	return rc;
}

/* A tool whose calls wait for a person's approval (runner/approval.c). */
static int is_gated(const json_t *tool)
{
	const char *a = json_string_value(json_object_get(tool, "approval"));
	return a && strcmp(a, "required") == 0;
}

static const char gated_note[] = "Needs a person's approval before it runs: see the note "
                                 "above `tools`.";

/* What the model must know when a tool needs approval: the program stops at
 * its call and is run again from the start once a person answered. */
static const char approval_rules[] =
	"/*\n"
	" * Some tools need a person's approval. A program that calls one stops there;\n"
	" * once a person approved (or refused) the call, the program is run again from\n"
	" * the start: the calls it made before are answered as the first time, and the\n"
	" * approved call then runs (a refused one throws an Error with the reason).\n"
	" * So before a call that needs approval, make the same calls in the same order\n"
	" * on every run: do not branch on the time, on randomness or on anything else\n"
	" * that can change between runs. What the program wrote to the workspace before\n"
	" * that call is written again: make such writes idempotent (the same content,\n"
	" * at the same path).\n"
	" */\n";

static int add_tool_doc(struct ctx *c, struct cp_buf *b, const json_t *tool)
{
	struct cp_buf text = { 0 };
	int rc = clean_description(c, json_object_get(tool, "description"), 0, &text);
	if (rc == 0 && is_gated(tool) && cp_buf_len(&text))
		rc = buf_str(c, &text, "\n\n");
	if (rc == 0 && is_gated(tool))
		rc = buf_str(c, &text, gated_note);
	const char *t = cp_buf_ptr(&text);
	size_t n = cp_buf_len(&text);
	int multi = memchr(t, '\n', n) != NULL;

	if (rc || n == 0)
		goto done;
	rc = buf_str(c, b, multi ? "  /**\n   * " : "  /** ");
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (t[i] != '\n')
			rc = buf_add(c, b, &t[i], 1);
		else if (i + 1 < n && t[i + 1] == '\n')
			rc = buf_str(c, b, "\n   *"); /* a blank line */
		else
			rc = buf_str(c, b, "\n   * ");
	}
	if (rc == 0)
		rc = buf_str(c, b, multi ? "\n   */\n" : " */\n");
done:
	cp_buf_free(&text);
	return rc;
}

/* The signature after the name: `: (input: I) => Promise<O>;` */
static int render_signature(struct ctx *c, struct cp_buf *b, const json_t *tool)
{
	int rc = buf_str(c, b, ": (input: ");

	if (rc == 0)
		rc = render_document(c, json_object_get(tool, "inputSchema"), b);
	if (rc == 0)
		rc = buf_str(c, b, ") => Promise<");
	if (rc == 0)
		rc = render_document(c, json_object_get(tool, "outputSchema"), b);
	if (rc == 0)
		rc = buf_str(c, b, ">;\n");
	return rc;
}

static int is_enabled(const json_t *tool)
{
	return !json_is_false(json_object_get(tool, "enabled"));
}

/* Tool i's alias as the program can use it, into *out (new string, or
 * NULL): the runner gives an alias to the first declared tool (enabled or
 * not) that maps to it, and a tool named exactly like it wins over it. */
static int usable_alias(struct ctx *c, const json_t *tools, size_t i, char **out)
{
	const json_t *name = json_object_get(json_array_get(tools, i), "name");
	char *a = broker_decl_alias(json_string_value(name), json_string_length(name));
	int rc = a ? charge(c, (long)json_array_size(tools)) : 0;
	for (size_t j = 0; a && rc == 0 && j < json_array_size(tools); j++) {
		const json_t *u = json_object_get(json_array_get(tools, j), "name");
		char *b = NULL;
		if (strcmp(json_string_value(u), a) == 0 ||
		    (j < i && (b = broker_decl_alias(json_string_value(u), json_string_length(u))) &&
		     strcmp(b, a) == 0)) {
			free(a);
			a = NULL;
		}
		free(b);
	}
	if (rc) {
		free(a);
		a = NULL;
	}
	*out = a;
	return rc;
}

static int render_tool(struct ctx *c, struct cp_buf *b, const json_t *tools, size_t i)
{
	const json_t *tool = json_array_get(tools, i);
	const json_t *name = json_object_get(tool, "name");
	char *alias = NULL;
	int rc = usable_alias(c, tools, i, &alias);

	if (rc == 0)
		rc = add_tool_doc(c, b, tool);

	if (rc == 0)
		rc = buf_str(c, b, "  ");
	if (rc == 0)
		rc = add_name(c, b, json_string_value(name), json_string_length(name));
	if (rc == 0)
		rc = render_signature(c, b, tool);
	if (rc == 0 && alias) {
		rc = buf_str(c, b, "  /** The same tool as ");
		if (rc == 0)
			rc = add_string_literal(c, b, json_string_value(name), json_string_length(name));
		if (rc == 0)
			rc = buf_str(c, b, ". */\n  ");
		if (rc == 0)
			rc = buf_str(c, b, alias);
		if (rc == 0)
			rc = render_signature(c, b, tool);
	}
	free(alias);
	return rc;
}

/* Tool i is well-formed and its name is not taken by an earlier tool. */
static int check_tool(struct ctx *c, const json_t *tools, size_t i)
{
	const json_t *t = json_array_get(tools, i);
	const json_t *name = json_object_get(t, "name");
	const json_t *en = json_object_get(t, "enabled");
	int rc;

	if (!json_is_object(t))
		return cp_err_set(c->err, CP_E_INVALID_REQUEST, "tools[%zu] is not an object", i);
	if (!json_is_string(name) || json_string_length(name) == 0)
		return cp_err_set(c->err, CP_E_INVALID_REQUEST,
		                  "tools[%zu]: name must be a non-empty string", i);
	if (en && !json_is_boolean(en))
		return cp_err_set(c->err, CP_E_INVALID_REQUEST,
		                  "tools[%zu]: enabled must be a boolean", i);
	if (!is_enabled(t))
		return 0;
	rc = charge(c, (long)i);
	for (size_t j = 0; j < i && rc == 0; j++) {
		const json_t *u = json_array_get(tools, j);
		if (is_enabled(u) && json_equal(json_object_get(u, "name"), name))
			rc = cp_err_set(c->err, CP_E_INVALID_REQUEST,
			                "tools[%zu]: two enabled tools are named %.100s", i,
			                json_string_value(name));
	}
	return rc;
}

/* ---- the preamble ---- */

/* NULL: BROKER_DECL_PREAMBLE. Set once before the loop (decl.h). */
static char *preamble;

static int package_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       strchr("@/._~-", ch) != NULL;
}

/* Appends word (with ", " before it unless first) to the comment in b,
 * starting a new " * " line past 76 columns. */
static int add_wrapped(struct ctx *c, struct cp_buf *b, size_t *col, const char *w, size_t n,
                       int first, int last)
{
	size_t need = n + 2; /* the space before, the comma or stop after */
	int rc = 0;

	if (!first) {
		rc = buf_str(c, b, ",");
		(*col)++;
	}
	if (rc == 0 && *col + need > 76) {
		rc = buf_str(c, b, "\n *");
		*col = 2;
	}
	if (rc == 0)
		rc = buf_str(c, b, " ");
	if (rc == 0)
		rc = buf_add(c, b, w, n);
	*col += n + 1;
	if (rc == 0 && last)
		rc = buf_str(c, b, ".");
	return rc;
}

int broker_decl_set_packages(const char *list, struct cp_err *err)
{
	static const char head[] = "/**\n"
		" * The tools a program calls as `await tools.name(input)`. Programs of one\n"
		" * conversation may run at the same time, and then share its workspace\n"
		" * (the working directory): give files each program writes names of their\n"
		" * own. Programs have no network access: fetch and sockets fail.\n"
		" * require() gives Node's built-in modules and these packages:";
	struct ctx c = { .err = err };
	struct cp_buf b = { 0 };
	const char *names[BROKER_DECL_MAX_PACKAGES];
	size_t lens[BROKER_DECL_MAX_PACKAGES], count = 0, col = 0;
	const char *p = list ? list : "";
	int rc = 0;

	while (*p) {
		while (*p == ' ')
			p++;
		const char *start = p;
		while (*p && *p != ',')
			p++;
		size_t n = (size_t)(p - start);
		while (n && start[n - 1] == ' ')
			n--;
		if (*p == ',')
			p++;
		if (n == 0)
			continue;
		if (count == BROKER_DECL_MAX_PACKAGES)
			return cp_err_set(err, CP_E_INVALID_REQUEST, "more than %d packages",
			                  BROKER_DECL_MAX_PACKAGES);
		for (size_t i = 0; i < n; i++)
			if (!package_char(start[i]))
				return cp_err_set(err, CP_E_INVALID_REQUEST,
				                  "package %zu: not an npm package name", count + 1);
		if (n > 214)
			return cp_err_set(err, CP_E_INVALID_REQUEST,
			                  "package %zu: longer than 214 bytes", count + 1);
		names[count] = start;
		lens[count++] = n;
	}
	if (count == 0) {
		free(preamble);
		preamble = NULL;
		return 0;
	}
	col = strlen(strrchr(head, '\n') + 1); /* head's last line */
	rc = buf_str(&c, &b, head);
	for (size_t i = 0; i < count && rc == 0; i++)
		rc = add_wrapped(&c, &b, &col, names[i], lens[i], i == 0, i + 1 == count);
	if (rc == 0)
		rc = buf_str(&c, &b, "\n */\n");
	char *text = rc == 0 ? cp_buf_take(&b, NULL, NULL) : NULL;
	cp_buf_free(&b);
	if (rc)
		return rc;
	if (!text)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	free(preamble);
	preamble = text;
	return 0;
}

int broker_decl_render(const json_t *tools, char **out, struct cp_err *err)
{
	struct ctx c = { .err = err };
	struct cp_buf b = { 0 };
	int rc = 0;

	if (out)
		*out = NULL;
	if (json_is_object(tools))
		tools = json_object_get(tools, "tools");
	if (!json_is_array(tools))
		return cp_err_set(err, CP_E_INVALID_REQUEST, "tools must be an array");
	for (size_t i = 0; i < json_array_size(tools) && rc == 0; i++)
		rc = check_tool(&c, tools, i);
	int gated = 0;
	for (size_t i = 0; i < json_array_size(tools) && rc == 0; i++)
		gated |= is_enabled(json_array_get(tools, i)) && is_gated(json_array_get(tools, i));
	if (rc == 0 && gated)
		rc = buf_str(&c, &b, approval_rules);
	if (rc == 0)
		rc = buf_str(&c, &b, preamble ? preamble : BROKER_DECL_PREAMBLE);
	if (rc == 0)
		rc = buf_str(&c, &b, "declare const tools: {\n");
	for (size_t i = 0; i < json_array_size(tools) && rc == 0; i++)
		if (is_enabled(json_array_get(tools, i)))
			rc = render_tool(&c, &b, tools, i);
	if (rc == 0)
		rc = buf_str(&c, &b, "};\n");
	if (rc == 0 && out && !(*out = cp_buf_take(&b, NULL, NULL)))
		rc = cp_err_set(err, CP_E_NOMEM, "out of memory");
	cp_buf_free(&b);
	return rc;
}
