/* SPDX-License-Identifier: MIT */
/*
 * journal_path.c - see journal_path.h: the names of a batch's paths to the disk, and the
 * controller that picks inline or queued for `backend = auto` from durable records per second
 * measured in interleaved windows of each. Pure functions of what the caller passes: no clock,
 * no I/O, no lock, no log (the flusher logs what it decides).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "journal_path.h"
#include "size.h"
#include "util.h"

#define JPATH_LOSS 0.10 /* the other path this much slower: compare half as often */
#define JPATH_BIG_LOSS 0.25 /* this much: a quarter as often */

static const char *const path_names[JPATH_COUNT] = {
	[JPATH_NONE] = "none",
	[JPATH_INLINE_SPIN] = "inline-spin",
	[JPATH_INLINE] = "inline",
	[JPATH_QUEUED] = "queued",
};

const char *jpath_name(enum jpath p)
{
	return (unsigned)p < ARRAY_SIZE(path_names) ? path_names[p] : "unknown";
}

static enum jpath other(enum jpath p)
{
	return p == JPATH_INLINE ? JPATH_QUEUED : JPATH_INLINE;
}

/* A comparison's windows: other, chosen, chosen, other, ... (true: the other path's). */
static bool step_is_other(unsigned step)
{
	return ((step + 1) / 2) % 2 == 0;
}

void jpath_init(struct jpath_ctl *c, enum jpath first)
{
	*c = (struct jpath_ctl){
		.window_ns = JPATH_WINDOW_NS,
		.settle_ns = JPATH_SETTLE_NS,
		.steps = JPATH_STEPS,
		.exploit_ns = JPATH_EXPLOIT_NS,
		.idle_ns = JPATH_IDLE_NS,
		.window_batches = JPATH_WINDOW_BATCHES,
		.spacing_max = JPATH_SPACING_MAX,
		.margin = JPATH_MARGIN,
		.chosen = first == JPATH_QUEUED ? JPATH_QUEUED : JPATH_INLINE,
		.phase = JPATH_EXPLOIT, /* ends at the first publish: the first comparison begins */
		.spacing = 1,
		.w_path = JPATH_NONE,
	};
}

enum jpath jpath_next(const struct jpath_ctl *c)
{
	if (c->phase == JPATH_COMPARE && step_is_other(c->step))
		return other(c->chosen);
	return c->chosen;
}

/* Begin a comparison under the load of `writers` open writers (another: the average starts over). */
static void compare_begin(struct jpath_ctl *c, unsigned writers)
{
	if (writers != c->writers)
		c->scored = 0;
	c->phase = JPATH_COMPARE;
	c->step = 0;
	c->writers = writers;
	c->w_path = JPATH_NONE;
	memset(c->acc_records, 0, sizeof(c->acc_records));
	memset(c->acc_ns, 0, sizeof(c->acc_ns));
}

/* Twice or half the writers open since the comparison began. */
static bool load_changed(unsigned base, unsigned now)
{
	return base && (now >= 2 * (uint64_t)base || 2 * (uint64_t)now <= base);
}

static void window_open(struct jpath_ctl *c, enum jpath path, uint64_t now_ns)
{
	c->w_path = path;
	c->w_first_ns = c->w_last_ns = now_ns;
	c->w_records = 0;
	c->w_batches = 0;
}

static double rate_of(const struct jpath_ctl *c, enum jpath p)
{
	return c->acc_ns[p] ? (double)c->acc_records[p] * 1e9 / (double)c->acc_ns[p] : 0;
}

/* The end of a comparison: average it in, keep chosen or change, and when to compare again. */
static enum jpath_event decide(struct jpath_ctl *c, uint64_t now_ns)
{
	double ri = rate_of(c, JPATH_INLINE), rq = rate_of(c, JPATH_QUEUED), lead;
	bool changed = false;

	c->rate[JPATH_INLINE] = ri;
	c->rate[JPATH_QUEUED] = rq;
	c->decisions++;
	if (ri > 0 && rq > 0) {
		c->score = c->scored ? (1 - JPATH_SCORE_WEIGHT) * c->score + JPATH_SCORE_WEIGHT * (ri / rq) : ri / rq;
		c->scored++;
	}
	/* how many times faster the chosen path is, by the average (below 1: slower), and by
	 * this comparison alone: the less of the two sets the spacing, so that a comparison the
	 * other path won is followed by another soon, even while the average keeps the chosen */
	lead = !c->scored ? 1 : c->chosen == JPATH_INLINE ? c->score : 1 / c->score;
	if (lead * (1 + c->margin) < 1) {
		c->chosen = other(c->chosen);
		c->changes++;
		c->spacing = 1;
		changed = true;
	} else {
		if (ri > 0 && rq > 0)
			lead = MIN(lead, c->chosen == JPATH_INLINE ? ri / rq : rq / ri);
		if (lead * (1 - JPATH_BIG_LOSS) > 1)
			c->spacing = MIN(4 * c->spacing, c->spacing_max);
		else if (lead * (1 - JPATH_LOSS) > 1)
			c->spacing = MIN(2 * c->spacing, c->spacing_max);
		else
			c->spacing = 1;
	}
	c->phase = JPATH_EXPLOIT;
	c->exploit_end_ns = now_ns + c->spacing * c->exploit_ns;
	c->w_path = JPATH_NONE;
	return c->decisions == 1 ? JPATH_FIRST : changed ? JPATH_CHANGED : JPATH_SAME;
}

