/* SPDX-License-Identifier: MIT */
/*
 * takeover.h - a restart by take-over: the next life of the daemon is started beside the running
 * one, prepares itself while the running one still serves, and takes over only once it is ready,
 * so that the clients' pause is what changed meanwhile, not an exec, a dynamic link, a
 * configuration and a take-over of every fd. This is the channel between the two lives (a
 * SOCK_SEQPACKET socketpair, the next life's end at the fd HUGEPOOLD_TAKEOVER_FD names) and the
 * protocol on it; the running life's side is server_warm.c's, the next life's main.c's and
 * server_warm.c's. In order:
 *
 *   running life                                   next life (spawned with the same argv)
 *   FDS ... (the fd table in batches, from    -->  configuration, then waits for the snapshot
 *            the event loop: it serves on)
 *   SNAPSHOT (once every fd kept is given:    -->  reads that state (still written: what it reads
 *            which is its state; the records          is handed over again at GO where it
 *            written from then on are tracked)        changed), prepares the pool, its state and
 *                                                     the connections (polled) from it
 *                                            <--  PREPARED (its state memfd, unpublished), or
 *                                                 FAILED (why, one line) and it exits
 *   stops: replies sent, records final, journals closed
 *   FDS, REMOVED, HELD, DIRTY ..., GO         -->  the fds kept since, those forgotten, those the
 *                                                  service manager took, the records written
 *                                                  since the snapshot; it applies them, opens the
 *                                                  journals and publishes its state
 *                                            <--  TAKEN, and it serves; or REFUSED (why): the
 *                                                  running life re-executes itself in place
 *   MAINPID= to the service manager, then MAIN -->  it may talk to the manager from now on
 *   exits
 *
 * A restart that keeps the daemon's pid (restart = exec, without a service manager) is two
 * take-overs: the running life is taken over by a next life as above, and then, instead of MAIN
 * and its end, sends BACK with the end of a new channel and executes its binary again
 * (takeover_exec), the other end at fd 3 there; the next life, serving meanwhile, is the running
 * life of a take-over by that process, which it did not spawn, and once taken over ends. Each
 * pause the clients see is a take-over's.
 *
 *   BACK (the new channel's end; its pid, the   -->  the running life of a take-over by it
 *         nice it comes back to, and the
 *         connection that asked)
 *   executes its binary, the new channel's
 *   other end at fd 3: the next life of a
 *   take-over by the life it just gave way to
 *
 * Either side seeing the other end (EOF) before its part is done gives up: before the running
 * life stopped, it serves on and refuses the restart with the next life's last words; after, it
 * re-executes in place (reexec.h), which takes the newest published state over. A next life
 * whose running life went away before GO exits without having served.
 *
 * Every message is one datagram: a struct takeover_msg and its entries, with at most
 * TAKEOVER_FDS_MAX fds. Event loop and main only.
 */
#ifndef HP_TAKEOVER_H
#define HP_TAKEOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fdstore.h"
#include "warm.h"

#define TAKEOVER_FD_ENV "HUGEPOOLD_TAKEOVER_FD"
/* the nice the next life's threads go back to (SCHED_OTHER) at GO: it prepares idle */
#define TAKEOVER_NICE_ENV "HUGEPOOLD_TAKEOVER_NICE"
#define TAKEOVER_PREPARE_NICE 19 /* with SCHED_IDLE */
#define TAKEOVER_NICE_NONE (-100) /* the next life prepares at the daemon's own priority */
#define TAKEOVER_FDS_MAX 253 /* SCM_MAX_FD */
#define TAKEOVER_TEXT_MAX 512

