#include "base/log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum cp_log_level min_level = CP_LOG_INFO;
static const char *const names[] = { "debug", "info", "warn", "error" };

void cp_log_set_level(enum cp_log_level level)
{
	min_level = level;
}

int cp_log_parse_level(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

void cp_log(enum cp_log_level level, const char *event, ...)
{
	va_list ap;
	va_start(ap, event);
	json_t *o = level >= min_level ? json_object() : NULL;
	for (;;) {
		const char *key = va_arg(ap, const char *);
		if (!key)
			break;
		json_t *v = va_arg(ap, json_t *);
		if (o && v)
			json_object_set_new(o, key, v);
		else
			json_decref(v);
	}
	va_end(ap);
	if (!o)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[40];
	size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + n, sizeof when - n, ".%03ldZ", ts.tv_nsec / 1000000);
	json_object_set_new(o, "time", json_string(when));
	json_object_set_new(o, "level", json_string(names[level]));
	json_object_set_new(o, "event", json_string(event));
	char *line = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (line) {
		size_t len = strlen(line);
		line[len] = '\n';
		/* One write per line so concurrent writers never interleave a line. */
		ssize_t w = write(STDERR_FILENO, line, len + 1);
		(void)w;
		line[len] = '\0';
	}
	free(line);
}
