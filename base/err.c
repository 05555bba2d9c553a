#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vset(struct cp_err *err, const char *where, enum cp_code code,
                 const char *fmt, va_list ap)
{
	err->code = code;
	err->where = where;
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
}

int cp_err_set_at(struct cp_err *err, const char *where, enum cp_code code,
                  const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vset(err, where, code, fmt, ap);
		va_end(ap);
	}
	return code;
}

int cp_err_errno_at(struct cp_err *err, const char *where, enum cp_code code,
                    int errnum, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vset(err, where, code, fmt, ap);
		va_end(ap);
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(errnum));
	}
	return code;
}

void cp_err_clear(struct cp_err *err)
{
	if (err) {
		err->code = CP_OK;
		err->msg[0] = '\0';
		err->where = NULL;
	}
}

const char *cp_code_name(enum cp_code code)
{
	switch (code) {
	case CP_OK: return "OK";
	case CP_E_INVALID_REQUEST: return "INVALID_REQUEST";
	case CP_E_SOURCE_TOO_LARGE: return "SOURCE_TOO_LARGE";
	case CP_E_SANDBOX_UNAVAILABLE: return "SANDBOX_UNAVAILABLE";
	case CP_E_STARTUP_TIMEOUT: return "STARTUP_TIMEOUT";
	case CP_E_TIMEOUT: return "TIMEOUT";
	case CP_E_SCRIPT_ERROR: return "SCRIPT_ERROR";
	case CP_E_RESULT_TOO_LARGE: return "RESULT_TOO_LARGE";
	case CP_E_PROCESS_EXITED: return "PROCESS_EXITED";
	case CP_E_NEVER_SETTLES: return "NEVER_SETTLES";
	case CP_E_CANCELLED: return "CANCELLED";
	case CP_E_OUTCOME_UNKNOWN: return "OUTCOME_UNKNOWN";
	case CP_E_CPU_LIMIT: return "CPU_LIMIT";
	case CP_E_REPLAY_DIVERGED: return "REPLAY_DIVERGED";
	case CP_E_FILE_NOT_FOUND: return "NOT_FOUND";
	case CP_E_PRECONDITION: return "PRECONDITION_FAILED";
	case CP_E_FILE_TOO_LARGE: return "TOO_LARGE";
	default: return "INTERNAL";
	}
}
