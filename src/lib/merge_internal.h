/* SPDX-License-Identifier: MIT */
/*
 * merge_internal.h - what merge.c (the API, groups and tasks of hp_merge) and merge_engine.c
 * (the loser tree that merges and combines batched cursors) share: the tuning constants, the
 * engine, a group and the merge itself. merge.c's opening comment says who owns what when.
 */
#ifndef HP_MERGE_INTERNAL_H
#define HP_MERGE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hugepool.h"
#include "workpool.h"


#define MERGE_K_MAX 65536u
#define DEFAULT_BATCH_ROWS 4096
#define DEFAULT_SLICE_NS 1000000u
#define GROUP_BUFS 8 /* batch buffers per group: one filling, one read, the rest queued */
#define RESUME_FREE (GROUP_BUFS / 2) /* a parked group is requeued once this many are free */
#define IBATCH_BYTES (32u << 10) /* target size of a batch between tasks */
#define IBATCH_MIN_ROWS 8
#define QUOTA_START 8192 /* rows of a task's first slice */
#define QUOTA_MIN 256
#define QUOTA_MAX (1u << 22)
#define CONSUMER_CHUNK 65536 /* rows hp_merge_next merges between two looks at cancel */
#define STREAK_MAX 32 /* wins in a row before a gallop, at most */
#define GALLOP_GOOD 8 /* a gallop that copied fewer rows makes the next one less eager */
#define PARALLEL_MIN_K 4 /* fewer inputs: always serial */
#define GROUPS_MAX 256

typedef int (*cmp_fn)(const void *a, const void *b, void *ud);
typedef void (*combine_fn)(void *acc, const void *row, void *ud);

/* merge_engine_run results (>= 0); errors are negative errnos */
enum { ST_END = 0, ST_FULL = 1, ST_QUOTA = 2 };
/* group_work results (>= 0) */
enum { GW_YIELD = 0, GW_END = 1, GW_NOBUF = 2 };

struct cursor {
	const char *p, *end; /* the current row and the end of its batch; p NULL: exhausted */
};

/* a player in the loser tree: its leaf and its current row (NULL: exhausted), kept in the node */
struct node {
	const char *row;
	unsigned leaf;
};

struct engine;
/* Load leaf i's next batch: 1 with rows, 0 at its end (p = NULL), or a negative errno. */
typedef long (*refill_fn)(struct engine *e, unsigned i);

/*
 * A loser tree over k cursors, padded to kp (a power of two) leaves with exhausted ones, so the
 * left subtree of every node holds the lower leaves: a tie goes to the player from the left.
 * Used by one thread at a time: the consumer (top), or whoever set its group RUNNING.
 */
struct engine {
	size_t rs;
	cmp_fn cmp;
	combine_fn combine; /* NULL: no folding */
	void *ud;
	unsigned k, kp;
	struct cursor *cur; /* kp; the padding leaves stay exhausted */
	struct node *tree; /* kp: [0] the winner, [1..kp-1] the loser of each match */
	refill_fn refill;
	const struct hp_merge_input *inputs; /* merge_input_refill: this engine's k inputs */
	struct hp_merge *m; /* group_fetch */
	unsigned last, streak, min_streak; /* the gallop trigger */
	bool started;
};

enum gstate {
	G_IDLE, /* parked (ring full) or not started: nobody runs it, not queued */
	G_QUEUED, /* submitted to the pool: on the run queue, or popped by a worker about to run */
	G_RUNNING, /* a worker or the consumer runs group_work */
	G_DONE, /* will never run again */
};

struct group {
	struct wp_task task; /* first: the pool hands back &task */
	struct hp_merge *m;
	struct engine eng; /* owned by the thread that set RUNNING */
	char *buf[GROUP_BUFS];
	/* m->lock: */
	size_t nrows[GROUP_BUFS]; /* rows in each filled buffer */
	unsigned filled[GROUP_BUFS], fhead, flen; /* FIFO of filled buffers */
	unsigned freel[GROUP_BUFS], nfree; /* free buffers */
	enum gstate state;
	bool eof; /* every row was pushed: when flen is 0, the stream is over */
	/* owned by the thread that set RUNNING: */
	int fill; /* the buffer being filled, -1 none */
	size_t fill_n;
	uint64_t quota; /* rows per slice on a worker */
	/* consumer's: */
	int reading; /* the buffer the final merge reads, -1 none */
};

struct hp_merge {
	const struct hp_merge_input *inputs;
	unsigned k;
	size_t rs, batch_rows, ibatch_rows;
	uint64_t slice_ns;
	atomic_bool cancelled; /* hp_merge_cancel, any thread */
	/* consumer's (the thread driving the merge): */
	bool finished;
	long final; /* what hp_merge_next returns once finished */
	struct engine top; /* over the inputs (serial) or the groups' rings */
	char *out; /* batch_rows rows, handed to the caller */
	unsigned ngroups;
	struct group *groups;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a group pushed a batch or changed state, or cancel */
	/* m->lock: */
	bool stop; /* cancel, error or close: groups stop at their next slice boundary */
	long err; /* the first input error seen by a group */
	unsigned live; /* groups not G_DONE */
	unsigned slots; /* pool slots still reserved */
	unsigned waiting; /* consumer threads in cond_wait (0 or 1) */
};


/* --- merge_engine.c ------------------------------------------------------------------------ */

/* An engine over k cursors that refill calls load; inputs for merge_input_refill. */
int merge_engine_init(struct engine *e, const struct hp_merge *m, unsigned k, refill_fn refill,
		      const struct hp_merge_input *inputs, const struct hp_merge_opts *o);
void merge_engine_free(struct engine *e);
/* Load every leaf and play the first tournament: ST_END when all are empty, else ST_FULL. */
long merge_engine_start(struct engine *e);
/*
 * Merge (and combine) into out (cap rows; *pn rows there already) until out is full (ST_FULL),
 * every input ended (ST_END) or *budget input rows were used (ST_QUOTA); a negative errno
 * from a refill.
 */
long merge_engine_run(struct engine *e, char *out, size_t cap, size_t *pn, uint64_t *budget);
/* The refill of an engine over the caller's inputs. */
long merge_input_refill(struct engine *e, unsigned i);

#endif
