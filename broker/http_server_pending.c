/*
 * http_server_pending.c - the connections that have not sent a complete
 * request head: accepted and silent, part-way through their headers, or
 * kept alive and waiting for their next request. There are at most
 * --max-pending-connections of them (a new one past that is closed at
 * once), and each is closed by lws after --header-timeout seconds; so
 * clients that never authenticate cannot hold the server's descriptors.
 *
 * A connection is known by its descriptor and the socket's inode: a
 * descriptor lws closed without a callback we saw, and reused since, is
 * not taken for the old connection (the sweep forgets such entries).
 */
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "broker/http_server_int.h"

static long inode_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) ? (long)st.st_ino : -1;
}

static void drop(struct broker_http *srv, size_t i)
{
	srv->waiting[i] = srv->waiting[--srv->nwaiting];
}

static size_t find(const struct broker_http *srv, int fd)
{
	for (size_t i = 0; i < srv->nwaiting; i++)
		if (srv->waiting[i].fd == fd)
			return i;
	return srv->nwaiting;
}

int broker_http_pending_open(struct broker_http *srv, int fd)
{
	size_t i = find(srv, fd);
	if (i < srv->nwaiting)
		drop(srv, i); /* the descriptor of a connection closed unseen */
	if (srv->nwaiting >= srv->cfg.max_pending)
		broker_http_pending_sweep(srv);
	if (srv->nwaiting >= srv->cfg.max_pending) {
		broker_http_metrics_count(srv->metrics, "too_many_pending");
		return -1;
	}
	srv->waiting[srv->nwaiting].fd = fd;
	srv->waiting[srv->nwaiting].ino = inode_of(fd);
	srv->nwaiting++;
	return 0;
}

void broker_http_pending_again(struct broker_http *srv, int fd)
{
	if (find(srv, fd) == srv->nwaiting && srv->nwaiting < srv->cfg.max_pending) {
		srv->waiting[srv->nwaiting].fd = fd;
		srv->waiting[srv->nwaiting].ino = inode_of(fd);
		srv->nwaiting++;
	}
}

void broker_http_pending_done(struct broker_http *srv, int fd)
{
	size_t i = find(srv, fd);
	if (i < srv->nwaiting)
		drop(srv, i);
}

void broker_http_pending_sweep(struct broker_http *srv)
{
	for (size_t i = 0; i < srv->nwaiting;) {
		if (inode_of(srv->waiting[i].fd) != srv->waiting[i].ino)
			drop(srv, i);
		else
			i++;
	}
}