enum takeover_type {
	TAKEOVER_FDS = 1, /* entries: struct takeover_name, each with its fd */
	TAKEOVER_SNAPSHOT, /* arg: the id of the running life's state (its fd came with the rest) */
	TAKEOVER_PREPARED, /* the next life's state memfd as its one fd */
	TAKEOVER_FAILED, /* text */
	TAKEOVER_REMOVED, /* entries: struct takeover_name */
	TAKEOVER_HELD, /* entries: struct takeover_name */
	TAKEOVER_DIRTY, /* arg: enum warm_kind; entries: uint32_t record indices */
	TAKEOVER_GO, /* arg: when the running life stopped serving (CLOCK_MONOTONIC ns) */
	TAKEOVER_TAKEN,
	TAKEOVER_REFUSED, /* text */
	TAKEOVER_MAIN, /* arg: the connection that asked for the restart (its conn_id) when this life
			* did not answer it, to be answered by the next one (0: none) */
	TAKEOVER_BACK, /* one struct takeover_back, and the new channel's end as its one fd */
};

struct takeover_msg {
	uint32_t type;
	uint32_t count; /* entries, or the text's bytes */
	uint64_t arg;
};

struct takeover_name {
	char name[FDSTORE_NAME_MAX + 1];
	uint8_t held; /* FDS: the service manager holds it */
};

/* BACK: who comes back (its pid, and the nice its threads go back to at GO: TAKEOVER_NICE_NONE if
 * it prepares at the daemon's priority) and for whom (a connection's conn_id; 0: SIGUSR2). */
struct takeover_back {
	uint64_t asker;
	int32_t pid;
	int32_t nice;
};

/* What changed between the snapshot and GO (takeover_recv_go). */
struct takeover_delta {
	struct fdstore_fd *added;
	unsigned nadded;
	fdstore_name *removed, *held;
	unsigned nremoved, nheld;
	uint32_t *dirty[WARM_KINDS];
	uint32_t ndirty[WARM_KINDS];
	uint64_t stopped_ns;
};
void takeover_delta_free(struct takeover_delta *d); /* closes the added fds still in it */

/* --- the running life ------------------------------------------------------------------- */

/*
 * Start the executable open at exe_fd (argv: this life's, valid until the child is joined) as the
 * next life, the channel's other end at the fd TAKEOVER_FD_ENV names there. It starts idle
 * (SCHED_IDLE, nice TAKEOVER_PREPARE_NICE) where it will be able to come back to this life's
 * priority (CAP_SYS_NICE, or RLIMIT_NICE: LimitNICE= in the unit), with that nice in
 * TAKEOVER_NICE_ENV and *ret_nice (else TAKEOVER_NICE_NONE): its exec, dynamic link and
 * preparation then take only the CPU time the running life and its clients leave. At the same
 * priority a client's wake-up could wait a scheduler's slice behind them (milliseconds, on a
 * kernel without preemption: the exec alone closes every fd this life holds). The spawn runs on a
 * thread of its own (posix_spawn blocks until the child has executed: milliseconds); the channel
 * may be used at once, and a spawn that failed shows as its end. Returns the channel's end here
 * (non-blocking) and *ret; else a negative errno, why in err. takeover_child_pid waits for the
 * spawn: the child's pid, or a negative errno with why in err; takeover_child_free frees it
 * (the child lives on). With managers (the caller runs under a service manager, and is not a
 * pid namespace's first process, whose child clone keeps its own) the child is the manager's
 * (CLONE_PARENT), so that the manager follows it as a main process it started: this life cannot
 * reap it, and sees it end through takeover_child_pidfd (the caller's to close; -1 for a child
 * of this life's own, which waitpid reaps).
 */
struct takeover_child;
int takeover_spawn(int exe_fd, char *const argv[], bool managers, struct takeover_child **ret, int *ret_nice,
		   char *err, size_t errlen);
pid_t takeover_child_pid(struct takeover_child *c, char *err, size_t errlen);
int takeover_child_pidfd(struct takeover_child *c);
void takeover_child_free(struct takeover_child *c);
/*
 * Send the next batch of fds kept and not given yet (fdstore_handover_batch), without waiting;
 * when none is left, SNAPSHOT, and w's records are tracked from then on (warm_track): what the
 * next life reads of w names fds given, or records written since. Returns 1 when more is to be
 * sent, 0 once SNAPSHOT was, -EAGAIN to try again when the channel is writable, or another
 * negative errno.
 */
int takeover_send_snapshot(int chan, struct warm *w);
/*
 * Once stopped: the delta (fdstore_handover_delta, the records written since warm_track) and
 * GO, waiting while the channel is full. 0, or a negative errno (the next life is gone).
 */
