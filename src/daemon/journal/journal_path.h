/* SPDX-License-Identifier: MIT */
/*
 * journal_path.h - which way a journal's flusher sends a batch to the disk, and, for
 * `backend = auto`, the controller that chooses it by measuring what the machine does.
 *
 * Paths: inline-spin (a few writers, no more than the CPUs: written and synced on the flusher's
 * own thread while the writers poll, journal_flusher.c), inline (the same for more writers, the
 * flusher not polling for their next appends: no queue, no io-wq worker, no completion to wake
 * the flusher), queued
 * (through the backend's queue, up to JOURNAL_INFLIGHT batches in flight) and queued-alt
 * (through its second queue: auto's io_uring beside libaio, jio.h). Explicit backends use
 * inline-spin and queued, as they always did. With `backend = auto` and a backend that has a
 * queue (io_uring, libaio), the batches of more writers than CPUs go inline, queued or
 * queued-alt as this controller says.
 *
 * The controller keeps one path, chosen, and compares it with each other path in turn (the
 * challenger whose turn comes first). It measures durable records per second of each path in
 * windows of published batches: a window lasts at least window_ns and window_batches batches of
 * one path, from its first publish to its last (the first batch's records left out, so the time
 * to change paths, a drain of the other path's batches, belongs to neither, and both paths are
 * measured alike whatever they keep in flight). A comparison is JPATH_STEPS windows in the order
 * challenger, chosen, chosen, challenger, challenger, chosen, chosen, challenger: interleaved,
 * so that a load that drifts (the machine's other work comes and goes over tenths of seconds,
 * more than the paths differ) weighs on both alike; and a window counts only from settle_ns
 * after a change of path, once the threads have settled into the new path's rhythm. Each
 * comparison gives the ratio of the two paths' records per second over their windows; the
 * controller averages it for each challenger over the comparisons made under the same load (an
 * exponential average, the newest weighing JPATH_SCORE_WEIGHT), and the challenger takes over
 * when that average, over two comparisons or more, says it is faster by `margin`, or at once
 * when one comparison finds the chosen path more than 25% slower, by the sums and in each of its
 * four pairs of neighbouring windows: one noisy comparison does not turn a clear winner over,
 * nor a choice between paths a few percent apart. After a change the averages against the
 * others are carried over by their ratios.
 * Each challenger has its own spacing: it is compared again after exploit_ns times a spacing
 * that doubles after a comparison that keeps the chosen path when nearly all its pairs (three of
 * four) agree, the chosen path faster or behind by less than `margin` (quadruples when nearly
 * all found it more than 25% faster), up to spacing_max; stays when the pairs disagree (the
 * disk's own changes of speed, which last tens of milliseconds, swamped the paths' difference:
 * a challenger in fact faster was pushed out for seconds by such comparisons) or when the
 * challenger won by more than `margin` without taking over; and falls back to 1 after a change,
 * or when the challenger won its first comparison of the load or found the chosen path more
 * than 25% slower (confirmed at once): a path that stays behind, far or close, costs a
 * comparison every few seconds, not every few tenths (each comparison pays its switches of path
 * and its turns on the slower one, and between close paths it gains little). The spacing counts
 * busy time, while batches of more writers than CPUs come less than idle_ns apart: a journal
 * busy in bursts is compared as often per second of work as a steady one, not at the start of
 * every burst. A load is the writers open and the bytes per record (an exponential average over
 * the batches): twice or half either is another load, where what was measured under the one
 * before does not hold. What the controller knew of a load (its chosen path, averages, rates,
 * spacings and turns) is kept when it is left, for the last JPATH_LOADS loads, and a load
 * within twice or half of one kept goes on from there: an engine whose connections come and go,
 * or a bench's runs, pays the first comparisons of a load once, not every time it comes back. A
 * new load begins with every challenger's turn at once and its spacing 1. An idle gap
 * (a batch submitted more than idle_ns after the publish before it: nothing was appended
 * meanwhile) or a batch of a few writers ends the window being measured. A gap while a batch was
 * in flight is the path's own time (a stalled sync, a queue that fell behind) and counts: were
 * it thrown away with its window, a path that stalls now and then would be measured by its good
 * windows only, and chosen over a steadier one that is faster overall.
 *
 * Pure functions of the samples the flusher gives them (unit-tested in
 * tests/unit/test_journal_path.c). Thread model: a controller belongs to one journal's flusher;
 * status reads it under the journal's lock. Nothing here locks, allocates or logs.
 */
