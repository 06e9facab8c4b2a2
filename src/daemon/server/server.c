/* SPDX-License-Identifier: MIT */
/*
 * server.c - see server.h; server_internal.h says how the server's files divide the work.
 *
 * This file: the listening socket (bound under the right umask and group, fds refused at the
 * socket where the kernel can), accepting connections (limits, an out-of-fds reserve), the
 * hello that opens a connection, and the event loop (a connection's life is peer_life.c's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "closer.h"
#include "fdstore.h"
#include "log.h"
#include "reexec.h"
#include "safedir.h"
#include "server.h"
#include "server_internal.h"
#include "util.h"

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83 /* Linux 6.16: refuse SCM_RIGHTS sent to this socket (inherited at accept) */
#endif

/* epoll data for the fixed fds; peers use their own pointer */
static int tag_listen, tag_signal, tag_recycler;

int handle_hello(struct server *s, struct peer *p, const union proto_request *req)
{
	const struct proto_hello *h = &req->hello;
	struct proto_welcome w = { .version = p->hdr.version, .nclasses = s->pool->nclasses,
				   .page_size = s->pool->page_size };

	if (p->welcomed)
		return -EPROTO;
	/* informative only: keep what is printable */
	for (size_t i = 0; i < sizeof(p->name) - 1 && h->name[i]; i++)
		p->name[i] = (h->name[i] >= 0x20 && h->name[i] < 0x7f) ? h->name[i] : '?';
	proto_set_name(w.daemon_version, sizeof(w.daemon_version), VERSION_STRING);
	p->welcomed = true;
	p->version = p->hdr.version;
	peer_note(p, true); /* its name and version, whatever state the record is in */
	peer_send(p, PROTO_WELCOME, &w, sizeof(w), NULL, 0);
	log_debug("Connection %u is pid %d (uid %u, \"%s\")", p->id, (int)p->owner.pid, (unsigned)p->owner.uid,
		  p->name);
	return 0;
}

int server_admit(struct server *s, const struct ucred *cred, char *text, size_t len)
{
	unsigned pending;

	if (s->npeers >= s->cfg->max_connections) {
		s->counted.refused_max_connections++;
		snprintf(text, len, "the daemon already serves %u connections (max_connections)", s->cfg->max_connections);
		return -EUSERS;
	}
	if (!s->fds_refused && (pending = closer_pending(cred->uid)) > CLOSER_PENDING_MAX) {
		s->counted.refused_pending_closes++;
		snprintf(text, len, "uid %u has %u fds it passed (or connections) still waiting to be closed",
			 (unsigned)cred->uid, pending);
		return -EUSERS;
	}
	if (lease_owner_admit(s->leases, cred->uid, text, len) < 0) {
		s->counted.refused_max_connections_per_uid++;
		return -EUSERS;
	}
	return 0;
}

/*
 * Close a connection the daemon never admitted. Where the kernel cannot refuse fds at the socket,
 * its client may have sent some before its hello, and closing it would release them here, on the
 * loop (closer.h): it is shut first, so that its client can add nothing more, and closed on the
 * closer's threads, charged to uid.
 */
void server_unadmitted_close(const struct server *s, int fd, uid_t uid)
{
	if (s->fds_refused) {
		close(fd);
		return;
	}
	(void)shutdown(fd, SHUT_RDWR);
	closer_add(&fd, 1, uid);
}

/*
 * Tell a connection that is not admitted why (the client reads it as the answer to its hello)
 * and close it: one non-blocking send into its empty socket buffer, no peer, nothing counted.
 */
static void refuse(const struct server *s, int fd, uid_t uid, int err, const char *text)
{
	struct {
		struct proto_hdr h;
		struct proto_result r;
		char text[PROTO_TEXT_MAX];
	} m;
	size_t n = strnlen(text, PROTO_TEXT_MAX);

	m.r = (struct proto_result){ .err = err, .text_len = (uint32_t)n };
	memcpy(m.text, text, n);
	proto_hdr_init(&m.h, PROTO_RESULT, (uint32_t)(sizeof(m.r) + n), 0);
	(void)send(fd, &m, sizeof(m.h) + sizeof(m.r) + n, MSG_DONTWAIT | MSG_NOSIGNAL);
	server_unadmitted_close(s, fd, uid);
}

