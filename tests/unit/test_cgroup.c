/* Unit tests for runner/local/cgroup.c against fake cgroup filesystems
 * (plain folders standing in for cgroup v2 and for v1's hierarchies):
 * which hierarchy is chosen, the files each execution's folder gets, the
 * pids shares as executions come and go, OOM counts read back, stale
 * folders of a codepod that is gone swept. The real kernel side is
 * tests/hostile/test_memory.py and test_pids.py. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "runner/local/cgroup.h"

static char *fake_fs(void)
{
	char tmpl[] = "/tmp/codepod-cgtest-XXXXXX";
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

static void mk(const char *root, const char *rel)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void put(const char *root, const char *rel, const char *text)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The file's text, its trailing newline dropped; "" when missing. */
static const char *got(const char *root, const char *rel)
{
	static char buf[4096];
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	buf[0] = '\0';
	FILE *f = fopen(p, "r");
	if (!f)
		return buf;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static int exists(const char *root, const char *rel)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	return access(p, F_OK) == 0;
}

static void rm_rf(const char *d)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
	assert_int_equal(system(cmd), 0);
}

/* The fake's folder of an execution loses its control files, as a real
 * cgroup's rmdir does not need to remove them. */
static void clear_files(const char *root, const char *rel)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "find '%s/%s' -maxdepth 1 -type f -delete", root, rel);
	assert_int_equal(system(cmd), 0);
}

static void test_share(void **state)
{
	(void)state;
	/* 24576 (three quarters of 32768) less an eighth kept for starts,
	 * halved for the PIDs refused forks hold for a moment */
	assert_int_equal(local_cg_default_max_pids(32768), 24576);
	assert_int_equal(local_cg_share(24576, 1), LOCAL_CG_MAX_PIDS);
	assert_int_equal(local_cg_share(24576, 8), (24576 - 3072) / 2 / 8);
	assert_int_equal(local_cg_share(1000, 4), (1000 - 128) / 2 / 4);
	assert_int_equal(local_cg_share(1000, 5), (1000 - 128) / 2 / 5);
	/* more executions than the pool fits: each keeps enough to start */
	assert_int_equal(local_cg_share(1000, 100), LOCAL_CG_MIN_PIDS);
	assert_int_equal(local_cg_share(0, 3), LOCAL_CG_MAX_PIDS);
	/* the shares of the live ones and the headroom never pass the ceiling
	 * while the pool holds them */
	for (unsigned n = 1; n <= 6; n++)
		assert_true(2 * local_cg_share(1000, n) * n + 128 <= 1000);
}

static void test_v2(void **state)
{
	(void)state;
	char *fs = fake_fs();
	put(fs, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	mk(fs, "svc");
	put(fs, "svc/cgroup.subtree_control", "");
	put(fs, "svc/cgroup.procs", "");
	struct local_cg_conf c = { fs, "0::/svc\n", "codepod-1-2", 1000 };
	struct local_cg_root r;
	struct cp_err err = { 0 };
	assert_int_equal(local_cg_root_init(&r, &c, &err), 0);
	assert_int_equal(r.kind, LOCAL_CG_V2);
	assert_string_equal(got(fs, "svc/cgroup.subtree_control"), "+memory +pids +cpu");
	assert_string_equal(got(fs, "svc/codepod-1-2/cgroup.subtree_control"), "+memory +pids +cpu");
	assert_string_equal(got(fs, "svc/codepod-1-2/pids.max"), "1000");
	/* optional files are set when the kernel has them: the fake says so
	 * by having them in the execution's folder beforehand */
	mk(fs, "svc/codepod-1-2/e1");
	put(fs, "svc/codepod-1-2/e1/memory.swap.max", "max");
	put(fs, "svc/codepod-1-2/e1/memory.oom.group", "0");
	struct local_cg a, b;
	assert_int_equal(local_cg_make(&r, &a, "e1", 512, &err), 0);
	assert_string_equal(got(fs, "svc/codepod-1-2/e1/memory.max"), "603979776"); /* 576 MiB */
	assert_string_equal(got(fs, "svc/codepod-1-2/e1/memory.swap.max"), "0");
	assert_string_equal(got(fs, "svc/codepod-1-2/e1/memory.oom.group"), "1");
	/* a start weighs more until its runner is ready */
	assert_string_equal(got(fs, "svc/codepod-1-2/e1/cpu.weight"), "800");
	local_cg_started(&r, &a);
	assert_string_equal(got(fs, "svc/codepod-1-2/e1/cpu.weight"), "100");
	assert_string_equal(got(fs, "svc/codepod-1-2/e1/pids.max"), "436");
	assert_int_equal(a.oom_fd, -1); /* v2: the OOM group kills; no event needed */
	assert_int_equal(local_cg_make(&r, &b, "e2", 64, &err), 0);
	assert_false(exists(fs, "svc/codepod-1-2/e2/memory.swap.max"));
	/* a second live execution halves the first's share too */
	assert_string_equal(got(fs, "svc/codepod-1-2/e1/pids.max"), "218");
	assert_string_equal(got(fs, "svc/codepod-1-2/e2/pids.max"), "218");
	const char *procs[LOCAL_CG_NCTL];
	assert_int_equal(local_cg_procs(&a, procs, LOCAL_CG_NCTL), 1); /* v2: one folder */
	assert_non_null(strstr(procs[0], "/svc/codepod-1-2/e1/cgroup.procs"));
	assert_int_equal(local_cg_oom_kills(&r, &a), 0);
	put(fs, "svc/codepod-1-2/e1/memory.events", "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n"
	                                           "oom_group_kill 1\n");
	assert_int_equal(local_cg_oom_kills(&r, &a), 1);
	/* busy (the fake's files stand for processes) until emptied */
	assert_int_equal(local_cg_remove(&r, &a), -1);
	clear_files(fs, "svc/codepod-1-2/e1");
	assert_int_equal(local_cg_remove(&r, &a), 0);
	assert_false(exists(fs, "svc/codepod-1-2/e1"));
	assert_string_equal(got(fs, "svc/codepod-1-2/e2/pids.max"), "436");
	assert_int_equal(r.nlive, 1);
	clear_files(fs, "svc/codepod-1-2/e2");
	assert_int_equal(local_cg_remove(&r, &b), 0);
	clear_files(fs, "svc/codepod-1-2");
	local_cg_root_free(&r);
	assert_false(exists(fs, "svc/codepod-1-2"));
	rm_rf(fs);
	free(fs);
}

static void test_v2_without_memory_is_v1_or_none(void **state)
{
	(void)state;
	char *fs = fake_fs();
	/* this machine's shape: an empty cgroup2 beside v1's hierarchies */
	mk(fs, "unified");
	put(fs, "unified/cgroup.controllers", "hugetlb\n");
	struct local_cg_conf c = { fs, "4:memory:/\n0::/\n", "codepod-1-2", 0 };
	struct local_cg_root r;
	struct cp_err err = { 0 };
	/* no v1 memory hierarchy mounted either: refused, saying so */
	assert_int_equal(local_cg_root_init(&r, &c, &err), CP_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "memory"));
	rm_rf(fs);
	free(fs);
}