#ifndef HP_JOURNAL_PATH_H
#define HP_JOURNAL_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum jpath {
	JPATH_NONE, /* no batch yet */
	JPATH_INLINE_SPIN,
	JPATH_INLINE,
	JPATH_QUEUED,
	JPATH_QUEUED_ALT, /* through the backend's second queue (auto: io_uring's beside libaio's) */
	JPATH_COUNT,
};

/* "none", "inline-spin", "inline", "queued", "queued-alt"; "unknown" for a value not in the table. */
const char *jpath_name(enum jpath p);

/* The controller's defaults (jpath_init); tests may set others. */
#define JPATH_WINDOW_NS 20000000ull /* 20 ms */
#define JPATH_WINDOW_BATCHES 8
#define JPATH_SETTLE_NS 10000000ull /* 10 ms after a change of path before a window counts */
#define JPATH_STEPS 8 /* windows in a comparison, half of each path */
#define JPATH_EXPLOIT_NS 400000000ull /* 0.4 s of the chosen path between comparisons, times spacing */
#define JPATH_SPACING_MAX 16
#define JPATH_IDLE_NS 20000000ull /* 20 ms without a publish: not busy */
#define JPATH_MARGIN 0.03 /* the other path must be 3% faster to take over */
#define JPATH_SCORE_WEIGHT 0.4 /* of the newest comparison in the average */
#define JPATH_LOADS 8 /* loads whose averages are remembered (the least recently left is forgotten) */
#define JPATH_SIZE_WEIGHT 0.25 /* of the newest batch in the average size of a record */

/*
 * A load and what the controller knows of it: the one under way (jpath_ctl.load), and those left
 * before (jpath_ctl.loads[]), to go on from there when one comes back. For each other path than
 * chosen: lead, scored, spacing, due_ns.
 */
struct jpath_load {
	unsigned writers; /* the writers open (0: a free slot, or no load yet) */
	uint64_t rec_bytes; /* and bytes per record, when the load began */
	enum jpath chosen; /* the faster path measured */
	double lead[JPATH_COUNT]; /* chosen's rate / this one's, averaged over this load's comparisons */
	unsigned scored[JPATH_COUNT]; /* comparisons in lead since the load or chosen changed */
	unsigned spacing[JPATH_COUNT]; /* exploit_ns times this between comparisons with it */
	uint64_t due_ns[JPATH_COUNT]; /* compared again at the first publish once busy_ns is here */
	double rate[JPATH_COUNT]; /* records/s of each path when last measured (0: not yet) */
	uint64_t left_ns; /* in loads[]: busy_ns when it was left */
};

enum jpath_phase {
	JPATH_EXPLOIT, /* the chosen path alone, until a challenger's due_ns */
	JPATH_COMPARE, /* windows of both paths in turn */
};

struct jpath_ctl {
	/* tuning */
	uint64_t window_ns, settle_ns, exploit_ns, idle_ns;
	unsigned window_batches, steps /* at most JPATH_STEPS */, spacing_max;
	double margin;