/* The test modes: no measuring. */
static void published_test(struct jpath_ctl *c, enum jpath path)
{
	if (c->flip && path == c->chosen && ++c->w_batches >= c->flip) {
		c->chosen = other(c->chosen);
		c->changes++;
		c->w_batches = 0;
	}
}

enum jpath_event jpath_published(struct jpath_ctl *c, enum jpath path, uint64_t records, unsigned writers,
				 uint64_t now_ns)
{
	if (path == JPATH_INLINE_SPIN) {
		/* a few writers for a moment: the window measured neither path alone */
		c->w_path = JPATH_NONE;
		return JPATH_SAME;
	}
	if (jpath_forced(c)) {
		published_test(c, path);
		return JPATH_SAME;
	}
	if (c->phase == JPATH_EXPLOIT) {
		if (now_ns >= c->exploit_end_ns || load_changed(c->writers, writers))
			compare_begin(c, writers);
		return JPATH_SAME;
	}
	if (load_changed(c->writers, writers)) {
		compare_begin(c, writers);
		return JPATH_SAME;
	}
	if (path != jpath_next(c))
		return JPATH_SAME; /* in flight from before the path changed: belongs to no window */
	if (c->w_path != JPATH_NONE && now_ns - c->w_last_ns > c->idle_ns)
		c->w_path = JPATH_NONE; /* the journal was idle: not a measure of the path */
	if (c->w_path == JPATH_NONE) {
		/* the window starts at its first publish: the time to it (a drain of the other
		 * path's batches, a wake-up after idling) is not the path's, nor are its records;
		 * nor what comes while the threads settle into the new path's rhythm */
		window_open(c, path, now_ns);
		c->w_settle_ns = now_ns + c->settle_ns;
		return JPATH_SAME;
	}
	if (now_ns < c->w_settle_ns) {
		window_open(c, path, now_ns);
		return JPATH_SAME;
	}
	c->w_records += records;
	c->w_batches++;
	c->w_last_ns = now_ns;
	if (c->w_batches < c->window_batches || now_ns - c->w_first_ns < c->window_ns)
		return JPATH_SAME;
	c->acc_records[path] += c->w_records;
	c->acc_ns[path] += now_ns - c->w_first_ns;
	if (++c->step == c->steps)
		return decide(c, now_ns);
	/* the next window goes on from here if it measures the same path */
	if (jpath_next(c) == path)
		window_open(c, path, now_ns);
	else
		c->w_path = JPATH_NONE;
	return JPATH_SAME;
}

int jpath_set_test(struct jpath_ctl *c, const char *spec, const char **ret_rest)
{
	bool pin = !strncmp(spec, "inline", 6) || !strncmp(spec, "queued", 6);
	const char *end = spec + 6;
	uint64_t n = 0;

	if (!pin && (strncmp(spec, "flip:", 5) || decimal_prefix(spec + 5, &end, &n) < 0 || n == 0 || n > 1000000))
		return -EINVAL;
	if (*end != '\0' && *end != ',')
		return -EINVAL;
	if (pin) {
		c->chosen = spec[0] == 'i' ? JPATH_INLINE : JPATH_QUEUED;
		c->pinned = true;
	} else {
		c->flip = (unsigned)n;
		c->w_batches = 0;
	}
	*ret_rest = *end ? end + 1 : end;
	return 0;
}

/* "inline on the flusher's thread" or "queued through io_uring". */
static const char *path_words(enum jpath p, const char *queue, char *buf, size_t len)
{
	if (p == JPATH_INLINE)
		snprintf(buf, len, "inline on the flusher's thread");
	else
		snprintf(buf, len, "queued through %s", queue);
	return buf;
}

const char *jpath_describe(const struct jpath_ctl *c, const char *queue, char *buf, size_t len)
{
	char mine[64], theirs[64];

	path_words(c->chosen, queue, mine, sizeof(mine));
	path_words(other(c->chosen), queue, theirs, sizeof(theirs));
	if (jpath_forced(c))
		snprintf(buf, len, "%s, %s for a test (HUGEPOOLD_FAULT_INJECT), not measured", jpath_name(c->chosen),
			 c->pinned ? "pinned" : "alternating");
	else if (!c->decisions)
		snprintf(buf, len, "measuring which is faster: %s or %s", mine, theirs);
	else
		snprintf(buf, len,
			 "%s: measured %.0f records/s against %.0f %s (changed %" PRIu64 " times in %" PRIu64
			 " comparison%s; the next in %.1f s at the latest)",
			 mine, c->rate[c->chosen], c->rate[other(c->chosen)], theirs, c->changes, c->decisions,
			 c->decisions == 1 ? "" : "s", (double)(c->spacing * c->exploit_ns) / 1e9);
	return buf;
}
