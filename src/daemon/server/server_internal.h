/* SPDX-License-Identifier: MIT */
/*
 * server_internal.h - what the connection layer and the services of hugepoold's server share:
 * struct server (the event loop's state), struct peer (one connection: its transport state and
 * each service's state for it), the reply functions of the connection layer, and one handler
 * per request type.
 *
 *   server.c       the listening socket, accept and admission, the hello, the event loop
 *   peer_life.c    a connection's life: made, verified, kept for a restart, killed, destroyed
 *   server_warm.c  warm restart: stopping for a next life, taking over what a previous life
 *                  left (the socket, the connections), the restart request, the take-over
 *   peer.c         a connection's transport: framing, the out-queue that owns fds, dispatch
 *   svc_lease.c    acquire and release, and the lease table's callbacks
 *   svc_journal.c  journal writers, readers and truncation
 *   svc_spill.c    counters pages and spill files
 *   svc_status.c   the status reply
 *
 * The handlers are declared from proto.h's PROTO_REQUESTS list, which is also what peer.c's
 * dispatch table is made from: a request type is described once, there. Everything here runs
 * on the event loop thread.
 */
#ifndef HP_SERVER_INTERNAL_H
#define HP_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "access.h"
#include "config.h"
#include "journal.h"
#include "lease.h"
#include "pool.h"
#include "proto.h"
#include "server.h"
#include "recycler.h"
#include "spill.h"
#include "warm.h"

struct takeover_child;

#define OUT_MAX (PROTO_REPLY_MAX + (1u << 20)) /* a peer that lets more pile up is dropped */
/*
 * Backpressure: a peer's next request is not read while more than OUT_PAUSE bytes of its
 * replies, or any fd of them, wait to be sent. A client that does not read its replies
 * therefore holds at most one reply's worth of daemon memory and fds beyond OUT_PAUSE.
 */
#define OUT_PAUSE (64u << 10)
/* fds one received message may carry before the kernel truncates: SCM_MAX_FD */
#define IN_FDS_MAX 253

#define VERSION_STRING HUGEPOOL_VERSION

#define PEER_WRITERS_MAX 64 /* journal writers one connection may hold */

/*
 * The fds of one queued message. They are the queue's own: an fd the daemon keeps elsewhere
 * (a pool buffer, a doorbell) is queued as a dup, so what the client receives is the object
 * the message was about even if the original fd number is closed and reused meanwhile. They
 * are closed once sent, or when the peer goes. A GRANT also names its lease slots, which
 * become releasable only once the message left (lease_slot_delivered).
 */
struct out_fds {
	size_t at; /* offset in out[] of the header of the message they go with */
	unsigned n;
	int fds[PROTO_MAX_FDS];
	struct lease_slot *grants[PROTO_MAX_FDS]; /* a GRANT's slots, else NULL */
};

struct peer_writer {
	uint64_t id;
	struct journal_writer *w;
};

struct peer {
	int fd;
	unsigned id;
	struct server *srv;
	struct lease_owner owner;
	bool attached; /* owner is attached to the lease table */
	bool welcomed;
	uint16_t version; /* of the protocol its hello came in */
	bool dead; /* destroy at the end of this loop iteration (set by peer_mark_dead) */
	bool closing; /* destroy once out[] is flushed; ignore input */
	bool busy; /* a request awaits its reply */
	bool admin; /* root, the daemon's uid or admin_group: may restart the daemon */
	/* taken over from a previous life and not yet compared with its record (peer_verify):
	 * nothing is read from it or sent to it before */
	bool unverified;
	bool sees_all; /* an admin or of monitor_group: sees every client and uid in status */
	bool status_only; /* let in by monitor_group's ACL entry alone (access.h): hello and status only */
	struct access_creds creds; /* uid, gid and groups, as of connect() */
	char name[PROTO_NAME_MAX];
	uint64_t connected_rt;
	/* input: header then payload */
	struct proto_hdr hdr;
	size_t in_got;
	uint8_t *in_payload;
	/* output */
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	struct out_fds *ofds;
	size_t ofds_head, nofds, ofds_cap;
	unsigned queued_fds; /* in ofds[] */
	bool want_out; /* EPOLLOUT registered */
	bool paused; /* EPOLLIN not registered: too many of its replies wait (peer_paused) */
	struct peer_writer writers[PEER_WRITERS_MAX];
	unsigned nwriters;
	struct spill_owner spill;
	/* warm restart: the socket is kept as "conn.<conn_id>", the record in the warm state */
	uint64_t conn_id;
	int warm_slot; /* -1: none (not kept: refused, or the table was full) */
	enum warm_conn_state noted; /* what the record says now */
	struct {
		char class_name[PROTO_NAME_MAX];
		uint32_t count;
		uint64_t deadline; /* CLOCK_MONOTONIC ns, UINT64_MAX none */
	} wait; /* the acquire that waits, while owner.req is set */
	TAILQ_ENTRY(peer) link;
};