static void test_v2_busy_own_cgroup_refused(void **state)
{
	(void)state;
	char *fs = fake_fs();
	put(fs, "cgroup.controllers", "memory pids\n");
	mk(fs, "svc");
	/* a folder that cannot take subtree_control (here: it is a folder,
	 * as the kernel's EBUSY for a cgroup holding processes) */
	mk(fs, "svc/cgroup.subtree_control");
	struct local_cg_conf c = { fs, "0::/svc\n", "codepod-1-2", 0 };
	struct local_cg_root r;
	struct cp_err err = { 0 };
	assert_int_equal(local_cg_root_init(&r, &c, &err), CP_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "cgroup v2"));
	assert_false(exists(fs, "svc/codepod-1-2"));
	rm_rf(fs);
	free(fs);
}

static void test_v1(void **state)
{
	(void)state;
	char *fs = fake_fs();
	/* memory and pids under their names, cpu mounted with cpuacct */
	mk(fs, "memory");
	mk(fs, "memory/a");
	put(fs, "memory/memory.limit_in_bytes", "");
	mk(fs, "pids");
	mk(fs, "cpu,cpuacct");
	/* a folder of a codepod of this PID namespace that is gone (pid 1 is
	 * never ours to look at: a pid that cannot exist is used) */
	struct stat st;
	assert_int_equal(stat("/proc/self/ns/pid", &st), 0);
	char stale[128];
	snprintf(stale, sizeof stale, "memory/a/codepod-%lu-999999999", (unsigned long)st.st_ino);
	mk(fs, stale);
	char stale_e[160];
	snprintf(stale_e, sizeof stale_e, "%s/e7", stale);
	mk(fs, stale_e);
	char live[128];
	snprintf(live, sizeof live, "memory/a/codepod-%lu-%ld", (unsigned long)st.st_ino, (long)getpid());
	mk(fs, live);
	const char *self = "9:name=systemd:/\n8:pids:/\n4:memory:/a\n2:cpu,cpuacct:/b\n0::/\n";
	mk(fs, "cpu,cpuacct/b");
	struct local_cg_conf c = { fs, self, "codepod-1-2", 1000 };
	struct local_cg_root r;
	struct cp_err err = { 0 };
	/* the fake's folders have no cgroup.procs until the test gives them one */
	assert_int_equal(local_cg_root_init(&r, &c, &err), CP_E_UNSUPPORTED);
	assert_false(exists(fs, stale)); /* swept on the way */
	assert_true(exists(fs, live));   /* a live codepod's is left alone */
	mk(fs, "memory/a/codepod-1-2");
	put(fs, "memory/a/codepod-1-2/cgroup.procs", "");
	put(fs, "memory/a/codepod-1-2/memory.memsw.limit_in_bytes", "");
	mk(fs, "pids/codepod-1-2");
	put(fs, "pids/codepod-1-2/cgroup.procs", "");
	mk(fs, "cpu,cpuacct/b/codepod-1-2");
	put(fs, "cpu,cpuacct/b/codepod-1-2/cgroup.procs", "");
	assert_int_equal(local_cg_root_init(&r, &c, &err), 0);
	assert_int_equal(r.kind, LOCAL_CG_V1);
	assert_true(r.have_memsw);
	assert_string_equal(got(fs, "pids/codepod-1-2/pids.max"), "1000");
	mk(fs, "memory/a/codepod-1-2/e1");
	put(fs, "memory/a/codepod-1-2/e1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n"
	                                                     "oom_kill 0\n");
	struct local_cg a;
	assert_int_equal(local_cg_make(&r, &a, "e1", 100, &err), 0);
	assert_string_equal(got(fs, "memory/a/codepod-1-2/e1/memory.limit_in_bytes"), "171966464");
	assert_string_equal(got(fs, "memory/a/codepod-1-2/e1/memory.memsw.limit_in_bytes"), "171966464");
	assert_string_equal(got(fs, "pids/codepod-1-2/e1/pids.max"), "436");
	assert_string_equal(got(fs, "cpu,cpuacct/b/codepod-1-2/e1/cpu.shares"), "8192");
	local_cg_started(&r, &a);
	assert_string_equal(got(fs, "cpu,cpuacct/b/codepod-1-2/e1/cpu.shares"), "1024");
	const char *procs[LOCAL_CG_NCTL];
	assert_int_equal(local_cg_procs(&a, procs, LOCAL_CG_NCTL), 3); /* v1: one per hierarchy */
	assert_non_null(strstr(procs[0], "/memory/a/codepod-1-2/e1/cgroup.procs"));
	assert_non_null(strstr(procs[1], "/pids/codepod-1-2/e1/cgroup.procs"));
	assert_non_null(strstr(procs[2], "/cpu,cpuacct/b/codepod-1-2/e1/cgroup.procs"));
	assert_int_equal(local_cg_oom_kills(&r, &a), 0);
	put(fs, "memory/a/codepod-1-2/e1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n"
	                                                     "oom_kill 2\n");
	assert_int_equal(local_cg_oom_kills(&r, &a), 2);
	clear_files(fs, "memory/a/codepod-1-2/e1");
	clear_files(fs, "pids/codepod-1-2/e1");
	clear_files(fs, "cpu,cpuacct/b/codepod-1-2/e1");
	assert_int_equal(local_cg_remove(&r, &a), 0);
	assert_false(exists(fs, "pids/codepod-1-2/e1"));
	local_cg_root_free(&r);
	rm_rf(fs);
	free(fs);
}


