/*
 * hub.c - executions across sessions and the outcomes kept after them
 * (hub.h). Linear lists: a server holds a few hundred executions at once
 * and lookups come one per attach or GET.
 */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "broker/session_int.h"

struct kept {
	struct kept *next;
	char *id;
	char *conversation;
	json_t *outcome;
	size_t bytes;
	uint64_t t_ms;
	int delivered;
};

struct broker_hub {
	struct broker_hub_config cfg;
	struct entry *entries;
	struct kept *head, *tail; /* oldest first */
	size_t nkept, kept_bytes;
};

void broker_hub_config_defaults(struct broker_hub_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->grace_s = 30;
	cfg->retention_s = 300;
	cfg->max_outcomes = 10000;
	cfg->max_outcome_bytes = (size_t)64 << 20;
}

struct broker_hub *broker_hub_new(const struct broker_hub_config *cfg)
{
	struct broker_hub *h = calloc(1, sizeof *h);
	if (h)
		h->cfg = *cfg;
	return h;
}

static void kept_free(struct kept *k)
{
	json_decref(k->outcome);
	free(k->id);
	free(k->conversation);
	free(k);
}

void broker_hub_free(struct broker_hub *h)
{
	if (!h)
		return;
	while (h->head) {
		struct kept *k = h->head;
		h->head = k->next;
		kept_free(k);
	}
	free(h);
}

uint64_t broker_hub_now_ms(const struct broker_hub *h)
{
	return h->cfg.loop ? uv_now(h->cfg.loop) : 0;
}

unsigned broker_hub_grace_s(const struct broker_hub *h)
{
	return h->cfg.grace_s;
}

void broker_hub_add(struct broker_hub *h, struct entry *en)
{
	en->hub = h;
	en->next = h->entries;
	h->entries = en;
}

void broker_hub_remove(struct broker_hub *h, struct entry *en)
{
	for (struct entry **pp = &h->entries; *pp; pp = &(*pp)->next) {
		if (*pp == en) {
			*pp = en->next;
			break;
		}
	}
	en->next = NULL;
}

struct entry *broker_hub_entries(struct broker_hub *h)
{
	return h->entries;
}

struct entry *broker_hub_find(struct broker_hub *h, const char *id)
{
	for (struct entry *en = h->entries; en; en = en->next)
		if (strcmp(en->id, id) == 0)
			return en;
	return NULL;
}

static struct kept *find_kept(struct broker_hub *h, const char *id, struct kept **prev)
{
	*prev = NULL;
	for (struct kept *k = h->head; k; *prev = k, k = k->next)
		if (strcmp(k->id, id) == 0)
			return k;
	return NULL;
}

static void unlink_kept(struct broker_hub *h, struct kept *k, struct kept *prev)
{
	if (prev)
		prev->next = k->next;
	else
		h->head = k->next;
	if (h->tail == k)
		h->tail = prev;
	h->nkept--;
	h->kept_bytes -= k->bytes;
	kept_free(k);
}

/* Make room for one more of @bytes: delivered outcomes go first. */
static void evict_for(struct broker_hub *h, size_t bytes)
{
	while (h->head && (h->nkept + 1 > h->cfg.max_outcomes ||
	                   h->kept_bytes + bytes > h->cfg.max_outcome_bytes)) {
		struct kept *prev = NULL, *k = h->head;
		while (k && !k->delivered) {
			prev = k;
			k = k->next;
		}
		if (!k) {
			prev = NULL;
			k = h->head;
		}
		cp_log(CP_LOG_WARN, "outcome.evicted", "id", json_string(k->id),
		       "delivered", json_boolean(k->delivered), NULL);
		unlink_kept(h, k, prev);
	}
}

