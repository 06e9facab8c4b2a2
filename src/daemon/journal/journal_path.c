/* SPDX-License-Identifier: MIT */
/*
 * journal_path.c - see journal_path.h: the names of a batch's paths to the disk, and the
 * controller that picks inline, queued or queued-alt for `backend = auto` from durable records
 * per second measured in interleaved windows of the chosen path and each other in turn. Pure
 * functions of what the caller passes: no clock, no I/O, no lock, no log (the flusher logs what
 * it decides).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "journal_path.h"
#include "size.h"
#include "util.h"

#define JPATH_BIG_LOSS 0.25 /* the other path this much slower: compared a quarter as often */

static const char *const path_names[JPATH_COUNT] = {
	[JPATH_NONE] = "none",
	[JPATH_INLINE_SPIN] = "inline-spin",
	[JPATH_INLINE] = "inline",
	[JPATH_QUEUED] = "queued",
	[JPATH_QUEUED_ALT] = "queued-alt",
};

const char *jpath_name(enum jpath p)
{
	return (unsigned)p < ARRAY_SIZE(path_names) ? path_names[p] : "unknown";
}

static bool has(const struct jpath_ctl *c, enum jpath p)
{
	return c->arms & (1u << p);
}

#define FOREACH_ARM(c, p)                                                   \
	for (enum jpath p = JPATH_INLINE; p < JPATH_COUNT; p = (enum jpath)(p + 1)) \
		if (has(c, p))

/* A comparison's windows: challenger, chosen, chosen, challenger, ... (true: the challenger's). */
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
		.arms = 1u << JPATH_INLINE | 1u << JPATH_QUEUED,
		.load.chosen = first == JPATH_QUEUED ? JPATH_QUEUED : JPATH_INLINE,
		.phase = JPATH_EXPLOIT, /* ends at the first publish: the first comparison begins */
		.w_path = JPATH_NONE,
	};
	for (unsigned p = 0; p < JPATH_COUNT; p++)
		c->load.spacing[p] = 1;
}

void jpath_add_queue(struct jpath_ctl *c)
{
	c->arms |= 1u << JPATH_QUEUED_ALT;
}

/* The path measured in the comparison's window of step s. */
static enum jpath path_of_step(const struct jpath_ctl *c, unsigned s)
{
	return step_is_other(s) ? c->challenger : c->load.chosen;
}

enum jpath jpath_next(const struct jpath_ctl *c)
{
	return c->phase == JPATH_COMPARE ? path_of_step(c, c->step) : c->load.chosen;
}

/* Is a (records/s) more than JPATH_BIG_LOSS slower than b, both measured? */
static bool far_behind(double a, double b)
{
	return a > 0 && b > 0 && a < (1 - JPATH_BIG_LOSS) * b;
}

/* The path whose turn to be compared with chosen comes first (ties: in the order of enum jpath). */
static enum jpath next_challenger(const struct jpath_ctl *c)
{
	enum jpath best = JPATH_NONE;

	FOREACH_ARM(c, p)
		if (p != c->load.chosen && (best == JPATH_NONE || c->load.due_ns[p] < c->load.due_ns[best]))
			best = p;
	return best;
}

/* Twice or half of base (0: no base yet, nothing to change from). */
static bool twice_or_half(uint64_t base, uint64_t now)
{
	return base && (now >= 2 * base || 2 * now <= base);
}

/* The bytes per record of the latest batches, as the load is judged by (at least 1). */
static uint64_t size_now(const struct jpath_ctl *c)
{
	return c->size_avg >= 1 ? (uint64_t)c->size_avg : 1;
}

/* Is the load another than the one the averages were made under: twice or half the writers
 * open, or the bytes per record? */
static bool load_changed(const struct jpath_ctl *c, unsigned writers)
{
	return twice_or_half(c->load.writers, writers) || twice_or_half(c->load.rec_bytes, size_now(c));
}

/* How far apart two loads are (1: the same): the product of their ratios of writers and sizes. */
static double load_distance(unsigned wa, uint64_t sa, unsigned wb, uint64_t sb)
{
	double w = wa > wb ? (double)wa / wb : (double)wb / wa;
	double s = sa > sb ? (double)sa / (double)sb : (double)sb / (double)sa;

	return w * s;
}

