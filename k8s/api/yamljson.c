#include "k8s/api/yamljson.h"

#include <string.h>
#include <yaml.h>

struct conv {
	yaml_document_t *doc;
	size_t nodes;
	const char *what;
	struct cp_err *err;
	int failed;
};

static json_t *fail(struct conv *c, const char *why)
{
	if (!c->failed)
		cp_err_set(c->err, CP_E_PARSE, "%s: %s", c->what, why);
	c->failed = 1;
	return NULL;
}

static json_t *scalar(const yaml_node_t *n)
{
	const char *s = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;
	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		if (len == 0 || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
			return json_null();
		if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
			return json_true();
		if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
			return json_false();
		json_t *num = json_loadb(s, len, JSON_DECODE_ANY, NULL);
		if (json_is_number(num))
			return num;
		json_decref(num);
	}
	return json_stringn(s, len);
}

static json_t *convert(struct conv *c, yaml_node_t *n, int depth)
{
	if (!n)
		return fail(c, "broken YAML node reference");
	if (depth > K8S_YAML_MAX_DEPTH)
		return fail(c, "nested too deeply");
	if (++c->nodes > K8S_YAML_MAX_NODES)
		return fail(c, "too many values (an alias bomb?)");
	if (n->type == YAML_SCALAR_NODE) {
		json_t *v = scalar(n);
		return v ? v : fail(c, "a string is not valid UTF-8");
	}
	if (n->type == YAML_SEQUENCE_NODE) {
		json_t *a = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     a && i < n->data.sequence.items.top; i++) {
			json_t *v = convert(c, yaml_document_get_node(c->doc, *i), depth + 1);
			if (!v || json_array_append_new(a, v)) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	json_t *o = json_object();
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     o && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		if (!k || k->type != YAML_SCALAR_NODE) {
			json_decref(o);
			return fail(c, "a mapping key is not a plain string");
		}
		json_t *v = convert(c, yaml_document_get_node(c->doc, p->value), depth + 1);
		if (!v || json_object_set_new(o, (const char *)k->data.scalar.value, v)) {
			json_decref(o);
			return c->failed ? NULL : fail(c, "a mapping key is not valid UTF-8");
		}
	}
	return o;
}

json_t *k8s_yaml_to_json(const char *buf, size_t len, const char *what,
                         struct cp_err *err)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&parser)) {
		cp_err_set(err, CP_E_NOMEM, "%s: out of memory", what);
		return NULL;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&parser, &doc)) {
		cp_err_set(err, CP_E_PARSE, "%s: line %zu: %s", what,
		           (size_t)parser.problem_mark.line + 1,
		           parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		return NULL;
	}
	struct conv c = { &doc, 0, what, err, 0 };
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	json_t *v = root ? convert(&c, root, 0) : NULL;
	if (!root)
		cp_err_set(err, CP_E_PARSE, "%s: empty document", what);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return v;
}
