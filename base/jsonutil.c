#include "base/jsonutil.h"

#include <string.h>

json_t *cp_json_load(const char *buf, size_t len, struct cp_err *err)
{
	json_error_t je;
	size_t flags = JSON_DECODE_ANY | JSON_ALLOW_NUL;
	json_t *v = json_loadb(buf, len, flags, &je);
	if (!v && strstr(je.text, "too big"))
		v = json_loadb(buf, len, flags | JSON_DECODE_INT_AS_REAL, &je);
	if (!v)
		cp_err_set(err, CP_E_PARSE, "invalid JSON at byte %d: %s", je.position, je.text);
	return v;
}
