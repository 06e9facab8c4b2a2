/* SPDX-License-Identifier: MIT */
/* Fuzz target: libhugepool's decoder of a status reply, on arbitrary bytes from a "daemon". */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hp_status *st = NULL;
	void *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (status_decode(copy, size, &st) == 0) {
		for (uint32_t i = 0; i < st->nleases; i++)
			if (st->leases[i]->class_index >= st->nclasses)
				abort();
		hp_status_free(st);
	}
	free(copy);
	return 0;
}
