/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: hugepoolctl's HTTP request parser (src/cli/http.c) on arbitrary bytes from a
 * scraper, fed as http_server.c feeds it: in reads of any size (the first byte of the input
 * picks them), each continuing the search for the head's end where the last one stopped. The
 * answer must be the one the whole input parsed at once gets, and one of the statuses the server
 * knows how to answer.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "http.h"

/* Parse data[0..size) in reads of step bytes (0: at once); *ret_used: the bytes read when it answered. */
static struct http_request parse_in_steps(const uint8_t *data, size_t size, size_t step, size_t *ret_used)
{
	static char buf[HTTP_REQUEST_MAX];
	struct http_request req = { .status = -1 };
	size_t n = 0, searched = 0;

	for (;;) {
		size_t k = step ? step : size;

		if (k > size - n)
			k = size - n;
		if (k > sizeof(buf) - n)
			k = sizeof(buf) - n;
		memcpy(buf + n, data + n, k);
		n += k;
		if (http_request_parse(buf, n, &searched, n == size, &req))
			break;
		if (n == size)
			abort(); /* eof and no answer */
	}
	*ret_used = n;
	return req;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_request whole, steps;
	size_t used_whole, used_steps;

	if (size < 2)
		return 0;
	whole = parse_in_steps(data + 1, size - 1, 0, &used_whole);
	steps = parse_in_steps(data + 1, size - 1, 1 + data[0] % 64, &used_steps);
	if (whole.status != 0 && whole.status != 400 && whole.status != 404 && whole.status != 405)
		abort();
	/* the same request found: the same answer (a head that ended within a read ends the same) */
	if (used_steps >= used_whole &&
	    (whole.status != steps.status || whole.head != steps.head || whole.openmetrics != steps.openmetrics))
		abort();
	return 0;
}