static void accept_one(struct server *s, int fd)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(5, 10);
	char text[PROTO_TEXT_MAX];
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct peer *p;
	int r;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_error_errno(errno, "Failed to set up a new connection: %m");
		server_unadmitted_close(s, fd, (uid_t)-1);
		return;
	}
	r = server_admit(s, &cred, text, sizeof(text));
	if (r < 0) {
		log_msg_ratelimited(&rl, LOG_NOTICE, "Refusing connection of pid %d (uid %u): %s", (int)cred.pid,
				    (unsigned)cred.uid, text);
		refuse(s, fd, cred.uid, r, text);
		return;
	}
	p = peer_new(s, fd, &cred, realtime_ns(), true);
	if (!p)
		return;
	p->conn_id = warm_new_id();
	peer_keep(s, p);
}

#define LISTEN_PAUSE_NS (100 * 1000000ull) /* out of fds and no reserve: poll the listener later */

/*
 * Out of fds (EMFILE, ENFILE): a pending connection keeps the listener readable, so the loop
 * would spin on it. Spend the reserve fd to accept it and close it at once (the client sees its
 * connection end), take the reserve back, and say so in the log a few times a minute at most.
 * Without a reserve, stop polling the listener for a moment; the reserve is taken back once an
 * fd is free (a connection closed on the closer's threads keeps its fd until then).
 */
static bool accept_out_of_fds(struct server *s, int err)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 3);
	int fd;

	log_msg_ratelimited(&rl, LOG_ERR, "Cannot accept connections: %s; closing new ones until fds are free",
			    strerror(err));
	if (s->reserve_fd < 0)
		s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (s->reserve_fd >= 0) {
		close(s->reserve_fd);
		fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			struct ucred cred = { .uid = (uid_t)-1 };
			socklen_t len = sizeof(cred);

			(void)getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
			server_unadmitted_close(s, fd, cred.uid);
			s->counted.refused_out_of_fds++;
		}
		s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && s->reserve_fd >= 0)
			return true;
	}
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->listen_fd, NULL) == 0)
		s->listen_paused_until = now_ns() + LISTEN_PAUSE_NS;
	return false;
}

/*
 * At most this many connections are accepted per turn of the event loop: a uid that connects in
 * a loop must not keep the loop from its clients' requests (the listener stays readable, so the
 * rest come on the next turn).
 */
#define ACCEPTS_PER_TURN 64

static void accept_some(struct server *s)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 3);

	for (unsigned n = 0; n < ACCEPTS_PER_TURN; n++) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && accept_out_of_fds(s, errno))
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EMFILE && errno != ENFILE)
				log_msg_ratelimited(&rl, LOG_ERR, "Failed to accept a connection: %m");
			return;
		}
		accept_one(s, fd);
	}
}

/* --- socket and loop -------------------------------------------------------------------- */

/*
 * gid: the socket's group (resolve_access looked socket_group up), (gid_t)-1 = leave it. The
 * socket's directory is checked first (safedir.h): nobody else may replace it or one on the way,
 * so the path leads where it says while the daemon replaces a stale socket there, binds and
 * gives the socket its group, as root too.
 */
