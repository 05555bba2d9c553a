/*
 * test_k8s_fixture.h - shared helpers of the k8s unit tests: read a fixture
 * of tests/fixtures/kubernetes/ (tests run from the repository root).
 *
 * Ownership: fixture_read() returns a new NUL-terminated buffer the caller
 * frees with free().
 */
#ifndef TEST_K8S_FIXTURE_H
#define TEST_K8S_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#define FIXTURE_DIR "tests/fixtures/kubernetes/"

static inline char *fixture_read(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof path, "%s%s", FIXTURE_DIR, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s (run from the repo root)\n", path);
		return NULL;
	}
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (n < cap)
			break;
		cap *= 2;
		char *nb = realloc(buf, cap + 1);
		if (!nb) {
			free(buf);
			buf = NULL;
		}
		buf = nb;
	}
	fclose(f);
	if (buf)
		buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

#endif
