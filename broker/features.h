/*
 * features.h - what a client may ask this server to do, for discovery: the
 * session protocol's version, codepod's release and the features a server
 * has, as the hello message and GET /v1/info answer them
 * (broker/SESSION.md, "Discovery"). The features are one table in
 * features.c: a feature added to the server is one line there.
 *
 * Context: any; no state.
 */
#ifndef BROKER_FEATURES_H
#define BROKER_FEATURES_H

#include <jansson.h>

/* The session protocol this server speaks (broker/SESSION.md's title). */
#define BROKER_PROTOCOL_VERSION "1.1"

/* How the server was started: a feature may need one of them. */
enum broker_served {
	BROKER_SERVED_STDIO = 1,  /* serve --stdio: one session, no HTTP */
	BROKER_SERVED_LISTEN = 2, /* serve --listen: WebSocket sessions and the HTTP API */
};

/* The @i-th feature's name, any server's, in the table's order; NULL past
 * the last (for tests). */
const char *broker_feature_name(size_t i);

/*
 * broker_info() - a new object {"protocol","version","features":[names]}
 * with the features a server started as @served has, in the table's order.
 * Return: the caller's reference, or NULL when out of memory.
 */
json_t *broker_info(enum broker_served served);

#endif
