/*
 * state.h - the one check every state machine's setter makes: a transition
 * is logged at debug level and asserted legal (CP_ASSERT, base/assert.h).
 * Each machine keeps its own enum, names and table; its setter calls
 * cp_state_change() and then stores the new state itself.
 *
 * Ownership: a machine's fields are static tables of its owner; @id is
 * borrowed for the call.
 */
#ifndef CP_STATE_H
#define CP_STATE_H

#include <stdint.h>

struct cp_state_machine {
	const char *event;          /* the log line's event, e.g. "exec.state" */
	const char *id_key;         /* the field naming the thing, e.g. "id" */
	const char *const *names;   /* a name per state */
	const unsigned char *legal; /* n * n: legal[from * n + to] is 1 when allowed */
	unsigned n;                 /* how many states */
};

/* Logs @from -> @to of the thing @id (with "call": @seq when @seq >= 0)
 * and asserts the transition is in the table. */
void cp_state_change(const struct cp_state_machine *m, const char *id, int64_t seq,
                     unsigned from, unsigned to);

#endif
