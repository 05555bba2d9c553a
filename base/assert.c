#include "base/assert.h"

#include <jansson.h>
#include <stdlib.h>

#include "base/log.h"

_Noreturn void cp_assert_failed(const char *cond, const char *file, int line)
{
	cp_log(CP_LOG_ERROR, "assert.failed", "condition", json_string(cond), "file",
	       json_string(file), "line", json_integer(line), NULL);
	abort();
}
