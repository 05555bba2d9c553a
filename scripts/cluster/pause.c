/* The pod sandbox ("pause") container of the test cluster (scripts/cluster.sh).
 * The kubelet wants an image for each pod's sandbox, normally pulled from
 * registry.k8s.io/pause; there is no registry to pull from here, so
 * scripts/cluster/images.sh builds this as a static binary and imports it as
 * localhost/pause:codepod. It does what the upstream one does: holds the pod's
 * namespaces open, reaps the zombies of a shared PID namespace, exits 0 when
 * stopped. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void)
{
	struct sigaction sa = { .sa_handler = stop };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
}
