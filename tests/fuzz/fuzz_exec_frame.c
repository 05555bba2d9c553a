/* fuzz_exec_frame.c - the exec channel codec on arbitrary bytes.
 * The whole input is parsed as one message (v4 and v5); then it is read as
 * fragments, each [flags][len][bytes...] (flags bit 0 first, bit 1 final,
 * bit 2 picks v4 for the reassembler), fed to a reassembler with a small
 * max_msg so the limit is reached too. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "k8s/api/exec_frame.h"
#include "k8s/api/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct k8s_exec_msg m;
	k8s_exec_frame_parse(data, size, K8S_EXEC_V4, &m, NULL);
	if (k8s_exec_frame_parse(data, size, K8S_EXEC_V5, &m, NULL) == 0 &&
	    m.channel == K8S_EXEC_ERROR) {
		int code;
		k8s_status_exec(m.data, m.len, &code, NULL, NULL);
	}
	if (size == 0)
		return 0;
	enum k8s_exec_proto proto = (data[0] & 4) ? K8S_EXEC_V4 : K8S_EXEC_V5;
	struct k8s_exec_reasm *r = k8s_exec_reasm_new(proto, 512);
	if (!r)
		return 0;
	size_t off = 0;
	while (off + 2 <= size) {
		unsigned flags = data[off];
		size_t len = data[off + 1];
		off += 2;
		if (len > size - off)
			len = size - off;
		if (k8s_exec_reasm_feed(r, data + off, len, flags & 1, (flags >> 1) & 1, &m, NULL) == 1 &&
		    m.len > 0) {
			volatile unsigned char sink = m.data[0];
			sink ^= m.data[m.len - 1];
			(void)sink;
		}
		off += len;
	}
	k8s_exec_reasm_free(r);
	return 0;
}