/* Keep what is known of the load being left in its slot, for when it comes back. */
static void load_save(struct jpath_ctl *c)
{
	c->loads[c->slot] = c->load;
	c->loads[c->slot].left_ns = c->busy_ns;
}

/* A free slot for a new load, or the least recently left's (not the one just left). */
static unsigned slot_to_reuse(const struct jpath_ctl *c)
{
	unsigned k = JPATH_LOADS;

	for (unsigned i = 0; i < JPATH_LOADS; i++) {
		if (!c->loads[i].writers)
			return i;
		if (i != c->slot && (k == JPATH_LOADS || c->loads[i].left_ns < c->loads[k].left_ns))
			k = i;
	}
	return k;
}

/*
 * The load is now `writers` writers and size_now(c) bytes per record. If one left before is
 * within twice or half of both (the nearest), go on with what was known of it: its chosen path,
 * its averages, the rates last measured, each challenger's spacing and turn as far off in busy
 * time as it was. Else begin anew: every average over, every challenger's turn now and its
 * spacing 1, in a slot of its own (a free one, or the least recently left's); chosen is kept
 * until a comparison says otherwise. A spacing carried over from another load kept a path
 * that was slower there but faster here up to 6.4 s away after one unlucky comparison (the
 * bench: auto on libaio's queue for 98% of a cell of 64 writers x 1000 B with O_DIRECT, where
 * inline was 10% faster, after a cell of 100 B that had ended on the queue). True if that
 * changed chosen.
 */
static bool load_enter(struct jpath_ctl *c, unsigned writers)
{
	uint64_t size = size_now(c);
	unsigned best = JPATH_LOADS;
	bool changed = false;
	double best_d = 0;

	if (c->load.writers)
		load_save(c);
	for (unsigned i = 0; i < JPATH_LOADS; i++) {
		const struct jpath_load *l = &c->loads[i];
		double d;

		if (!l->writers || twice_or_half(l->writers, writers) || twice_or_half(l->rec_bytes, size))
			continue;
		d = load_distance(l->writers, l->rec_bytes, writers, size);
		if (best == JPATH_LOADS || d < best_d) {
			best = i;
			best_d = d;
		}
	}
	c->phase = JPATH_EXPLOIT;
	c->w_path = JPATH_NONE;
	if (best < JPATH_LOADS) {
		const struct jpath_load *l = &c->loads[best];

		changed = c->load.chosen != l->chosen;
		c->changes += changed;
		c->slot = best;
		c->load = *l;
		/* each turn as far off in busy time as it was when the load was left */
		FOREACH_ARM(c, p)
			c->load.due_ns[p] = c->busy_ns + (l->due_ns[p] > l->left_ns ? l->due_ns[p] - l->left_ns : 0);
		return changed;
	}
	c->slot = slot_to_reuse(c);
	c->load.writers = writers;
	c->load.rec_bytes = size;
	FOREACH_ARM(c, p) {
		c->load.scored[p] = 0;
		c->load.spacing[p] = 1;
		c->load.due_ns[p] = MIN(c->load.due_ns[p], c->busy_ns);
	}
	return false;
}

/* Begin a comparison of chosen with the challenger whose turn it is. */
static void compare_begin(struct jpath_ctl *c)
{
	c->phase = JPATH_COMPARE;
	c->challenger = next_challenger(c);
	c->step = 0;
	c->w_path = JPATH_NONE;
	memset(c->step_records, 0, sizeof(c->step_records));
	memset(c->step_ns, 0, sizeof(c->step_ns));
}

static void window_open(struct jpath_ctl *c, enum jpath path, uint64_t now_ns)
{
	c->w_path = path;
	c->w_first_ns = c->w_last_ns = now_ns;
	c->w_records = 0;
	c->w_batches = 0;
}

/* Path p's records/s over its windows of the comparison so far (0: none yet). */
static double rate_of(const struct jpath_ctl *c, enum jpath p)
{
	uint64_t records = 0, ns = 0;

	for (unsigned s = 0; s < c->step && s < JPATH_STEPS; s++)
		if (path_of_step(c, s) == p) {
			records += c->step_records[s];
			ns += c->step_ns[s];
		}
	return ns ? (double)records * 1e9 / (double)ns : 0;
}

