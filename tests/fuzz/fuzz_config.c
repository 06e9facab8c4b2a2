/* SPDX-License-Identifier: MIT */
/* Fuzz target: the hugepoold.conf parser on arbitrary text. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config cfg;
	char err[512];
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (config_parse("fuzz.conf", text, &cfg, err, sizeof(err)) == 0) {
		/* an accepted configuration keeps the promises config.h makes */
		if ((cfg.nclasses == 0 && cfg.njournals == 0) || cfg.nclasses > CONFIG_CLASSES_MAX ||
		    cfg.njournals > CONFIG_JOURNALS_MAX)
			abort();
		for (unsigned i = 0; i < cfg.njournals; i++)
			if (cfg.journals[i].directory[0] != '/' || cfg.journals[i].segments < 2 ||
			    cfg.journals[i].max_batch_bytes > cfg.journals[i].segment_size - 4096 ||
			    (cfg.journals[i].ring_size & (cfg.journals[i].ring_size - 1)))
				abort();
		for (unsigned i = 0; i < cfg.nclasses; i++)
			if (cfg.classes[i].size == 0 || cfg.classes[i].count == 0 || cfg.classes[i].size % 4096)
				abort();
	} else if (strncmp(err, "fuzz.conf", 9) != 0) {
		abort(); /* every error names the file */
	}
	free(text);
	return 0;
}
