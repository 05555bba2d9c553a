#include "base/state.h"

#include <jansson.h>

#include "base/assert.h"
#include "base/log.h"

void cp_state_change(const struct cp_state_machine *m, const char *id, int64_t seq,
                     unsigned from, unsigned to)
{
	CP_ASSERT(from < m->n && to < m->n);
	cp_log(CP_LOG_DEBUG, m->event, m->id_key, id ? json_string(id) : NULL,
	       "call", seq >= 0 ? json_integer((json_int_t)seq) : NULL,
	       "from", json_string(m->names[from]), "to", json_string(m->names[to]), NULL);
	CP_ASSERT(m->legal[from * m->n + to]);
}
