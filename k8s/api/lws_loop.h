/*
 * lws_loop.h - the exec client's libwebsockets context for one API server:
 * the server URL split into host, port and path prefix, and TLS set up from
 * the kubeconfig. The context itself, joined to the project's libuv loop
 * as a foreign loop with the lws 4.1.6 work-arounds, is base/lws_uv.h's.
 *
 * TLS: the client SSL_CTX is built here with OpenSSL from the in-memory PEM
 * of struct k8s_config (every certificate of certificate-authority-data, the
 * client certificate chain and key) and handed to lws as
 * provided_client_ssl_ctx. The server name (the URL host, or tls-server-name)
 * is checked through the SSL_CTX's X509_VERIFY_PARAM (an IP address against
 * the IP SANs, as Go does), so lws's own per-connection hostname check is
 * switched off with LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK by the users of
 * k8s_lws_ssl_flags(). insecure-skip-tls-verify turns verification off.
 *
 * Loop context: called on the loop thread only. k8s_lws_new() is not called
 * from inside a libwebsockets callback; k8s_lws_free() may be.
 *
 * Ownership: k8s_lws_new() returns a new object released with
 * k8s_lws_free(). @cfg is borrowed for the call (what is needed is copied);
 * @protocols and @user are borrowed until k8s_lws_free()'s @done. The lws
 * context and the strings returned by the getters are borrowed from the
 * object. k8s_lws_free() completes on later loop turns: the loop's owner
 * keeps running the loop (uv_run) until then, and before uv_loop_close().
 */
#ifndef K8S_LWS_LOOP_H
#define K8S_LWS_LOOP_H

#include <libwebsockets.h>
#include <uv.h>

#include "base/err.h"
#include "k8s/api/kubeconfig.h"

struct k8s_lws;

/**
 * k8s_lws_new() - create an lws context on @loop for the server of @cfg.
 * @loop: the project's libuv loop (borrowed; must outlive the object).
 * @cfg: server URL and TLS material (borrowed for the call).
 * @protocols: the lws protocol table, terminated by a zeroed entry; lws
 *             calls protocols[0] with LWS_CALLBACK_* for the connections.
 * @user: returned by lws_context_user() of the context.
 * @out: receives the new object.
 *
 * Returns 0, CP_E_INVALID_REQUEST (a server URL that is not http(s)://
 * host[:port], PEM that does not load), CP_E_UNSUPPORTED (lws could not be
 * joined to the loop: the uv event plugin is missing), CP_E_NOMEM.
 */
int k8s_lws_new(uv_loop_t *loop, const struct k8s_config *cfg,
                const struct lws_protocols *protocols, void *user,
                struct k8s_lws **out, struct cp_err *err);

struct lws_context *k8s_lws_context(const struct k8s_lws *l);

/* Host (without brackets), port and whether TLS is used, from the URL. */
const char *k8s_lws_host(const struct k8s_lws *l);
int k8s_lws_port(const struct k8s_lws *l);
/* Path prefix of the server URL ("" or "/k8s/clusters/c-1", no trailing '/'). */
const char *k8s_lws_base_path(const struct k8s_lws *l);
/* LCCSCF_* flags for lws_client_connect_info.ssl_connection. */
int k8s_lws_ssl_flags(const struct k8s_lws *l);

/**
 * k8s_lws_free() - destroy the lws context and free the object; NULL is
 * ignored. Asynchronous (cp_lws_destroy()): every connection closes from
 * the next loop turn on (their WSI_DESTROY callbacks run then, so
 * @protocols' user data must stay valid until @done), and @done(@ud) runs
 * on a later turn once lws has freed the context and the object is gone.
 */
void k8s_lws_free(struct k8s_lws *l, void (*done)(void *ud), void *ud);

#endif
