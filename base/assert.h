/*
 * assert.h - CP_ASSERT(cond): a check of what the code itself guarantees
 * (a legal state transition, an invariant between fields), never of input:
 * input gets an error, not an abort.
 *
 * When @cond is false: one JSON log line at error level through base/log.h
 * (event "assert.failed", with the condition's text, the file and the
 * line), then abort(). A broken invariant means the state the next step
 * reads is wrong; going on would turn one bug into a wrong outcome or a
 * use of freed memory later and somewhere else.
 *
 * On or off: on by default, in every build. `make`, `make run` and
 * `make test` share one build folder (build/), so `make test` checks the
 * very binary that `make` builds; `make asan` builds with the same default.
 * The checks are cheap (a comparison or a table lookup). `make CP_ASSERTS=0`
 * compiles them out (the condition is then not evaluated, so it must have
 * no side effect); give such a build its own folder
 * (`make BUILD=build/noassert CP_ASSERTS=0`), as make does not rebuild
 * objects when only a flag changes.
 */
#ifndef CP_ASSERT_H
#define CP_ASSERT_H

#ifndef CP_ASSERTS
#define CP_ASSERTS 1
#endif

#if CP_ASSERTS
#define CP_ASSERT(cond) ((cond) ? (void)0 : cp_assert_failed(#cond, __FILE__, __LINE__))
#else
#define CP_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

/* Logs the failed check and aborts (CP_ASSERT's slow path). */
_Noreturn void cp_assert_failed(const char *cond, const char *file, int line);

#endif