struct server {
	const struct config *cfg;
	struct pool *pool;
	struct lease_table *leases;
	struct recycler *recycler;
	struct journal **journals;
	unsigned njournals;
	struct spill *spill;
	struct warm *warm; /* the state the next life takes over the pool with; main's */
	uint64_t next_writer_id;
	int listen_fd, epoll_fd, signal_fd;
	bool listen_kept; /* in a service manager's fd store: the next life serves it */
	bool fds_refused; /* the kernel refuses fds at the socket (SO_PASSRIGHTS); else closer.h */
	int reserve_fd; /* spent on accept-and-close when the daemon is out of fds */
	uint64_t listen_paused_until; /* CLOCK_MONOTONIC ns; 0 = the listener is polled */
	bool have_admin_gid, have_monitor_gid;
	gid_t admin_gid, monitor_gid; /* admin_group and monitor_group, resolved at start */
	gid_t socket_gid; /* socket_group resolved, or the daemon's group */
	struct access_list (*jaccess)[JOURNAL_OPS]; /* per journal (cfg->journals order), per op */
	TAILQ_HEAD(, peer) peers;
	unsigned npeers, next_id;
	unsigned ndead; /* peers marked dead: the loop turn's end walks the peers only when some are */
	uint64_t started_rt;
	uint64_t connections_total, protocol_errors;
	struct proto_status_server counted; /* its refusals, counted as they come (status fills the rest) */
	bool stop;
	bool sealed; /* shutting down: the warm state and the fd store stay as they are for the next life */
	bool reexec; /* ... and main re-executes the daemon (restart request, SIGUSR2) */
	bool takeover; /* ... or hands over to the next life prepared beside it (takeover.h) */
	uint64_t stopped_ns; /* when the loop stopped serving (CLOCK_MONOTONIC) */
	int restart_fd; /* a restart being checked (reexec.h): the fd to poll; -1 if none */
	unsigned restart_peer; /* the connection that asked for it (its id); 0: SIGUSR2 */
	/* a restart by take-over, this life's side: the next life while it prepares */
	struct {
		int chan; /* the channel to it (polled); -1: none */
		struct takeover_child *child;
		pid_t pid; /* once spawned (takeover_child_pid); 0 before, and once it is gone or took over */
		bool snapshot_sent;
		uint64_t deadline; /* CLOCK_MONOTONIC ns it must be prepared by */
		/* it prepares idle until then (takeover_spawn), at the daemon's priority after;
		 * UINT64_MAX: not idle, or not any more */
		uint64_t idle_until;
		int nice; /* the daemon's: what it goes back to */
		int state_fd; /* its state memfd once prepared (kept in the fd store here too) */
		uint64_t state_id;
		/* restart = exec: it hands the service back to this process once taken over (BACK),
		 * on a socketpair made before anything stops (-1 once given), and answers the
		 * connection that asked (its conn_id), not this life */
		bool back;
		int back_pair[2];
		uint64_t asker;
		/* ... this life's side of that: the next life is the daemon's own process, not a child,
		 * signalled through a pidfd (its pid could be another process's once it ended); a
		 * pidfd without coming_back: the service manager's child (takeover_spawn under a
		 * manager), which the manager reaps */
		bool coming_back;
		int pidfd;
	} next;
	/* ... the next life's side: the connections it could not take over from the snapshot (its
	 * records still written), taken over at GO */
	uint64_t *parked;
	unsigned nparked, capparked;
	/* ... and the channel to the life it took over from, until that one said
	 * this one is the service's main process (then READY=1 goes with the text in ready) */
	struct {
		int chan;
		char ready[256];
		struct fdstore_fd *fds; /* the hand-over's fds nobody took (fdstore_received_free then) */
		unsigned nfds;
	} prev_life;
	struct proto_status_start start; /* how this life started, for status */
};

/* --- peer_life.c: a connection's life --------------------------------------------------- */

/*
 * A peer for connection fd of cred, admitted: counted, polled, attached to the lease table.
 * NULL when it could not be set up (fd closed). verified: cred is the socket's own (accepted
 * now); else it is what a previous life recorded, and peer_verify compares them before the
 * connection is first read or written.
 */
struct peer *peer_new(struct server *s, int fd, const struct ucred *cred, uint64_t connected_rt, bool verified);
/*
 * A connection taken over unverified: is its socket the client its record names (type and
 * credentials)? Then its groups are read and it gets its rights; else it is killed (-EBADF).
 * Taking over thousands of connections costs no system call for each this way, only the first
 * use of each does.
 */