/* The records/s of the comparison's window of step s. */
static double step_rate(const struct jpath_ctl *c, unsigned s)
{
	return (double)c->step_records[s] * 1e9 / (double)MAX(c->step_ns[s], 1);
}

/*
 * What the pairs of neighbouring windows of the comparison say, one window of each path in
 * every pair (challenger-chosen, chosen-challenger, ...), tens of milliseconds apart: in how
 * many chosen held (faster, or behind by less than the margin), in how many it was more than
 * JPATH_BIG_LOSS faster, and in how many the challenger was. The disk of a VM changes speed for
 * tens of milliseconds at a time, whatever path runs: the ratio of the summed rates moves by a
 * quarter and more when one window holds such a stretch, where only that window's pair does.
 */
struct pairs {
	unsigned n, chosen_holds, chosen_far, other_far;
};

static struct pairs pairs_of(const struct jpath_ctl *c)
{
	struct pairs r = { 0 };

	for (unsigned i = 0; i + 1 < c->step && i + 1 < JPATH_STEPS; i += 2) {
		bool first_other = step_is_other(i);
		double ch = step_rate(c, first_other ? i + 1 : i), x = step_rate(c, first_other ? i : i + 1);

		if (ch <= 0 || x <= 0)
			continue;
		r.n++;
		r.chosen_holds += ch * (1 + c->margin) >= x;
		r.chosen_far += far_behind(x, ch);
		r.other_far += far_behind(ch, x);
	}
	return r;
}

/* All but at most one in four of the pairs (both of two). */
static bool nearly_all(unsigned k, unsigned n)
{
	return n && 4 * k >= 3 * n;
}

/*
 * The challenger x takes over. What was averaged against the old chosen is turned into what it
 * says against x (old chosen / p over old chosen / x is x / p), so that one comparison more
 * does not turn it back; every other path is compared again after exploit_ns of busy time.
 */
static void change_to(struct jpath_ctl *c, enum jpath x)
{
	enum jpath old = c->load.chosen;
	double lx = c->load.lead[x];

	FOREACH_ARM(c, p) {
		if (p == x)
			continue;
		if (p == old) {
			c->load.lead[p] = 1 / lx;
			c->load.scored[p] = c->load.scored[x];
		} else if (c->load.scored[p]) {
			c->load.lead[p] /= lx;
		}
		c->load.spacing[p] = 1;
		c->load.due_ns[p] = c->busy_ns + c->exploit_ns;
	}
	c->load.lead[x] = 0;
	c->load.scored[x] = 0;
	c->load.chosen = x;
	c->changes++;
}

/* The end of a comparison: average it in, keep chosen or change, and when to compare again. */
static enum jpath_event decide(struct jpath_ctl *c)
{
	enum jpath x = c->challenger;
	double rc = rate_of(c, c->load.chosen), rx = rate_of(c, x), lead;
	struct pairs pr = pairs_of(c);
	bool changed = false, won, clear;

