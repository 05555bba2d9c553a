#include "base/idset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CAP_MAX ((size_t)1 << 30)

struct cp_idset {
	size_t cap, count, head; /* ring of ids in insertion order; oldest at head */
	char **ids;
	uint64_t *hashes;        /* hash of ids[i] */
	uint32_t *table;         /* ring index + 1, 0 = empty */
	size_t mask;             /* table size - 1 */
	uint64_t k0, k1;         /* SipHash key */
};

static uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

static void sipround(uint64_t v[4])
{
	v[0] += v[1]; v[1] = rotl(v[1], 13); v[1] ^= v[0]; v[0] = rotl(v[0], 32);
	v[2] += v[3]; v[3] = rotl(v[3], 16); v[3] ^= v[2];
	v[0] += v[3]; v[3] = rotl(v[3], 21); v[3] ^= v[0];
	v[2] += v[1]; v[1] = rotl(v[1], 17); v[1] ^= v[2]; v[2] = rotl(v[2], 32);
}

static uint64_t load_le(const unsigned char *p, size_t n)
{
	uint64_t m = 0;
	size_t i;

	for (i = 0; i < n; i++)
		m |= (uint64_t)p[i] << (8 * i);
	return m;
}

/* SipHash-2-4 (Aumasson & Bernstein): keyed, so ids cannot be chosen to collide. */
static uint64_t siphash(const struct cp_idset *s, const char *id, size_t len)
{
	const unsigned char *p = (const unsigned char *)id;
	uint64_t v[4] = { s->k0 ^ 0x736f6d6570736575ULL, s->k1 ^ 0x646f72616e646f6dULL,
	                  s->k0 ^ 0x6c7967656e657261ULL, s->k1 ^ 0x7465646279746573ULL };
	uint64_t m;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		m = load_le(p + i, 8);
		v[3] ^= m;
		sipround(v);
		sipround(v);
		v[0] ^= m;
	}
	m = load_le(p + i, len - i) | ((uint64_t)len << 56);
	v[3] ^= m;
	sipround(v);
	sipround(v);
	v[0] ^= m;
	v[2] ^= 0xff;
	for (i = 0; i < 4; i++)
		sipround(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static void seed(struct cp_idset *s)
{
	uint64_t k[2] = { 0, 0 };

	if (getentropy(k, sizeof k) != 0) {
		/* No entropy source: fall back to ASLR'd addresses (weak, but not constant). */
		k[0] = (uint64_t)(uintptr_t)s ^ 0x9e3779b97f4a7c15ULL;
		k[1] = (uint64_t)(uintptr_t)&k ^ (uint64_t)(uintptr_t)seed;
	}
	s->k0 = k[0];
	s->k1 = k[1];
}

struct cp_idset *cp_idset_new(size_t capacity)
{
	struct cp_idset *s = NULL;
	size_t tsize = 2;

	if (capacity == 0 || capacity > CAP_MAX)
		return NULL;
	while (tsize < 2 * capacity)
		tsize *= 2;
	s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->ids = calloc(capacity, sizeof *s->ids);
	s->hashes = calloc(capacity, sizeof *s->hashes);
	s->table = calloc(tsize, sizeof *s->table);
	if (!s->ids || !s->hashes || !s->table) {
		cp_idset_free(s);
		return NULL;
	}
	s->cap = capacity;
	s->mask = tsize - 1;
	seed(s);
	return s;
}

void cp_idset_free(struct cp_idset *s)
{
	size_t i;

	if (!s)
		return;
	if (s->ids)
		for (i = 0; i < s->count; i++)
			free(s->ids[(s->head + i) % s->cap]);
	free(s->ids);
	free(s->hashes);
	free(s->table);
	free(s);
}

/* Slot of id in the table, or SIZE_MAX. */
static size_t find(const struct cp_idset *s, const char *id, uint64_t h)
{
	size_t i = (size_t)h & s->mask;

	while (s->table[i]) {
		size_t idx = s->table[i] - 1;

		if (s->hashes[idx] == h && strcmp(s->ids[idx], id) == 0)
			return i;
		i = (i + 1) & s->mask;
	}
	return SIZE_MAX;
}

/* Empties slot i, shifting later entries of the probe run back (no tombstones). */
static void remove_slot(struct cp_idset *s, size_t i)
{
	size_t j = i;

	for (;;) {
		size_t home;

		j = (j + 1) & s->mask;
		if (!s->table[j])
			break;
		home = (size_t)s->hashes[s->table[j] - 1] & s->mask;
		/* The entry at j may move to i unless its home lies cyclically in (i, j]. */
		if (j > i ? (home <= i || home > j) : (home <= i && home > j)) {
			s->table[i] = s->table[j];
			i = j;
		}
	}
	s->table[i] = 0;
}

static void evict_oldest(struct cp_idset *s)
{
	size_t idx = s->head, i = (size_t)s->hashes[idx] & s->mask;

	while (s->table[i] != idx + 1)
		i = (i + 1) & s->mask;
	remove_slot(s, i);
	free(s->ids[idx]);
	s->ids[idx] = NULL;
	s->head = (s->head + 1) % s->cap;
	s->count--;
}

int cp_idset_has(const struct cp_idset *s, const char *id)
{
	if (!id)
		return 0;
	return find(s, id, siphash(s, id, strlen(id))) != SIZE_MAX;
}

int cp_idset_add(struct cp_idset *s, const char *id, struct cp_err *err)
{
	size_t len, idx, i;
	uint64_t h;
	char *copy = NULL;

	if (!id)
		return cp_err_set(err, CP_E_INTERNAL, "NULL id");
	len = strlen(id);
	h = siphash(s, id, len);
	if (find(s, id, h) != SIZE_MAX)
		return cp_err_set(err, CP_E_CONFLICT, "id already used");
	copy = malloc(len + 1);
	if (!copy)
		return cp_err_set(err, CP_E_NOMEM, "cannot copy a %zu-byte id", len);
	memcpy(copy, id, len + 1);
	if (s->count == s->cap)
		evict_oldest(s);
	idx = (s->head + s->count) % s->cap;
	s->ids[idx] = copy;
	s->hashes[idx] = h;
	s->count++;
	i = (size_t)h & s->mask;
	while (s->table[i])
		i = (i + 1) & s->mask;
	s->table[i] = (uint32_t)(idx + 1);
	return 0;
}