static int socket_bind(const struct config *cfg, gid_t gid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1, dir = -1;
	char dirpath[sizeof(cfg->socket_path)], why[PATH_MAX + 160];
	const char *name = strrchr(cfg->socket_path, '/') + 1; /* config.c: absolute */
	struct stat st;
	mode_t old;

	snprintf(dirpath, sizeof(dirpath), "%.*s", (int)(name - cfg->socket_path), cfg->socket_path);
	dir = safedir_open(dirpath, 0, why, sizeof(why));
	if (dir < 0)
		return log_error_errno(dir, "Refusing the socket path '%s': %s", cfg->socket_path, why);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", cfg->socket_path);
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		_cleanup_close_ int probe = -1;

		if (!S_ISSOCK(st.st_mode))
			return log_error_errno(-EEXIST, "Socket path '%s' exists and is not a socket; refusing to replace it",
					       cfg->socket_path);
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return log_error_errno(-EADDRINUSE, "Another hugepoold is already listening on '%s'",
					       cfg->socket_path);
		/* a stale socket from a daemon that died */
		unlinkat(dir, name, 0);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_error_errno(errno, "Failed to create a Unix socket: %m");
	/*
	 * Bind under the umask that gives the socket exactly socket_mode: it is created with its
	 * final permissions, and never chmod-ed by path afterwards.
	 */
	old = umask(~cfg->socket_mode & 0777);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		umask(old);
		return log_error_errno(e, "Failed to bind '%s': %m", cfg->socket_path);
	}
	umask(old);
	/* AT_SYMLINK_NOFOLLOW: if the name is no longer our socket, change no other file. The
	 * socket already has our own group: no chown then, which the unit's system call filter
	 * (~@privileged) would refuse. */
	if (gid != (gid_t)-1 && gid != getegid() && fchownat(dir, name, (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) < 0) {
		int e = errno;

		unlinkat(dir, name, 0);
		return log_error_errno(e, "Failed to give socket '%s' to group '%s': %m", cfg->socket_path,
				       cfg->socket_group);
	}
	if (listen(fd, 512) < 0) {
		int e = errno;

		unlinkat(dir, name, 0);
		return log_error_errno(e, "Failed to set up socket '%s': %m", cfg->socket_path);
	}
	return TAKE_FD(fd);
}

/*
 * Clients never send fds. Where the kernel can refuse them at the socket (SO_PASSRIGHTS,
 * Linux 6.16+; accepted sockets inherit it from the listener), a client's sendmsg with
 * SCM_RIGHTS fails with EPERM and nothing reaches the daemon. Elsewhere fds that arrive are
 * closed off the event loop (closer.h).
 */
static bool refuse_passed_fds(int listen_fd)
{
	int zero = 0;

	if (setsockopt(listen_fd, SOL_SOCKET, SO_PASSRIGHTS, &zero, sizeof(zero)) == 0)
		return true;
	log_notice("This kernel cannot refuse fds at the socket (SO_PASSRIGHTS: %m; Linux 6.16+ can); "
		   "fds clients send, and the connections themselves, are closed on background threads");
	return false;
}

/*
 * Every name the configuration gives a user or group by, to ids, once and before the socket
 * exists: socket_group, admin_group, monitor_group, every journal's access lists (an unset one
 * is the socket's group). A name that does not exist is an error here, not a surprise later.
 */
static int resolve_access(struct server *s)
{
	const struct config *cfg = s->cfg;
	char err[128];

	s->socket_gid = getegid();
	if (cfg->socket_group[0]) {
		struct group *g = getgrnam(cfg->socket_group);

		if (!g)
			return log_error_errno(-EINVAL, "Failed to give socket '%s' to group '%s': no such group",
					       cfg->socket_path, cfg->socket_group);
		s->socket_gid = g->gr_gid;
	}
	if (cfg->admin_group[0]) {
		struct group *g = getgrnam(cfg->admin_group);

		if (!g)
			return log_error_errno(-EINVAL, "admin_group '%s' does not exist", cfg->admin_group);
		s->admin_gid = g->gr_gid;
		s->have_admin_gid = true;
	}
	if (cfg->monitor_group[0]) {
		struct group *g = getgrnam(cfg->monitor_group);

		if (!g)
			return log_error_errno(-EINVAL, "monitor_group '%s' does not exist", cfg->monitor_group);
		s->monitor_gid = g->gr_gid;
		s->have_monitor_gid = true;
	}
	/* every configured journal's, also where they are opened later (a take-over) */
	s->jaccess = calloc(cfg->njournals ? cfg->njournals : 1, sizeof(*s->jaccess));
	if (!s->jaccess)
		return log_oom("the journals' access lists");
	for (unsigned i = 0; i < cfg->njournals; i++)
		for (unsigned op = 0; op < JOURNAL_OPS; op++)
			if (access_list_resolve(&cfg->journals[i].access[op], s->socket_gid, &s->jaccess[i][op], err,
						sizeof(err)) < 0)
				return log_error_errno(-EINVAL, "Journal '%s' (line %u): %s", cfg->journals[i].name,
						       cfg->journals[i].line, err);
	return 0;
}

