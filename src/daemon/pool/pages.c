/* SPDX-License-Identifier: MIT */
/* pages.c - see pages.h. */
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "pages.h"

#define SYSFS_HUGEPAGES "/sys/kernel/mm/hugepages"

uint64_t pages_available(uint64_t page_size)
{
	char path[128];
	uint64_t v[2] = { 0, 0 };
	const char *files[2] = { "free_hugepages", "resv_hugepages" };

	for (int i = 0; i < 2; i++) {
		FILE *f;

		snprintf(path, sizeof(path), SYSFS_HUGEPAGES "/hugepages-%" PRIu64 "kB/%s", page_size / 1024,
			 files[i]);
		f = fopen(path, "re");
		if (!f)
			return 0;
		if (fscanf(f, "%" SCNu64, &v[i]) != 1)
			v[i] = 0;
		fclose(f);
	}
	/* reserved pages are promised to existing mappings, so they are not ours to take */
	return v[0] > v[1] ? v[0] - v[1] : 0;
}

bool pages_supported(uint64_t page_size)
{
	char path[96];
	struct stat st;

	snprintf(path, sizeof(path), SYSFS_HUGEPAGES "/hugepages-%" PRIu64 "kB", page_size / 1024);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

unsigned pages_candidates(const struct config_class *c, uint64_t ret[PAGES_HUGE_SIZES])
{
	unsigned n = 0;

	if (c->page_size != CONFIG_PAGE_SIZE_AUTO) {
		ret[0] = c->page_size;
		return 1;
	}
	if (c->size % PAGES_1G == 0 && pages_supported(PAGES_1G))
		ret[n++] = PAGES_1G;
	ret[n++] = PAGES_2M;
	return n;
}

unsigned pages_needed(const struct config *cfg, struct pages_need ret[PAGES_HUGE_SIZES])
{
	uint64_t by_size[PAGES_HUGE_SIZES] = { 0, 0 }; /* 2M, 1G */
	unsigned n = 0;

	if (cfg->hugepages == HUGEPAGES_OFF)
		return 0;
	for (unsigned i = 0; i < cfg->nclasses; i++) {
		const struct config_class *c = &cfg->classes[i];
		uint64_t cand[PAGES_HUGE_SIZES];

		pages_candidates(c, cand);
		by_size[cand[0] == PAGES_1G] += c->size / cand[0] * c->count;
	}
	for (unsigned k = 0; k < PAGES_HUGE_SIZES; k++)
		if (by_size[k])
			ret[n++] = (struct pages_need){ .page_size = k ? PAGES_1G : PAGES_2M, .count = by_size[k] };
	return n;
}