int takeover_send_go(int chan, const struct warm *w, uint64_t stopped_ns);

/* BACK with b and the new channel's end fd; waits. */
int takeover_send_back(int chan, const struct takeover_back *b, int fd);
/*
 * BACK sent: wait (at most timeout_ms) until the next life, pid (this process's child), has taken
 * the new channel up. 0 once its first batch came on chan, the running life's end of it (left
 * there for the process this one becomes); -ECHILD when pid ended (reaped here); -EPIPE when it
 * said it will not (FAILED), or closed the channel and is still alive at the deadline (an older
 * binary): it serves on; -ETIMEDOUT. chan -1 (BACK could not be sent): only its end is looked for.
 */
int takeover_back_taken(int chan, pid_t pid, int timeout_ms);
/*
 * Taken over by a next life that hands the service back to this process (BACK): the nice this
 * life's next one goes back to at GO where it may prepare idle (it can come back: CAP_SYS_NICE
 * or RLIMIT_NICE), else TAKEOVER_NICE_NONE.
 */
int takeover_back_nice(void);
/*
 * ... and then become the executable open at exe_fd again (fallback_fd's if that exec fails,
 * -1: none) with argv, as the next life of a take-over whose channel's end is chan (at fd 3
 * there): idle first (all threads) when nice is not TAKEOVER_NICE_NONE, told to come back to it.
 * Every other fd of this process is close-on-exec. Returns only when every exec failed (a
 * negative errno).
 */
int takeover_exec(int exe_fd, int fallback_fd, char *const argv[], int chan, int nice);

/* --- both ------------------------------------------------------------------------------- */

/*
 * Receive one message, waiting at most timeout_ms (-1: as long as it takes; 0: not at all,
 * -EAGAIN). Its header in *m, its entries or text in payload (cap bytes: a longer one is
 * -EMSGSIZE), its fds in fds (*nfds; at most TAKEOVER_FDS_MAX, close-on-exec). -EPIPE: the other
 * end is gone.
 */
int takeover_recv(int chan, struct takeover_msg *m, void *payload, size_t cap, int *fds, unsigned *nfds,
		  int timeout_ms);
/* Send one message with no entries (text: TEXT's bytes, NULL none) and fd (-1: none); waits. */
int takeover_send(int chan, enum takeover_type type, uint64_t arg, const char *text, int fd);
/*
 * The last words (FAILED, REFUSED): sent, then wait (at most timeout_ms) until the other end has
 * read them and closed the channel. A datagram sent to a socket whose peer is gone purges the
 * peer's messages not read yet: a next life exiting at once could lose them to the running
 * life's next batch.
 */
int takeover_say_last(int chan, enum takeover_type type, const char *text, int timeout_ms);

/* --- the next life ---------------------------------------------------------------------- */

/*
 * The channel the running life gave this one (TAKEOVER_FD_ENV, then unset), or -1: not a
 * take-over; and the nice its threads go back to at GO (TAKEOVER_NICE_ENV, then unset; else
 * TAKEOVER_NICE_NONE).
 */
int takeover_open(int *ret_nice);
/*
 * Every thread of process pid (0: this one, the calling thread first) idle (SCHED_IDLE at nice
 * TAKEOVER_PREPARE_NICE), or not (SCHED_OTHER at nice): the next life back to the daemon's
 * priority at GO (or when it prepares idle too slowly), the running life idle once taken over.
 * 0, or the first negative errno (the threads it could not set stay as they were).
 */
int takeover_priority(pid_t pid, bool idle, int nice);
/*
 * Receive the snapshot: the fds (sorted by name, held as the running life said; the array and
 * the fds are the caller's) and which is the running life's state (*ret_state_id).
 */
int takeover_recv_snapshot(int chan, struct fdstore_fd **ret_fds, unsigned *ret_n, uint64_t *ret_state_id);
/* Wait for the delta and GO (-EPIPE: the running life went away before). */
int takeover_recv_go(int chan, struct takeover_delta *ret);

#endif