/*
 * monitor_group may connect without being in the socket's group (access.h): an ACL entry on the
 * socket, set at every start (a previous life's, or one monitor_group no longer names, is
 * replaced). Without it the daemon serves on, and members outside the socket's group cannot
 * connect, as before monitor_group could.
 */
static void grant_monitor(const struct server *s)
{
	const struct config *cfg = s->cfg;
	int r = access_socket_grant(cfg->socket_path, cfg->socket_mode, s->have_monitor_gid ? &s->monitor_gid : NULL);

	if (r < 0 && s->have_monitor_gid)
		log_warning_errno(r, "Cannot let monitor_group '%s' connect to '%s' (a POSIX ACL entry: %m); only its members "
				     "in the socket's group can, ignoring",
				  cfg->monitor_group, cfg->socket_path);
}

static int epoll_add_tag(int epfd, int fd, int *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int server_open(const struct config *cfg, struct pool *pool, struct journal **journals, unsigned njournals,
		struct spill *spill, struct warm *warm, struct server_handover *h, struct server **ret)
{
	struct lease_limits lim = { .max_bytes_per_uid = cfg->max_bytes_per_uid,
				    .max_connections_per_uid = cfg->max_connections_per_uid };
	struct server *s = calloc(1, sizeof(*s));
	sigset_t mask;
	int r;

	if (!s)
		return log_oom("the server");
	s->cfg = cfg;
	s->pool = pool;
	s->journals = journals;
	s->njournals = njournals;
	s->spill = spill;
	s->warm = warm;
	spill_set_warm(spill, warm);
	s->listen_fd = s->epoll_fd = s->signal_fd = s->reserve_fd = s->restart_fd = -1;
	s->next.chan = s->next.state_fd = s->prev_life.chan = -1;
	s->next.back_pair[0] = s->next.back_pair[1] = s->next.pidfd = -1;
	s->started_rt = realtime_ns();
	TAILQ_INIT(&s->peers);
	r = lease_table_new(pool, &lim, &svc_lease_ops, s, &s->leases);
	if (r < 0) {
		log_error_errno(r, "Failed to create the lease table: %m");
		goto fail;
	}
	r = recycler_start(pool, &s->recycler);
	if (r < 0) {
		log_error_errno(r, "Failed to start the recycler thread: %m");
		goto fail;
	}
	/* SIGTERM and SIGINT arrive as events; they were blocked by main before any thread started */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR2);
	s->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (s->signal_fd < 0 || s->epoll_fd < 0) {
		r = log_error_errno(errno, "Failed to set up the event loop: %m");
		goto fail;
	}
	r = resolve_access(s);
	if (r < 0)
		goto fail;
	s->listen_fd = server_socket_adopt(cfg, cfg->socket_group[0] ? s->socket_gid : (gid_t)-1, h ? h->listen_fd : -1);
	if (s->listen_fd < 0) {
		r = socket_bind(cfg, cfg->socket_group[0] ? s->socket_gid : (gid_t)-1);
		if (r < 0)
			goto fail;
		s->listen_fd = r;
	}
	grant_monitor(s);
	/* kept across a restart only where a service manager keeps it (re-execution needs no
	 * manager: the same process holds it) */
	s->listen_kept = fdstore_add("listen", s->listen_fd, 0) == 0 && getenv("NOTIFY_SOCKET");
	s->fds_refused = refuse_passed_fds(s->listen_fd);
	s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if ((r = epoll_add_tag(s->epoll_fd, s->listen_fd, &tag_listen)) < 0 ||
	    (r = epoll_add_tag(s->epoll_fd, s->signal_fd, &tag_signal)) < 0 ||
	    (r = epoll_add_tag(s->epoll_fd, recycler_fd(s->recycler), &tag_recycler)) < 0) {
		log_error_errno(r, "Failed to set up the event loop: %m");
		goto fail;
	}
	if (h)
		server_adopt_conns(s, h);
	/* the records say everything taken over: a next life reads this state from now on, and
	 * nothing has been sent to a client before (a grant a crash could leave unrecorded); a
	 * take-over's next life does this once it has taken over (server_takeover_finish) */
	if (s->warm && !(h && h->prepare))
		warm_publish(s->warm);
	if (h && !h->prepare)
		server_resume_waits(s);
	log_info("Listening on '%s' (mode %04o)", cfg->socket_path, (unsigned)cfg->socket_mode);
	if ((cfg->socket_mode & 0002) && (!cfg->max_bytes_per_uid || !cfg->spill_max_bytes_per_uid))
		log_notice("Every user of this machine may connect (socket_mode %04o), and %s is 0 (no limit): "
			   "one user can take all of it from everyone else",
			   (unsigned)cfg->socket_mode,
			   !cfg->max_bytes_per_uid ? (!cfg->spill_max_bytes_per_uid ? "max_bytes_per_uid (the pool) and "
										       "spill_max_bytes_per_uid (spill_max_bytes)"
										     : "max_bytes_per_uid (the pool)")
						   : "spill_max_bytes_per_uid (spill_max_bytes)");
	*ret = s;
	return 0;
fail:
	server_free(s);
	return r;
}

