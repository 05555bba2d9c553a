/*
 * stdio_serve.h - `codepod serve --stdio`: the session protocol as JSON lines on
 * stdin and stdout. EOF on stdin (or SIGTERM/SIGINT) closes the session:
 * running executions are abandoned, their results are written, and done()
 * fires once the last one has ended.
 *
 * Loop context: the loop thread only. Ownership: the engine and id set are
 * borrowed and must outlive the transport; broker_stdio_free after done().
 */
#ifndef BROKER_STDIO_H
#define BROKER_STDIO_H

#include <uv.h>

#include "runner/codepod.h"
#include "base/idset.h"

struct broker_stdio;

/* @max_executions: running at once (across this engine); an execute over it
 * is refused with TOO_MANY_EXECUTIONS. */
int broker_stdio_start(uv_loop_t *loop, struct codepod *cp, struct cp_idset *ids,
                       size_t max_message, unsigned max_executions, void (*done)(void *ud),
                       void *ud, struct broker_stdio **out, struct cp_err *err);

/* Close the session as if stdin had ended (for SIGTERM/SIGINT). */
void broker_stdio_shutdown(struct broker_stdio *t);

void broker_stdio_free(struct broker_stdio *t);

#endif