static void on_usr1(int sig)
{
	(void)sig;
}

/* The real kernel, where the fakes above cannot go: on cgroup v1 a write
 * of memory.limit_in_bytes gives EINTR when a signal comes during it (as
 * codepod's runners' SIGCHLD do), even for a new group. Under a flood of
 * signals every execution's group is still made. Root with a v1 memory
 * hierarchy only (elsewhere skipped: v2's memory.max ends its reclaim on
 * a signal without an error). */
static void test_real_v1_limits_under_signals(void **state)
{
	(void)state;
	if (geteuid() != 0 || access("/sys/fs/cgroup/memory/memory.limit_in_bytes", W_OK) != 0 ||
	    access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
		skip();
		return;
	}
	char self[8192];
	FILE *f = fopen("/proc/self/cgroup", "r");
	assert_non_null(f);
	size_t n = fread(self, 1, sizeof self - 1, f);
	fclose(f);
	self[n] = '\0';
	char name[64];
	snprintf(name, sizeof name, "codepod-cgtest-%d", (int)getpid());
	struct local_cg_conf c = { "/sys/fs/cgroup", self, name, 0 };
	struct local_cg_root r;
	struct cp_err err = { 0 };
	assert_int_equal(local_cg_root_init(&r, &c, &err), 0);
	assert_int_equal(r.kind, LOCAL_CG_V1);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1; /* no SA_RESTART: as a write to cgroupfs sees it */
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	pid_t me = getpid();
	pid_t flood = fork();
	assert_true(flood >= 0);
	if (flood == 0) {
		for (;;)
			kill(me, SIGUSR1);
	}
	int made = 0;
	for (int i = 0; i < 1000; i++) {
		struct local_cg cg;
		char e[32];
		snprintf(e, sizeof e, "e%d", i);
		if (local_cg_make(&r, &cg, e, 64, &err) == 0) {
			made++;
			assert_int_equal(local_cg_remove(&r, &cg), 0);
		}
	}
	kill(flood, SIGKILL);
	waitpid(flood, NULL, 0);
	signal(SIGUSR1, SIG_DFL);
	local_cg_root_free(&r);
	assert_int_equal(made, 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_v2),
		cmocka_unit_test(test_v2_without_memory_is_v1_or_none),
		cmocka_unit_test(test_v2_busy_own_cgroup_refused),
		cmocka_unit_test(test_v1),
		cmocka_unit_test(test_real_v1_limits_under_signals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