#define CLOSER_HOLD_MS 100 /* what a re-execution waits at most for a close under way (server_leave) */

/* Destroy the peers marked dead: a walk of every connection, only in a turn where one died. */
static void reap(struct server *s)
{
	struct peer *p, *next;

	for (p = TAILQ_FIRST(&s->peers); p && s->ndead; p = next) {
		next = TAILQ_NEXT(p, link);
		if (p->dead)
			peer_destroy(s, p);
	}
}

int server_run(struct server *s)
{
	struct epoll_event evs[64];

	while (!s->stop) {
		uint64_t now = now_ns();
		uint64_t deadline = MIN(lease_next_deadline(s->leases), spill_audit(s->spill, now, false));
		int timeout = -1, n;

		if (now >= fdstore_due())
			fdstore_flush(now, false);
		deadline = MIN(deadline, fdstore_due());
		if (now >= reexec_check_deadline())
			server_restart_checked(s, now); /* given up: it took too long */
		deadline = MIN(deadline, reexec_check_deadline());
		if (s->next.chan >= 0 && now >= MIN(s->next.deadline, s->next.idle_until))
			server_takeover_event(s, 0, now);
		if (s->next.chan >= 0)
			deadline = MIN(deadline, MIN(s->next.deadline, s->next.idle_until));
		deadline = MIN(deadline, reexec_reap(now));

		if (s->listen_paused_until && now >= s->listen_paused_until) {
			s->listen_paused_until = 0;
			if (epoll_add_tag(s->epoll_fd, s->listen_fd, &tag_listen) < 0)
				log_error("Failed to poll the listening socket again: %m");
		}
		if (s->listen_paused_until)
			deadline = MIN(deadline, s->listen_paused_until);

		if (deadline != UINT64_MAX)
			timeout = deadline <= now ? 0 : (int)MIN((deadline - now + 999999) / 1000000, (uint64_t)INT32_MAX);
		n = epoll_wait(s->epoll_fd, evs, ARRAY_SIZE(evs), timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return log_error_errno(errno, "epoll_wait failed: %m");
		}
		for (int i = 0; i < n && !s->stop; i++) {
			void *tag = evs[i].data.ptr;

			if (tag == &tag_listen) {
				accept_some(s);
			} else if (tag == &tag_signal) {
				struct signalfd_siginfo si;

				if (read(s->signal_fd, &si, sizeof(si)) != sizeof(si))
					continue;
				if (si.ssi_signo == SIGUSR2) {
					char why[PROTO_TEXT_MAX];

					if (server_restart_check(s, 0, why, sizeof(why)) < 0)
						log_error("Received %s, not re-executing: %s", strsignal((int)si.ssi_signo),
							  why);
					else
						log_info("Received %s: checking '%s' to re-execute it",
							 strsignal((int)si.ssi_signo), reexec_path());
					continue;
				}
				log_info("Received %s, shutting down", strsignal((int)si.ssi_signo));
				s->stop = true;
			} else if (tag == &s->restart_fd) {
				server_restart_checked(s, now_ns());
			} else if (tag == &s->next.chan) {
				server_takeover_event(s, evs[i].events, now_ns());
			} else if (tag == &s->prev_life.chan) {
				server_prev_life_event(s);
			} else if (tag == &tag_recycler) {
				recycler_collect(s->recycler, svc_lease_renewed, s);
			} else {
				struct peer *p = tag;

				if (evs[i].events & EPOLLOUT)
					peer_flush(p);
				if (p->paused && (evs[i].events & (EPOLLHUP | EPOLLERR)))
					peer_mark_dead(p); /* gone, with replies it will never read */
				else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
					peer_read(s, p);
			}
		}
		lease_expire(s->leases, now_ns());
		reap(s);
	}
	s->stopped_ns = now_ns();
	/* the journals' flushers write what they took and mark their ends while this stop goes on
	 * (journal_stop_begin); a take-over's next life reads the marker at once: no sync */
	for (unsigned i = 0; i < s->njournals; i++)
		journal_stop_begin(s->journals[i], s->takeover);
	server_quiesce(s);
	if (s->reexec || s->takeover)
		s->listen_kept = true; /* the next life serves it, at the same path */
	return s->takeover ? SERVER_TAKEOVER : s->reexec ? SERVER_REEXEC : 0;
}

