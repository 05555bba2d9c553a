/*
 * fake_scripted.h - a fake backend for fuzz targets whose runner answers
 * the engine's hello with a fixed script of frames and then exits with
 * code 0 (killed: signal 9, at once). The script is records
 * [kind][len high][len low][payload] (a record whose length runs past the
 * end takes the rest); each is framed with the execution's nonce.
 *
 * Header-only (static functions), like fake_runner.h. struct codepod_proc is
 * defined here: a target that includes this has no fake process of its own.
 *
 * Ownership: the script is borrowed (valid while executions run); each
 * process is freed once its timer closed, `live` counts those not yet freed.
 * Context: the loop thread only.
 */
#ifndef FUZZ_FAKE_SCRIPTED_H
#define FUZZ_FAKE_SCRIPTED_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "runner/codepod.h"
#include "fake_runner.h"

struct fake_backend {
	struct codepod_backend base; /* first: the engine hands back &base */
	uv_loop_t *loop;
	const uint8_t *frames;
	size_t nframes;
	unsigned live;
};

struct codepod_proc {
	struct fake_backend *b;
	struct codepod_proc_cbs cbs;
	void *ud;
	uv_timer_t t;
	int killed, sent;
	char nonce[33];
};

static void fake_on_closed(uv_handle_t *h)
{
	struct codepod_proc *p = h->data;
	p->b->live--;
	free(p);
}

/* First run (after the hello): the script, then again at once to exit. */
static void fake_on_timer(uv_timer_t *t)
{
	struct codepod_proc *p = t->data;
	if (!p->killed && !p->sent) {
		p->sent = 1;
		const uint8_t *d = p->b->frames;
		size_t left = p->b->nframes;
		while (left >= 3 && !p->killed) {
			size_t len = (size_t)d[1] << 8 | d[2];
			if (len > left - 3)
				len = left - 3;
			fake_frame(&p->cbs, p->ud, p->nonce, (char)d[0], d + 3, len);
			d += 3 + len;
			left -= 3 + len;
		}
		uv_timer_start(&p->t, fake_on_timer, 0, 0); /* then exit */
		return;
	}
	struct codepod_proc_exit ex;
	memset(&ex, 0, sizeof ex);
	ex.code = p->killed ? -1 : 0;
	ex.signal = p->killed ? 9 : 0;
	p->killed = 1;
	p->cbs.exited(p->ud, &ex);
	uv_close((uv_handle_t *)&p->t, fake_on_closed);
}

static int fake_spawn(struct codepod_backend *base, const struct codepod_spawn_req *req,
                      const struct codepod_proc_cbs *cbs, void *ud, struct codepod_proc **out,
                      struct cp_err *err)
{
	struct fake_backend *b = (struct fake_backend *)(void *)base;
	(void)req;
	struct codepod_proc *p = calloc(1, sizeof *p);
	if (!p)
		return cp_err_set(err, CP_E_NOMEM, "out of memory");
	p->b = b;
	p->cbs = *cbs;
	p->ud = ud;
	uv_timer_init(b->loop, &p->t);
	p->t.data = p;
	b->live++;
	*out = p;
	return 0;
}

static int fake_write(struct codepod_proc *p, const char *buf, size_t len, struct cp_err *err)
{
	if (p->killed)
		return cp_err_set(err, CP_E_STATE, "fake: the process is gone");
	json_t *h = p->nonce[0] ? NULL : fake_hello(buf, len, p->nonce);
	if (h) {
		json_decref(h);
		uv_timer_start(&p->t, fake_on_timer, 0, 0);
	}
	return 0;
}

static void fake_kill(struct codepod_proc *p)
{
	if (p->killed)
		return;
	p->killed = 1;
	uv_timer_stop(&p->t);
	uv_timer_start(&p->t, fake_on_timer, 0, 0);
}

static void fake_note_pid(struct codepod_proc *p, long pid, unsigned long long start)
{
	(void)p;
	(void)start;
	if (pid <= 1)
		abort(); /* the engine passes on only a real pid */
}

static void fake_destroy(struct codepod_backend *b)
{
	(void)b;
}

static const struct codepod_backend_ops fake_ops = {
	.spawn = fake_spawn, .write = fake_write, .kill = fake_kill,
	.note_pid = fake_note_pid, .destroy = fake_destroy,
};

/* A backend named "local" on @loop that plays @frames (@n bytes). */
static void fake_backend_init(struct fake_backend *b, uv_loop_t *loop, const uint8_t *frames,
                              size_t n)
{
	memset(b, 0, sizeof *b);
	b->base.ops = &fake_ops;
	b->base.name = "local";
	b->loop = loop;
	b->frames = frames;
	b->nframes = n;
}

#endif
