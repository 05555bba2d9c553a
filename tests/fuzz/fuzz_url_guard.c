/* fuzz_url_guard.c - the broker URL rules (broker/url_guard.h) on arbitrary
 * input: the first line is a --broker-allow value, the rest a broker URL
 * (both as a caller or an operator could give them). A list is taken or
 * refused with a message; a URL is admitted or refused with
 * CP_E_INVALID_REQUEST and a message, its host always a NUL-terminated
 * string within its buffer; when the URL is admitted and its host is an
 * IPv4 or IPv6 address, the same address checked as the connection's agrees.
 * Nothing may crash or leak. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/url_guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *nl = memchr(text, '\n', size);
	const char *url = nl ? nl + 1 : "";
	if (nl)
		*nl = '\0';
	const char *list[] = { text, NULL };
	struct broker_urlguard *g = NULL;
	struct cp_err err = { 0 };
	int rc = broker_urlguard_new(nl && *text ? list : NULL, &g, &err);
	if (rc) {
		if (g || err.code != rc || !err.msg[0])
			abort();
		free(text);
		return 0;
	}
	struct sockaddr_in self = { .sin_family = AF_INET, .sin_port = htons(8080) };
	self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (broker_urlguard_add_self(g, (struct sockaddr *)&self, &err))
		abort();
	char host[64];
	memset(host, 'x', sizeof host);
	rc = broker_urlguard_url(g, url, host, sizeof host, &err);
	if (rc && (rc != CP_E_INVALID_REQUEST || err.code != rc || !err.msg[0]))
		abort();
	if (!memchr(host, '\0', sizeof host))
		abort();
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(80) };
	if (rc == 0 && !strchr(url, '@') && inet_pton(AF_INET, host, &in.sin_addr) == 1 &&
	    strstr(url, "://") && !strchr(strstr(url, "://") + 3, ':') &&
	    strncmp(url, "http:", 5) == 0 && broker_urlguard_addr(g, host, (struct sockaddr *)&in, &err))
		abort(); /* admitted as a URL, refused as the address it names */
	broker_urlguard_free(g);
	free(text);
	return 0;
}