void server_drop_writers(struct server *s)
{
	struct peer *p;

	TAILQ_FOREACH(p, &s->peers, link) {
		for (unsigned i = 0; i < p->nwriters; i++)
			journal_writer_close(p->writers[i].w);
		p->nwriters = 0;
	}
}

uint64_t server_stopped_at(const struct server *s)
{
	return s->stopped_ns;
}

void server_leave(struct server *s, bool exec)
{
	reexec_check_cancel();
	server_takeover_cancel(s);
	server_drop_writers(s);
	if (exec)
		closer_hold(CLOSER_HOLD_MS);
	if (s->listen_fd >= 0 && !s->listen_kept)
		unlink(s->cfg->socket_path);
	s->listen_kept = true; /* unlinked once: server_free, after a failed exec, does not again */
}

void server_free(struct server *s)
{
	struct peer *p;

	if (!s)
		return;
	reexec_check_cancel(); /* stopped while a restart was checked */
	server_takeover_cancel(s); /* ... or prepared */
	if (s->prev_life.chan >= 0)
		close(s->prev_life.chan);
	if (s->prev_life.fds)
		fdstore_received_free(s->prev_life.fds, s->prev_life.nfds);
	free(s->parked);
	if (s->next.state_fd >= 0)
		close(s->next.state_fd);
	while ((p = TAILQ_FIRST(&s->peers)))
		peer_destroy(s, p);
	/* stop the recycler before the lease table: it may still hold a buffer */
	recycler_stop(s->recycler);
	lease_table_free(s->leases);
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		if (!s->listen_kept)
			unlink(s->cfg->socket_path);
	}
	if (s->signal_fd >= 0)
		close(s->signal_fd);
	if (s->reserve_fd >= 0)
		close(s->reserve_fd);
	free(s->jaccess);
	closer_stop();
	if (s->epoll_fd >= 0)
		close(s->epoll_fd);
	free(s);
}