	c->load.rate[c->load.chosen] = rc;
	c->load.rate[x] = rx;
	c->decisions++;
	if (rc > 0 && rx > 0) {
		c->load.lead[x] = c->load.scored[x] ? (1 - JPATH_SCORE_WEIGHT) * c->load.lead[x] + JPATH_SCORE_WEIGHT * (rc / rx) : rc / rx;
		c->load.scored[x]++;
	}
	/*
	 * How many times faster the chosen path is than x, by the average (below 1: slower). x
	 * takes over when the average says it is faster by the margin, over two comparisons or
	 * more, or in one that was clear: chosen more than JPATH_BIG_LOSS slower by the sums and
	 * in every pair of windows (pairs_of). The rates of one path move by +-40% between
	 * comparisons here, and one comparison turned a choice between paths a few percent apart
	 * back and forth.
	 *
	 * Else x's spacing doubles when nearly all the pairs found chosen faster or behind by less
	 * than the margin (x4 when more than JPATH_BIG_LOSS faster): paths a few percent apart gain little from being compared, and
	 * each comparison costs its switches and its turns on the slower one. When the pairs
	 * disagree the comparison could not tell the paths from the disk's own changes of speed, and
	 * the spacing stays: doubled on such comparisons, the spacing of a challenger that is in
	 * fact faster grew to the most after a few unlucky ones, and the controller kept the slower
	 * path for seconds (a quarter of the time and more, on paths 12% apart in the model of
	 * test_disk_speed). Where the paths differ little, comparing them often costs little. A
	 * challenger that won this comparison by more than the margin keeps its spacing; one that
	 * won it clearly, or won its first of the load, is compared again at once (a path that
	 * became faster takes over within a few comparisons).
	 */
	lead = c->load.scored[x] ? c->load.lead[x] : 1;
	won = rc > 0 && rc * (1 + c->margin) < rx;
	clear = far_behind(rc, rx) && pr.n && pr.other_far == pr.n;
	if (lead * (1 + c->margin) < 1 && (c->load.scored[x] >= 2 || clear)) {
		change_to(c, x);
		changed = true;
	} else {
		unsigned *sp = &c->load.spacing[x];

		if (!won && nearly_all(pr.chosen_holds, pr.n))
			*sp = MIN((nearly_all(pr.chosen_far, pr.n) ? 4 : 2) * *sp, c->spacing_max);
		else if (won && (clear || c->load.scored[x] < 2))
			*sp = 1;
		/* else the pairs disagree, or x won by the margin without taking over: the same spacing */
		c->load.due_ns[x] = c->busy_ns + *sp * c->exploit_ns;
	}
	c->phase = JPATH_EXPLOIT;
	c->w_path = JPATH_NONE;
	return c->decisions == 1 ? JPATH_FIRST : changed ? JPATH_CHANGED : JPATH_SAME;
}

/* The path after p among those the controller has, in the order of enum jpath, round. */
static enum jpath arm_after(const struct jpath_ctl *c, enum jpath p)
{
	do
		p = p + 1 < JPATH_COUNT ? (enum jpath)(p + 1) : JPATH_INLINE;
	while (!has(c, p));
	return p;
}

/* The test modes: no measuring. */
static void published_test(struct jpath_ctl *c, enum jpath path)
{
	if (c->flip && path == c->load.chosen && ++c->w_batches >= c->flip) {
		c->load.chosen = arm_after(c, c->load.chosen);
		c->changes++;
		c->w_batches = 0;
	}
}

enum jpath_event jpath_published(struct jpath_ctl *c, enum jpath path, uint64_t records, uint64_t bytes,
				 unsigned writers, uint64_t submit_ns, uint64_t now_ns)
{
	bool changed = false;

	if (path == JPATH_INLINE_SPIN) {
		/* a few writers for a moment: the window measured neither path alone */
		c->w_path = JPATH_NONE;
		return JPATH_SAME;
	}
	if (jpath_forced(c)) {
		published_test(c, path);
		return JPATH_SAME;
	}
	/* the clock of the comparisons' spacing runs while batches come less than idle_ns apart */
	if (c->last_ns && now_ns > c->last_ns && now_ns - c->last_ns <= c->idle_ns)
		c->busy_ns += now_ns - c->last_ns;
	c->last_ns = now_ns;
	if (records) {
		double size = (double)bytes / (double)records;

		c->size_avg = c->size_avg ? (1 - JPATH_SIZE_WEIGHT) * c->size_avg + JPATH_SIZE_WEIGHT * size : size;
	}
	if ((!c->load.writers || load_changed(c, writers)) && load_enter(c, writers) && c->decisions)
		changed = true;
	if (c->phase == JPATH_EXPLOIT) {
		if (c->busy_ns >= c->load.due_ns[next_challenger(c)])
			compare_begin(c);
		return changed ? JPATH_CHANGED : JPATH_SAME;
	}
	if (path != jpath_next(c))
		return JPATH_SAME; /* in flight from before the path changed: belongs to no window */
	/* the journal was idle (this batch began after the gap): not a measure of the path; a gap
	 * with the batch in flight is (journal_path.h) */
	if (c->w_path != JPATH_NONE && submit_ns > c->w_last_ns && submit_ns - c->w_last_ns > c->idle_ns)
		c->w_path = JPATH_NONE;
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
	if (c->step < JPATH_STEPS) {
		c->step_records[c->step] = c->w_records;
		c->step_ns[c->step] = now_ns - c->w_first_ns;
	}
	if (++c->step == c->steps)
		return decide(c);
	/* the next window goes on from here if it measures the same path */
	if (jpath_next(c) == path)
		window_open(c, path, now_ns);
	else
		c->w_path = JPATH_NONE;
	return JPATH_SAME;
}

