/*
 * replay_main.c - a main() for the libFuzzer targets of tests/fuzz/, so that
 * `make test` replays every corpus file with gcc or clang and no libFuzzer.
 * Usage: fuzz_<name> DIR|FILE...   Runs LLVMFuzzerTestOneInput over every
 * regular file (directories are read one level deep) and prints the count.
 * Fails (exit 1) when an argument is missing or gives no input at all, so a
 * lost or empty corpus cannot pass as a replay.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Returns 1 when the file ran, 0 when it was not a regular file, -1 on error. */
static int run_file(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	size_t size = (size_t)st.st_size;
	/* Copy into an exact-size heap block so ASan sees overreads. */
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf || fread(buf, 1, size, f) != size) {
		fprintf(stderr, "%s: read failed\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, size);
	free(buf);
	return 1;
}

static int run_dir(const char *dir, long *count)
{
	DIR *d = opendir(dir);
	if (!d) {
		perror(dir);
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		int r = run_file(path);
		if (r < 0)
			rc = -1;
		else
			*count += r;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	long count = 0;
	int rc = 0;
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR|FILE...\n", argc > 0 ? argv[0] : "replay");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		long before = count;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			rc = 1;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count) < 0)
				rc = 1;
		} else {
			int r = run_file(argv[i]);
			if (r < 0)
				rc = 1;
			else
				count += r;
		}
		if (count == before) {
			fprintf(stderr, "%s: no input to replay (empty corpus?)\n", argv[i]);
			rc = 1;
		}
	}
	printf("%s: replayed %ld input(s)\n", argc > 0 ? argv[0] : "replay", count);
	return rc;
}
