/* SPDX-License-Identifier: MIT */
/* Fuzz target: what the daemon does with a client's bytes before any handler sees them. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static union proto_request req;
	struct proto_hdr h;
	const char *why;

	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	if (proto_check_header(&h, true, &why) < 0 || h.len > size - sizeof(h))
		return 0;
	/* exactly as the server does: the payload in its own allocation of h.len bytes */
	void *payload = malloc(h.len ? h.len : 1);

	if (!payload)
		return 0;
	memcpy(payload, data + sizeof(h), h.len);
	if (proto_parse_request(&h, payload, &req, &why) == 0 && h.type == PROTO_RELEASE &&
	    (req.release.hdr.n == 0 || req.release.hdr.n > PROTO_RELEASE_MAX))
		abort(); /* a parsed release always has a count in range */
	free(payload);
	return 0;
}