int peer_verify(struct peer *p);
/* Keep p's socket in the fd store and give it a record: a restart goes on serving it. */
void peer_keep(struct server *s, struct peer *p);
/* Mark the peer dead: it is destroyed at the end of the loop turn. */
void peer_mark_dead(struct peer *p);
/* Log why (rate-limited) and mark the peer dead. */
void peer_kill(struct peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Let go of all p held and free it (dead peers, at the end of the loop turn; the server's end). */
void peer_destroy(struct server *s, struct peer *p);

/* --- peer.c: the connection layer ------------------------------------------------------- */

/*
 * Queue one message (header + two payload parts + fds) and try to send it. The fds whose bit is
 * set in `take` are given to the queue; the others stay the caller's and the queue sends dups
 * of them. grants, if not NULL, names the lease slot each fd is the buffer of.
 */
void peer_send_fds(struct peer *p, enum proto_type type, const void *a, size_t alen, const void *b, size_t blen,
		   const int *fds, unsigned nfds, uint32_t take, struct lease_slot *const *grants);
void peer_send(struct peer *p, enum proto_type type, const void *a, size_t alen, const void *b, size_t blen);

/* Answer the outstanding request with a RESULT (err 0 or a negative errno, text or NULL). */
void send_result(struct peer *p, int err, const char *text);

/* Send what the queue holds until the socket is full (on EPOLLOUT). */
void peer_flush(struct peer *p);

/* Read whatever is there; dispatch each complete message (on EPOLLIN). */
void peer_read(struct server *s, struct peer *p);

/* Close the fds still queued for the peer (it is going away). */
void peer_drop_queue(struct peer *p);

/*
 * Keep p's record in the warm state current (warm.h says what the next life does with each
 * state): written when it changes, or always with force. peer_note_busy marks it BUSY before
 * the daemon reads from the socket, so that a crash after the read can never be taken for idle.
 */
void peer_note(struct peer *p, bool force);
void peer_note_busy(struct peer *p);

/* --- server.c ------------------------------------------------------------------------------ */

/*
 * May a connection of cred be served: within max_connections and its uid's limit? 0, or
 * -EUSERS with why in text. Only admitted connections become peers, so a refused one is never
 * counted against anyone's limit.
 */
int server_admit(struct server *s, const struct ucred *cred, char *text, size_t len);
/*
 * Close a connection the daemon never admitted: shut and closed on the closer's threads, charged
 * to uid, where its client may have passed fds the kernel could not refuse (closer.h).
 */
void server_unadmitted_close(const struct server *s, int fd, uid_t uid);

/* --- server_warm.c: warm restart ------------------------------------------------------------ */

/*
 * Start checking a restart (reexec.h) for the connection peer_id (0: SIGUSR2): 0, or why not in
 * text. server_restart_checked, when restart_fd is readable or the check's deadline came:
 * answers the connection once the check ended, and stops the loop for main to re-execute.
 */
int server_restart_check(struct server *s, unsigned peer_id, char *text, size_t len);
void server_restart_checked(struct server *s, uint64_t now);
/* The listening socket fd a previous life left if it is still the configured one, else -1 (closed). */
int server_socket_adopt(const struct config *cfg, gid_t gid, int fd);
/* Serve on the connections h's state describes, give their leases back (their acquires wait). */
void server_adopt_conns(struct server *s, struct server_handover *h);
/* Queue again the acquires the connections taken over were waiting in (once published). */
void server_resume_waits(struct server *s);
/* Stopping for a next life: send what is queued, write every record, then change nothing more. */
void server_quiesce(struct server *s);
/* A take-over's channel is readable or writable (events), or its deadline came (events 0). */
void server_takeover_event(struct server *s, uint32_t events, uint64_t now);
/* The channel to the previous life is readable: is this life the main process now? */
void server_prev_life_event(struct server *s);
/* Give up a take-over being prepared (the daemon stops). */
void server_takeover_cancel(struct server *s);

/* --- the services: one handler per request type ------------------------------------------ */

/* A handler gets a request proto_parse_request accepted; < 0 closes the connection. */
#define HANDLER_DECLARE(name, value, member, ...) \
	int handle_##member(struct server *s, struct peer *p, const union proto_request *req);
PROTO_REQUESTS(HANDLER_DECLARE)
#undef HANDLER_DECLARE

/* svc_lease.c: the lease table's callbacks (server_open passes them), and the recycler's. */
extern const struct lease_ops svc_lease_ops;
void svc_lease_renewed(struct pool_buffer *b, int err, void *ud);

#endif