int jpath_set_test(struct jpath_ctl *c, const char *spec, const char **ret_rest)
{
	static const enum jpath pins[] = { JPATH_INLINE, JPATH_QUEUED, JPATH_QUEUED_ALT };
	enum jpath pin = JPATH_NONE;
	const char *end = NULL;
	uint64_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(pins); i++) {
		size_t l = strlen(path_names[pins[i]]);

		if (has(c, pins[i]) && !strncmp(spec, path_names[pins[i]], l) && (spec[l] == '\0' || spec[l] == ',')) {
			pin = pins[i];
			end = spec + l;
		}
	}
	if (pin == JPATH_NONE &&
	    (strncmp(spec, "flip:", 5) || decimal_prefix(spec + 5, &end, &n) < 0 || n == 0 || n > 1000000))
		return -EINVAL;
	if (*end != '\0' && *end != ',')
		return -EINVAL;
	if (pin != JPATH_NONE) {
		c->load.chosen = pin;
		c->pinned = true;
	} else {
		c->flip = (unsigned)n;
		c->w_batches = 0;
	}
	*ret_rest = *end ? end + 1 : end;
	return 0;
}

/* "inline on the flusher's thread" or "queued through io_uring". */
static const char *path_words(enum jpath p, const char *queue, const char *alt, char *buf, size_t len)
{
	if (p == JPATH_INLINE)
		snprintf(buf, len, "inline on the flusher's thread");
	else
		snprintf(buf, len, "queued through %s", p == JPATH_QUEUED_ALT ? alt : queue);
	return buf;
}

const char *jpath_describe(const struct jpath_ctl *c, const char *queue, const char *alt, char *buf, size_t len)
{
	char mine[64], theirs[160] = "";
	unsigned spacing = c->spacing_max, left = 0;
	size_t used = 0;

	path_words(c->load.chosen, queue, alt, mine, sizeof(mine));
	FOREACH_ARM(c, p)
		left += p != c->load.chosen;
	/* the others: "80000 inline on the flusher's thread and 150000 queued through libaio" */
	FOREACH_ARM(c, p) {
		char words[64];

		if (p == c->load.chosen)
			continue;
		path_words(p, queue, alt, words, sizeof(words));
		left--;
		if (c->decisions && c->load.rate[p] > 0)
			snprintf(theirs + used, sizeof(theirs) - used, "%.0f %s%s", c->load.rate[p], words,
				 left ? " and " : "");
		else
			snprintf(theirs + used, sizeof(theirs) - used, "%s%s%s", words,
				 c->decisions ? " (unmeasured)" : "", left ? (c->decisions ? " and " : " or ") : "");
		used = strnlen(theirs, sizeof(theirs) - 1);
		spacing = MIN(spacing, c->load.spacing[p]);
	}
	if (jpath_forced(c))
		snprintf(buf, len, "%s, %s for a test (HUGEPOOLD_FAULT_INJECT), not measured", jpath_name(c->load.chosen),
			 c->pinned ? "pinned" : "alternating");
	else if (!c->decisions)
		snprintf(buf, len, "measuring which is faster: %s or %s", mine, theirs);
	else
		snprintf(buf, len,
			 "%s: measured %.0f records/s against %s (changes: %" PRIu64 " in %" PRIu64
			 " comparison%s; next within %.1f s)",
			 mine, c->load.rate[c->load.chosen], theirs, c->changes, c->decisions, c->decisions == 1 ? "" : "s",
			 (double)(spacing * c->exploit_ns) / 1e9);
	return buf;
}