void broker_hub_retain(struct broker_hub *h, const char *id, const char *conversation,
                       const json_t *outcome, int delivered)
{
	if (!h->cfg.retention_s || !h->cfg.max_outcomes)
		return;
	size_t bytes = json_dumpb(outcome, NULL, 0, JSON_COMPACT) + strlen(id);
	if (bytes > h->cfg.max_outcome_bytes) {
		cp_log(CP_LOG_WARN, "outcome.not_kept", "id", json_string(id), "bytes",
		       json_integer((json_int_t)bytes), NULL);
		return;
	}
	evict_for(h, bytes);
	struct kept *k = calloc(1, sizeof *k);
	if (!k || !(k->id = strdup(id))) {
		free(k);
		return;
	}
	k->conversation = conversation ? strdup(conversation) : NULL;
	k->outcome = json_incref((json_t *)outcome);
	k->bytes = bytes;
	k->t_ms = broker_hub_now_ms(h);
	k->delivered = delivered;
	if (h->tail)
		h->tail->next = k;
	else
		h->head = k;
	h->tail = k;
	h->nkept++;
	h->kept_bytes += bytes;
}

const json_t *broker_hub_take_outcome(struct broker_hub *h, const char *id)
{
	struct kept *prev;
	struct kept *k = find_kept(h, id, &prev);
	if (!k)
		return NULL;
	k->delivered = 1;
	return k->outcome;
}

void broker_hub_sweep(struct broker_hub *h)
{
	uint64_t now = broker_hub_now_ms(h);
	uint64_t grace = (uint64_t)h->cfg.grace_s * 1000;
	for (struct entry *en = h->entries; en; en = en->next) {
		if (en->s || en->abandoned || now - en->detached_ms < grace)
			continue;
		en->abandoned = 1;
		cp_log(CP_LOG_INFO, "exec.grace_over", "id", json_string(en->id), NULL);
		codepod_abandon(en->exec); /* done comes on a later turn */
	}
	uint64_t keep = (uint64_t)h->cfg.retention_s * 1000;
	while (h->head && now - h->head->t_ms >= keep)
		unlink_kept(h, h->head, NULL);
}

void broker_hub_stop_all(struct broker_hub *h, const char *message)
{
	for (struct entry *en = h->entries; en; en = en->next)
		codepod_cancel(en->exec, message);
}

enum broker_hub_state broker_hub_lookup(struct broker_hub *h, const char *id,
                                        const json_t **outcome)
{
	struct kept *prev;
	if (broker_hub_find(h, id))
		return BROKER_HUB_RUNNING;
	struct kept *k = find_kept(h, id, &prev);
	if (!k)
		return BROKER_HUB_UNKNOWN;
	*outcome = k->outcome;
	return BROKER_HUB_FINISHED;
}

unsigned broker_hub_running(const struct broker_hub *h)
{
	unsigned n = 0;
	for (const struct entry *en = h->entries; en; en = en->next)
		n++;
	return n;
}

unsigned broker_hub_detached(const struct broker_hub *h)
{
	unsigned n = 0;
	for (const struct entry *en = h->entries; en; en = en->next)
		n += !en->s;
	return n;
}

size_t broker_hub_kept(const struct broker_hub *h, size_t *bytes)
{
	if (bytes)
		*bytes = h->kept_bytes;
	return h->nkept;
}

void broker_hub_forget_conversation(struct broker_hub *h, const char *conversation)
{
	for (struct entry *en = h->entries; en; en = en->next) {
		if (en->conversation && !strcmp(en->conversation, conversation) && !en->forgotten) {
			en->forgotten = 1;
			codepod_cancel(en->exec, "the conversation was deleted");
		}
	}
	struct kept **pp = &h->head, *prev = NULL;
	while (*pp) {
		struct kept *k = *pp;
		if (k->conversation && !strcmp(k->conversation, conversation)) {
			*pp = k->next;
			if (h->tail == k)
				h->tail = prev;
			h->nkept--;
			h->kept_bytes -= k->bytes;
			kept_free(k);
			continue;
		}
		prev = k;
		pp = &k->next;
	}
}