	/* the decision */
	unsigned arms; /* the paths it chooses among: bit 1 << path (inline, queued, queued-alt) */
	enum jpath challenger; /* COMPARE: the path compared with chosen */
	enum jpath_phase phase;
	unsigned step; /* COMPARE: the window being measured, 0..steps-1 */
	uint64_t decisions, changes; /* comparisons made; how many changed chosen */
	uint64_t busy_ns, last_ns; /* time with batches of many writers less than idle_ns apart; the last one's */
	struct jpath_load load; /* the load under way, its chosen path and what is known of the others */
	double size_avg; /* bytes per record of the latest batches (exponential average) */
	struct jpath_load loads[JPATH_LOADS]; /* the loads left before */
	unsigned slot; /* where this load is kept when it is left */
	/* the comparison under way: each window's records and length, by step (whose path is
	 * jpath_next's at that step) */
	uint64_t step_records[JPATH_STEPS], step_ns[JPATH_STEPS];

	/* the window being measured */
	enum jpath w_path; /* JPATH_NONE: no window open */
	uint64_t w_first_ns, w_last_ns, w_records;
	unsigned w_batches;
	uint64_t w_settle_ns; /* the path changed: nothing counts before this */

	/* for the tests (jpath_set_test): chosen is pinned, or alternates every flip batches */
	bool pinned;
	unsigned flip;
};

/* A controller of inline and queued that prefers `first` (JPATH_INLINE or JPATH_QUEUED) and
 * compares at once. */
void jpath_init(struct jpath_ctl *c, enum jpath first);

/* The backend has a second queue (jio_use_queue): the controller chooses among three paths,
 * queued-alt too. Before the first publish. */
void jpath_add_queue(struct jpath_ctl *c);

/* The path the next batch of more writers than CPUs takes. */
enum jpath jpath_next(const struct jpath_ctl *c);

/* What jpath_published found. */
enum jpath_event {
	JPATH_SAME, /* nothing decided, or the same path again */
	JPATH_FIRST, /* the first comparison was made (chosen may or may not have changed) */
	JPATH_CHANGED, /* a later comparison changed chosen */
};

/*
 * A batch of `records` records (`bytes` bytes of them, headers included, padding not) that went
 * by `path` was submitted at submit_ns and published (made durable and acknowledged) at now_ns,
 * when `writers` writers were open. A batch of another path than the one jpath_next names is not
 * counted (one still in flight from before a change of path); JPATH_INLINE_SPIN ends the window
 * being measured.
 */
enum jpath_event jpath_published(struct jpath_ctl *c, enum jpath path, uint64_t records, uint64_t bytes,
				 unsigned writers, uint64_t submit_ns, uint64_t now_ns);

/*
 * For the tests, which want each path, and switches between them, under a workload of their
 * choosing (HUGEPOOLD_FAULT_INJECT=NAME:path:...): spec "inline", "queued" or (with a second
 * queue) "queued-alt" pins the path, "flip:N" goes round them in that order every N published
 * batches, instead of measuring; either may
 * be followed by ",REST", and *ret_rest then points at REST (else at ""). -EINVAL on a bad spec,
 * c and *ret_rest untouched.
 */
int jpath_set_test(struct jpath_ctl *c, const char *spec, const char **ret_rest);

/* Does path p go through a queue (jio_submit), not inline (jio_run)? */
static inline bool jpath_queued(enum jpath p)
{
	return p == JPATH_QUEUED || p == JPATH_QUEUED_ALT;
}

/* Does a test choose the path (jpath_set_test)? Then it does so for every batch, a few writers'
 * too, so that a test's fault meets the path it asked for however many writers are active. */
static inline bool jpath_forced(const struct jpath_ctl *c)
{
	return c->pinned || c->flip;
}

/*
 * Why the next batch of more writers than CPUs goes the way it does, in words, for status and
 * the log: queue names the backend behind the queued path ("libaio"), alt the one behind
 * queued-alt ("io_uring"; NULL without it). Returns buf.
 */
const char *jpath_describe(const struct jpath_ctl *c, const char *queue, const char *alt, char *buf, size_t len);

#endif
