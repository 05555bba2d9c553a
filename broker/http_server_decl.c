/*
 * http_server_decl.c - POST /v1/declarations: tools with JSON Schemas in
 * (`{"tools":[...]}` or an array), the TypeScript declarations a model reads
 * out, as `{"declarations": "declare const tools: {...};\n"}`.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/decl.h"
#include "broker/http_server_int.h"
#include "base/jsonutil.h"

void broker_http_decl_respond(struct lws *wsi, struct broker_http_pss *pss)
{
	struct cp_err err;
	json_t *in = cp_json_load(cp_buf_ptr(&pss->body), cp_buf_len(&pss->body), &err);
	cp_buf_free(&pss->body);
	if (!in) {
		broker_http_respond_error(wsi, pss, 400, "INVALID_REQUEST", err.msg);
		return;
	}
	char *text = NULL;
	int rc = broker_decl_render(in, &text, &err);
	json_decref(in);
	if (rc) {
		broker_http_respond_error(wsi, pss, rc == CP_E_NOMEM ? 500 : 400,
		                   rc == CP_E_NOMEM ? "INTERNAL" : "INVALID_REQUEST", err.msg);
		return;
	}
	json_t *out = json_pack("{s:s}", "declarations", text);
	free(text);
	if (!out) {
		broker_http_respond_error(wsi, pss, 500, "INTERNAL", "out of memory");
		return;
	}
	broker_http_respond_json(wsi, pss, 200, out);
	json_decref(out);
}
