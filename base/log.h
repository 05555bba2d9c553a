/*
 * log.h - operational logs: one JSON object per line on stderr with time,
 * level, event and the given fields. Never pass program text, tool inputs or
 * outputs, or secrets.
 *
 * Ownership: cp_log steals every json_t value passed (NULL values are
 * skipped), so calls read cp_log(level, "event", "id", json_string(id), NULL).
 */
#ifndef CP_LOG_H
#define CP_LOG_H

enum cp_log_level { CP_LOG_DEBUG, CP_LOG_INFO, CP_LOG_WARN, CP_LOG_ERROR };

/* Messages below this level are dropped (default INFO). */
void cp_log_set_level(enum cp_log_level level);
/* "debug", "info", "warn", "error"; returns -1 for anything else. */
int cp_log_parse_level(const char *name);

/* Key/value pairs (const char *, json_t *), ended by NULL. */
void cp_log(enum cp_log_level level, const char *event, ...);

#endif
