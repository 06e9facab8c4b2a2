/* SPDX-License-Identifier: MIT */
/*
 * server_warm.c - the server's side of a warm restart (hugepoold(8), WARM RESTART; the design is
 * in docs/ARCHITECTURE.md): keeping each connection in the fd store with its record, stopping
 * for a next life (quiesce), taking over the listening socket and the connections a previous
 * life left, and the restart request that re-executes the daemon.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <signal.h>
#include <sys/wait.h>

#include "fdstore.h"
#include "log.h"
#include "notify.h"
#include "reexec.h"
#include "server_internal.h"
#include "takeover.h"
#include "util.h"

#define TAKEOVER_PREPARE_MS 120000 /* how long the next life may prepare (a pool to fault included) */
#define TAKEOVER_GO_MS 60000 /* ... and take over (its journals to recover included) */
/* a next life preparing idle for longer is starved by a busy machine: the daemon's priority then */
#define TAKEOVER_IDLE_MS 1000
#define BACK_TAKEN_MS 5000 /* how long a next life may take to take up handing the service back */

/*
 * Restart: start checking that it can happen (reexec.h) while the daemon goes on serving; the
 * answer comes when the check ends (server_restart_checked). Admins only: it pauses every client.
 */
int handle_restart(struct server *s, struct peer *p, const union proto_request *req)
{
	char text[PROTO_TEXT_MAX];
	int r;

	(void)req;
	if (p->version < 4)
		return -EPROTO; /* not a request of its protocol version */
	if (!p->admin) {
		send_result(p, -EPERM, "restarting the daemon is for root, the daemon's user and admin_group");
		return 0;
	}
	r = server_restart_check(s, p->id, text, sizeof(text));
	if (r < 0) {
		log_error("Refusing the restart asked by pid %d (uid %u): %s", (int)p->owner.pid,
			  (unsigned)p->owner.uid, text);
		send_result(p, r, text);
		return 0;
	}
	log_info("Restart asked by pid %d (uid %u): checking '%s'", (int)p->owner.pid, (unsigned)p->owner.uid,
		 reexec_path());
	p->busy = true; /* answered once the check ends */
	return 0;
}

/*
 * How a restart goes (hugepoold.conf(5), restart): a take-over, where a manager follows MAINPID=
 * (restart = auto); with the pid kept, two take-overs, the next life handing the service back
 * to this process (exec, or auto, without a manager); or the old way (reexec.h), exec under a
 * manager, whose fd store and MAINPID= only the main process may speak to, which the life
 * handing back is not. A pid namespace's first process (a container's init) keeps its pid
 * whatever the mode says: its exit ends the namespace, killing the next life with it, so auto
 * does not take over there and takeover is refused (RESTART_WAY_NONE).
 */
enum restart_way { RESTART_WAY_TAKEOVER, RESTART_WAY_BACK, RESTART_WAY_REEXEC, RESTART_WAY_NONE };

static enum restart_way restart_way(const struct server *s)
{
	bool manager = getenv("NOTIFY_SOCKET"), init = getpid() == 1;

	if (s->cfg->restart == RESTART_TAKEOVER)
		return init ? RESTART_WAY_NONE : RESTART_WAY_TAKEOVER;
	if (s->cfg->restart == RESTART_AUTO && manager && !init)
		return RESTART_WAY_TAKEOVER;
	return manager ? RESTART_WAY_REEXEC : RESTART_WAY_BACK;
}

static void next_reap(struct server *s, bool kill_it, char *text, size_t len);
static void next_close(struct server *s);
static void peer_unadopt(struct server *s, struct server_handover *h, struct peer *p);

/*
 * Start the next life beside this one (takeover.h): it prepares while this one serves; back: it
 * hands the service back to this process once it has it.
 */
static int takeover_start(struct server *s, bool back, char *text, size_t len)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = &s->next.chan };
	struct takeover_child *child;
	int exe, chan, nice, pair[2] = { -1, -1 };

	if (s->next.chan >= 0) {
		snprintf(text, len, "a restart is being prepared already");
		return -EBUSY;
	}
	exe = reexec_open_next(text, len);
	if (exe < 0)
		return exe;
	/* the channel the service comes back on: made while nothing has stopped, as every fd the
	 * steps after the stop need */
	if (back && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
		snprintf(text, len, "cannot make the channel to take the service back on: %s", strerror(errno));
		return -errno;
	}
	fdstore_handover_begin();
	/* a take-over happens under a manager only where restart_way says, never as pid 1: the
	 * manager's child; handing the service back (no manager) spawns this life's own */
	chan = takeover_spawn(exe, reexec_args(), !back && getenv("NOTIFY_SOCKET"), &child, &nice, text, len);
	if (chan < 0) {
		fdstore_handover_end();
		if (back) {
			close(pair[0]);
			close(pair[1]);
		}
		return chan;
	}
	s->next = (typeof(s->next)){ .chan = chan, .child = child, .deadline = now_ns() + TAKEOVER_PREPARE_MS * 1000000ull,
				     .idle_until = nice == TAKEOVER_NICE_NONE ? UINT64_MAX : now_ns() + TAKEOVER_IDLE_MS * 1000000ull,
				     .nice = nice, .state_fd = -1, .back = back, .back_pair = { pair[0], pair[1] }, .pidfd = -1 };
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, chan, &ev) < 0) {
		snprintf(text, len, "cannot wait for the next life: %s", strerror(errno));
		next_reap(s, true, NULL, 0);
		next_close(s);
		return -EIO;
	}
	return 0;
}

int server_restart_check(struct server *s, unsigned peer_id, char *text, size_t len)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->restart_fd };
	enum restart_way way;
	int fd;

	/* the life before may still ask for the service back (BACK) */
	if (s->prev_life.chan >= 0) {
		snprintf(text, len, "this life is still taking over from the one before it");
		return -EBUSY;
	}
	way = restart_way(s);
	if (way == RESTART_WAY_NONE) {
		snprintf(text, len, "restart = takeover cannot restart this daemon: it is its pid namespace's first process, "
			 "whose exit would end the namespace and the next life with it (restart = exec or auto keeps the pid)");
		return -EINVAL;
	}
	if (way != RESTART_WAY_REEXEC) {
		fd = takeover_start(s, way == RESTART_WAY_BACK, text, len);
		if (fd < 0)
			return fd;
		s->restart_peer = peer_id;
		return 0;
	}
	fd = reexec_check_start(text, len);
	if (fd < 0)
		return fd;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		reexec_check_cancel();
		snprintf(text, len, "cannot wait for the check: %s", strerror(errno));
		return -EIO;
	}
	s->restart_fd = fd;
	s->restart_peer = peer_id;
	return 0;
}

/* The connection that asked for the restart, if it is still there. */
static struct peer *restart_asker(struct server *s)
{
	struct peer *p;

	TAILQ_FOREACH(p, &s->peers, link)
		if (s->restart_peer && p->id == s->restart_peer && !p->dead)
			return p;
	return NULL;
}

void server_restart_checked(struct server *s, uint64_t now)
{
	char text[PROTO_TEXT_MAX];
	int r = reexec_check_poll(now, text, sizeof(text));
	struct peer *p;

	if (r == -EINPROGRESS)
		return;
	s->restart_fd = -1; /* closed, and so out of the epoll set */
	p = restart_asker(s);
	if (r < 0) {
		log_error("Refusing the restart: %s", text);
		if (p)
			send_result(p, r, text);
		return;
	}
	log_info("Restart checked: re-executing '%s'", reexec_path());
	if (p)
		send_result(p, 0, NULL);
	s->stop = true;
	s->reexec = true;
}

/* --- a restart by take-over, this life's side ------------------------------------------- */

/* The next life once spawned (its pid; else a negative errno, why in text), or 0 when long gone. */
static pid_t next_pid(struct server *s, char *text, size_t len)
{
	char why[PROTO_TEXT_MAX];

	if (!s->next.child)
		return s->next.pid;
	s->next.pid = takeover_child_pid(s->next.child, text ? text : why, text ? len : sizeof(why));
	if (s->next.pid > 0)
		s->next.pidfd = takeover_child_pidfd(s->next.child);
	takeover_child_free(s->next.child);
	s->next.child = NULL;
	return s->next.pid;
}

/* The next life is gone, or to be: reap it; what became of it, for a refusal, in text. */
static void next_reap(struct server *s, bool kill_it, char *text, size_t len)
{
	pid_t pid = next_pid(s, text, len), r;
	bool managers = s->next.pidfd >= 0 && !s->next.coming_back;
	int status = 0, pidfd = TAKE_FD(s->next.pidfd);

	s->next.pid = 0;
	/* the daemon's own process, coming back, and the manager's child are killed through their
	 * pidfd (not this life's children: a pid may name another process once it ended, and they
	 * are not reaped here) */
	if (pid > 0 && kill_it && pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	else if (pid > 0 && kill_it && !s->next.coming_back)
		kill(pid, SIGKILL);
	if (managers) {
		/* the manager reaps it; its pidfd becomes readable when it has ended */
		struct pollfd end = { .fd = pidfd, .events = POLLIN };

		while (poll(&end, 1, -1) < 0 && errno == EINTR)
			;
		close(pidfd);
		if (text)
			snprintf(text, len, "'%s' (the next life) ended", reexec_path()); /* how: the manager's to know */
		return;
	}
	if (pidfd >= 0)
		close(pidfd);
	if (pid <= 0)
		return; /* never started: text says why */
	while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (r < 0 && text) /* not a child: the daemon's own process, which this life hands back to */
		snprintf(text, len, "the daemon's process (pid %d) ended before it had the service back", (int)pid);
	else if (text && WIFEXITED(status))
		snprintf(text, len, "'%s' (the next life) exited with status %d", reexec_path(), WEXITSTATUS(status));
	else if (text)
		snprintf(text, len, "'%s' (the next life) was killed by signal %d", reexec_path(), WTERMSIG(status));
}

/* The take-over is over here: the channel closed, nothing more recorded for it. */
static void next_close(struct server *s)
{
	if (s->next.chan >= 0) {
		epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->next.chan, NULL);
		close(s->next.chan);
	}
	s->next.chan = -1;
	for (int i = 0; i < 2; i++)
		if (s->next.back_pair[i] >= 0) {
			close(s->next.back_pair[i]);
			s->next.back_pair[i] = -1;
		}
	fdstore_handover_end();
	if (s->warm)
		warm_track_end(s->warm);
}

/* It will not happen: say why, to the log and to whoever asked; this life serves on. */
static void takeover_refuse(struct server *s, int err, const char *text)
{
	struct peer *p = restart_asker(s);

	if (s->next.coming_back)
		log_error("Refusing the restart: %s; pid %d serves on as the daemon", text, (int)getpid());
	else
		log_error("Refusing the restart: %s", text);
	if (p)
		send_result(p, err, text);
	next_close(s);
	if (s->next.state_fd >= 0) {
		char name[WARM_NAME_MAX];

		/* its state is nobody's: out of the store (it was never published) */
		warm_name(WARM_NAME_STATE, s->next.state_id, name);
		fdstore_remove(name);
		close(s->next.state_fd);
		s->next.state_fd = -1;
	}
}

void server_takeover_cancel(struct server *s)
{
	if (s->next.chan < 0)
		return;
	next_reap(s, true, NULL, 0);
	takeover_refuse(s, -ECANCELED, "the daemon stops");
}

/* Prepared: its state goes into the store (this life is the one the manager hears), then stop. */
static void takeover_prepared(struct server *s, int state_fd, uint64_t id)
{
	struct fdstore_handed h = { .fd = state_fd };
	struct peer *p = restart_asker(s);
	int r;

	warm_name(WARM_NAME_STATE, id, h.name);
	/* before anything of the next life can serve: a crash from here on finds it, unpublished
	 * until it has taken over (warm.h), then newer than this life's */
	r = fdstore_add(h.name, state_fd, 0);
	if (r < 0) {
		char text[PROTO_TEXT_MAX];

		close(state_fd);
		snprintf(text, sizeof(text), "cannot keep the next life's state: %s", strerror(-r));
		next_reap(s, true, NULL, 0);
		takeover_refuse(s, r, text);
		return;
	}
	fdstore_handover_given(&h, 1); /* the next life has it: it is its own */
	s->next.state_fd = state_fd;
	s->next.state_id = id;
	log_info("Restart: the next life (pid %d) is prepared; handing over%s", (int)next_pid(s, NULL, 0),
		 s->next.back ? ", for it to hand back to this process" : "");
	if (p && (s->next.back || s->next.coming_back)) {
		/* answered once the service is back with the daemon's process (restart = exec), by
		 * whichever life has it then: the connection is handed over idle meanwhile */
		s->next.asker = p->conn_id;
		p->busy = false;
	} else if (p) {
		send_result(p, 0, NULL);
	}
	s->stop = true;
	s->takeover = true;
}

void server_takeover_event(struct server *s, uint32_t events, uint64_t now)
{
	char text[PROTO_TEXT_MAX], why[TAKEOVER_TEXT_MAX + 1];
	struct takeover_msg m;
	int fds[TAKEOVER_FDS_MAX];
	unsigned nfds;
	int r;

	if (s->next.chan < 0)
		return;
	if (!events && now >= s->next.idle_until) {
		pid_t pid = next_pid(s, NULL, 0);

		s->next.idle_until = UINT64_MAX;
		r = pid > 0 ? takeover_priority(pid, false, s->next.nice) : 0;
		if (r < 0)
			log_warning_errno(r, "The next life (pid %d) has prepared idle for %d s; failed to give it the "
					     "daemon's priority: %m", (int)pid, TAKEOVER_IDLE_MS / 1000);
		else if (pid > 0)
			log_info("The next life (pid %d) has prepared idle for %d s: at the daemon's priority from now on",
				 (int)pid, TAKEOVER_IDLE_MS / 1000);
	}
	if (!events && now >= s->next.deadline) {
		next_reap(s, true, NULL, 0);
		snprintf(text, sizeof(text), "'%s' (the next life) did not prepare in %d s", reexec_path(),
			 TAKEOVER_PREPARE_MS / 1000);
		takeover_refuse(s, -ETIMEDOUT, text);
		return;
	}
	/* what it said first: a datagram sent to a socket whose other end is gone purges what that
	 * end had sent (its last words) */
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		if (s->next.snapshot_sent || !(events & EPOLLOUT))
			return;
		/* a batch a turn: the clients are served in between */
		r = takeover_send_snapshot(s->next.chan, s->warm);
		if (r == 0) {
			struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->next.chan };

			s->next.snapshot_sent = true;
			epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, s->next.chan, &ev);
		} else if (r < 0 && r != -EAGAIN && r != -EPIPE) {
			next_reap(s, true, NULL, 0);
			snprintf(text, sizeof(text), "cannot hand the fds over to the next life: %s", strerror(-r));
			takeover_refuse(s, r, text);
		}
		return;
	}
	r = takeover_recv(s->next.chan, &m, why, sizeof(why) - 1, fds, &nfds, 0);
	if (r == -EAGAIN)
		return;
	if (r >= 0 && m.type == TAKEOVER_PREPARED && nfds == 1) {
		takeover_prepared(s, fds[0], m.arg);
		return;
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	if (r >= 0 && m.type == TAKEOVER_FAILED) {
		why[r] = '\0';
		next_close(s); /* it exits once this end is closed: it waits to be heard */
		next_reap(s, false, text, sizeof(text));
		snprintf(text + strlen(text), sizeof(text) - strlen(text), ": %.*s",
			 (int)(sizeof(text) - strlen(text) - 3), why);
		takeover_refuse(s, -ENOEXEC, text);
		return;
	}
	if (r >= 0 && m.type == TAKEOVER_REFUSED) {
		/* it cannot take this life over (the socket changed): the old way, still checked */
		why[r] = '\0';
		next_close(s); /* it exits once this end is closed */
		next_reap(s, false, NULL, 0);
		r = fdstore_exec_prepare();
		if (r < 0) {
			snprintf(text, sizeof(text), "no fds to spare for a re-execution: %s", strerror(-r));
			takeover_refuse(s, r, text);
			return;
		}
		log_info("Restart: the next life cannot take over (%s); re-executing '%s' in place", why,
			 reexec_path());
		if (restart_asker(s))
			send_result(restart_asker(s), 0, NULL);
		s->stop = true;
		s->reexec = true;
		return;
	}
	/* gone (or speaking nonsense) before it was prepared */
	next_reap(s, true, text, sizeof(text));
	takeover_refuse(s, r < 0 ? r : -EBADMSG, text);
}

/*
 * Taken over, for the next life to hand the service back (restart = exec): BACK with a new
 * channel's end. 0 and this end in *ret_chan, the nice to come back to in *ret_nice; or a
 * negative errno.
 */
static int takeover_ask_back(struct server *s, int nice, int *ret_chan, int *ret_nice)
{
	struct takeover_back back = { .asker = s->next.asker, .pid = getpid(), .nice = nice };
	int r = takeover_send_back(s->next.chan, &back, s->next.back_pair[1]);

	if (r < 0)
		return r;
	/* theirs is in flight, or theirs: this copy closed, so that their close shows here */
	close(TAKE_FD(s->next.back_pair[1]));
	*ret_chan = TAKE_FD(s->next.back_pair[0]);
	*ret_nice = back.nice;
	return 0;
}

int server_takeover_go(struct server *s, bool die_after_go, pid_t *ret_pid, int *ret_back, int *ret_nice, char *why,
		       size_t len)
{
	struct takeover_msg m;
	int fds[TAKEOVER_FDS_MAX];
	char text[TAKEOVER_TEXT_MAX + 1];
	unsigned nfds;
	int r;

	r = takeover_send_go(s->next.chan, s->warm, s->stopped_ns);
	if (r == 0 && die_after_go)
		raise(SIGKILL);
	if (r == 0)
		r = takeover_recv(s->next.chan, &m, text, sizeof(text) - 1, fds, &nfds, TAKEOVER_GO_MS);
	if (r >= 0) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		text[r] = '\0';
	}
	if (r >= 0 && m.type == TAKEOVER_TAKEN) {
		pid_t pid = next_pid(s, NULL, 0);

		*ret_pid = pid;
		*ret_back = -1;
		/*
		 * This life's CPU is the next life's from here on. A message to it wakes it on this
		 * CPU (the kernel expects a waker that sends to sleep), where this life's exec or exit
		 * (milliseconds in the kernel, closing thousands of fds, not preempted there) would
		 * hold it while the other CPU idles: so this life goes idle first, and the next life
		 * takes the CPU as soon as it wants it.
		 */
		if (s->next.back) {
			int nice = takeover_back_nice();

			/* only where it can come back: the process it becomes must serve at the
			 * daemon's priority */
			if (nice != TAKEOVER_NICE_NONE)
				(void)takeover_priority(0, true, 0);
			r = takeover_ask_back(s, nice, ret_back, ret_nice);
			/* once it has taken the channel up, this process may become the one it hands
			 * the service to: not before, when it could still die with the service (a
			 * failed send is looked at as the channel's end: a death, or a refusal) */
			r = takeover_back_taken(r == 0 ? *ret_back : -1, pid, BACK_TAKEN_MS);
			if (r == 0) {
				/* this process's child, which ends once it handed the service back: reaped
				 * by the image of this process that has it back (reexec_reap) */
				reexec_reap_add(pid);
				s->next.pid = 0;
				next_close(s);
				return 0;
			}
			if (*ret_back >= 0)
				close(*ret_back);
			*ret_back = -1;
			if (r == -ECHILD) {
				/* this life still holds every fd: in place, the newest published state,
				 * at the daemon's priority */
				if (nice != TAKEOVER_NICE_NONE)
					(void)takeover_priority(0, false, nice);
				s->next.pid = 0;
				next_close(s);
				snprintf(why, len, "the next life (pid %d) ended before it could hand the service back",
					 (int)pid);
				(void)fdstore_exec_prepare();
				return -EXDEV;
			}
			log_error("The next life (pid %d) did not take up handing the service back%s; it serves on as the "
				  "daemon",
				  (int)pid, r == -ETIMEDOUT ? " in time" : "");
			(void)takeover_priority(0, true, 0); /* it ends: its teardown on what CPU is left */
			s->next.pid = 0;
			next_close(s);
			return 0;
		}
		/* the manager follows it, then it may speak to the manager itself; no wait for this
		 * life's own end: it is not the main process any more */
		if (getenv("NOTIFY_SOCKET")) {
			notify_sendf("RELOADING=1\nSTATUS=Taken over by pid %d\nMAINPID=%d", (int)pid, (int)pid);
			(void)fdstore_barrier(5000);
		}
		(void)takeover_priority(0, true, 0); /* it ends: its teardown on what CPU is left */
		(void)takeover_send(s->next.chan, TAKEOVER_MAIN, s->next.asker, NULL, -1);
		s->next.pid = 0; /* not reaped here: it outlives this life */
		if (s->next.pidfd >= 0)
			close(TAKE_FD(s->next.pidfd));
		next_close(s);
		return 0;
	}
	if (r >= 0 && m.type == TAKEOVER_REFUSED && s->next.coming_back)
		snprintf(why, len, "the daemon's process (pid %d) refused to take the service back (%s), and pid %d "
			 "goes on as the daemon", (int)s->next.pid, text, (int)getpid());
	else if (r >= 0 && m.type == TAKEOVER_REFUSED)
		snprintf(why, len, "the next life refused to take over: %s", text);
	else if (r == -EAGAIN)
		snprintf(why, len, "the next life did not take over in %d s", TAKEOVER_GO_MS / 1000);
	else
		snprintf(why, len, "the next life went away before it took over");
	next_close(s); /* a refusing one exits once this end is closed; any other is killed */
	next_reap(s, !(r >= 0 && m.type == TAKEOVER_REFUSED), NULL, 0);
	/* the old way: this life's table (with the next life's state, published or not) in place;
	 * stopped, it cannot refuse any more: without spare fds the exec tries with what it finds */
	(void)fdstore_exec_prepare();
	return -EXDEV;
}

/*
 * Does a socket's st_mode say socket_mode? Its group bits may show the mask of the ACL that lets
 * monitor_group in (access_socket_grant), which adds read-write; the ACL is set again after.
 */
static bool socket_mode_is(mode_t st_mode, mode_t socket_mode)
{
	mode_t m = st_mode & 07777;

	return (m & 07707) == (socket_mode & 07707) &&
	       ((m & 0070) == (socket_mode & 0070) || (m & 0070) == ((socket_mode | 0060) & 0070));
}

/*
 * Take over the listening socket fd the previous life left if it is a listening Unix stream
 * socket bound to the configured path, and that path is still a socket; else close it.
 * Returns fd or -1. The path must still have the configured mode and group.
 */
int server_socket_adopt(const struct config *cfg, gid_t gid, int fd)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int type = 0, listening = 0, domain = 0;
	socklen_t il = sizeof(int);
	struct stat st;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &il) == 0 && type == SOCK_STREAM &&
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &il) == 0 && domain == AF_UNIX &&
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &il) == 0 && listening &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && len > offsetof(struct sockaddr_un, sun_path) &&
	    strncmp(sa.sun_path, cfg->socket_path, sizeof(sa.sun_path)) == 0 &&
	    lstat(cfg->socket_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    socket_mode_is(st.st_mode, cfg->socket_mode) && (gid == (gid_t)-1 || st.st_gid == gid)) {
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0)
			return fd;
	}
	log_notice("The listening socket the previous life left is not '%s' (mode %04o%s%s) any more: binding anew",
		   cfg->socket_path, (unsigned)cfg->socket_mode, cfg->socket_group[0] ? ", group " : "",
		   cfg->socket_group);
	/* gone from the manager too before binding: else it would still answer at the path */
	fdstore_remove("listen");
	close(fd);
	(void)fdstore_barrier(5000);
	return -1;
}

/*
 * Serve the connection the previous life recorded in c again, if its socket came back and its
 * leases can all be given back; else close it. Whether the socket is the client the record
 * names (its credentials) is checked at its first use (peer_verify).
 */
static bool adopt_conn(struct server *s, struct server_handover *h, const uint32_t *rec_buf,
		       const struct warm_conn *c)
{
	char name[WARM_NAME_MAX], text[PROTO_TEXT_MAX];
	const struct warm_ref *leased;
	const char *failed = NULL;
	uint32_t nleased;
	struct ucred cred;
	struct peer *p;
	int fd;

	warm_name(WARM_NAME_CONN, c->conn_id, name);
	fd = fdstore_take(h->fds, h->nfds, name);
	if (fd < 0)
		return false; /* the client left while the daemon was down */
	if (c->state != WARM_CONN_IDLE && c->state != WARM_CONN_WAITING) {
		fdstore_remove(name);
		close(fd);
		h->closed++;
		log_info("Closing connection of pid %d (uid %u, \"%s\"): the previous life of the daemon %s",
			 (int)c->pid, (unsigned)c->uid, c->name,
			 c->state == WARM_CONN_OTHER ? "held journal writers, or spill files it could not keep"
						     : "ended in the middle of one of its requests");
		return false;
	}
	/* the socket is compared with the record before its first use (peer_verify); every
	 * read and write of it is MSG_DONTWAIT, so whether it is O_NONBLOCK does not matter */
	cred = (struct ucred){ .pid = c->pid, .uid = c->uid, .gid = c->gid };
	if (server_admit(s, &cred, text, sizeof(text)) < 0) { /* the limits were lowered meanwhile */
		log_info("Closing connection of pid %d (uid %u, \"%s\"): %s", (int)c->pid, (unsigned)c->uid, c->name,
			 text);
		fdstore_remove(name);
		close(fd);
		h->closed++;
		return false;
	}
	p = peer_new(s, fd, &cred, c->connected_rt, false);
	if (!p) {
		fdstore_remove(name);
		h->closed++;
		return false;
	}
	p->conn_id = c->conn_id;
	p->welcomed = c->version != 0;
	p->version = c->version ? c->version : PROTO_VERSION;
	snprintf(p->name, sizeof(p->name), "%s", c->name);
	/* its leases: every buffer the previous life had leased to it, adopted by the pool; all of
	 * them, or the connection is closed (the pool could not take one: more retired classes than
	 * there is room for) */
	nleased = warm_prev_leases(h->prev, c->conn_id, &leased);
	for (uint32_t i = 0; i < nleased && !failed; i++) {
		uint32_t b = rec_buf[leased[i].record];
		const struct warm_buf *wb = &h->prev->bufs[leased[i].record];

		if (b == UINT32_MAX ||
		    lease_adopt(s->leases, &p->owner, &s->pool->buffers[b], wb->lease_id, wb->since_rt) < 0)
			failed = "its leases could not all be given back after the restart";
	}
	/* and its spill files (with their charges) and page */
	if (!failed && spill_adopt_owner(s->spill, &p->spill, c->conn_id, h->prev, h->fds, h->nfds) < 0)
		failed = "its spill files could not all be given back after the restart";
	if (failed && h->prepare) {
		/* a snapshot still being written may name what came later: decided at GO */
		if (ARRAY_RESERVE_ONE(s->parked, s->nparked, s->capparked, 16) == 0)
			s->parked[s->nparked++] = c->conn_id;
		h->adopted++;
		peer_unadopt(s, h, p);
		return false;
	}
	if (failed) {
		peer_kill(p, "%s", failed);
		fdstore_remove(name);
		h->closed++;
		return false;
	}
	peer_keep(s, p);
	if (c->state == WARM_CONN_WAITING) {
		/* queued again once every connection has its leases back (resume_wait) */
		snprintf(p->wait.class_name, sizeof(p->wait.class_name), "%s", c->wait_class);
		p->wait.count = c->wait_count;
		p->wait.deadline = c->wait_deadline;
		p->busy = true;
	}
	h->adopted++;
	return true;
}

/* The acquire an adopted connection waited in, queued again as it was (what is left of its time). */
static void resume_wait(struct server *s, struct peer *p)
{
	char text[PROTO_TEXT_MAX];
	uint64_t now = now_ns();
	int64_t ms = p->wait.deadline == UINT64_MAX ? -1
		     : p->wait.deadline > now	   ? (int64_t)((p->wait.deadline - now + 999999) / 1000000)
						   : 1; /* its time is up: it expires the usual way */
	int r = lease_acquire(s->leases, &p->owner, p->wait.class_name, p->wait.count, ms, now, text, sizeof(text));

	if (r < 0)
		send_result(p, r, text);
	peer_note(p, true);
}

/* Which pool buffer each of the previous life's records became (UINT32_MAX: none); NULL: no memory. */
static uint32_t *records_to_buffers(const struct server *s, const struct warm_prev *prev)
{
	uint32_t *rec_buf = malloc((prev->nbuffers ? prev->nbuffers : 1) * sizeof(*rec_buf));

	if (!rec_buf)
		return NULL;
	memset(rec_buf, 0xff, prev->nbuffers * sizeof(*rec_buf));
	for (uint32_t i = 0; i < s->pool->nbuffers; i++)
		if (s->pool->buffers[i].adopted)
			rec_buf[s->pool->buffers[i].prev_record] = i;
	return rec_buf;
}

/* Is c a connection the next life may serve on, or one it closes (in the middle of a request)? */
static bool conn_served(const struct warm_conn *c)
{
	return c->state == WARM_CONN_IDLE || c->state == WARM_CONN_WAITING;
}

void server_adopt_conns(struct server *s, struct server_handover *h)
{
	_cleanup_free_ uint32_t *rec_buf = NULL;

	if (h->prev && !(rec_buf = records_to_buffers(s, h->prev))) {
		log_oom("the connections to take over");
		return; /* their fds are closed with the rest: the clients see their connections end */
	}
	for (uint32_t i = 0; h->prev && i < h->prev->nconns; i++) {
		const struct warm_conn *c = &h->prev->conns[i];

		/* a take-over's snapshot: one in the middle of a request is decided at GO (it may
		 * well be idle by then), its socket left where it is */
		if (c->state != WARM_CONN_FREE && (conn_served(c) || !h->prepare))
			adopt_conn(s, h, rec_buf, c);
	}
	if (h->prepare)
		return;
	/* retired buffers whose holders did not come back go now, and so do their spill files */
	lease_retire_unheld(s->leases);
	spill_adopt_rest(s->spill, h->prev, h->fds, h->nfds);
}

/* --- a restart by take-over, the next life's side --------------------------------------- */

/*
 * Undo adopt_conn for a connection whose records changed after the snapshot: its leases free
 * again (as its uid last wrote them), its spill files and page and its socket back in the
 * hand-over under their names, its record and its place in the fd store given up here. The
 * connection itself lives on: adopt_conn takes it again from the records as they are now.
 */
static void peer_unadopt(struct server *s, struct server_handover *h, struct peer *p)
{
	char name[WARM_NAME_MAX];

	warm_name(WARM_NAME_CONN, p->conn_id, name);
	if (p->attached) {
		lease_owner_unadopt(s->leases, &p->owner);
		lease_owner_detach(s->leases, &p->owner);
	}
	spill_owner_unadopt(s->spill, &p->spill, h->fds, h->nfds);
	if (p->warm_slot >= 0) {
		fdstore_forget(name);
		warm_conn_release(s->warm, p->warm_slot);
	}
	epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, p->fd, NULL);
	if (fdstore_untake(h->fds, h->nfds, name, p->fd) < 0)
		close(p->fd);
	access_creds_free(&p->creds);
	TAILQ_REMOVE(&s->peers, p, link);
	s->npeers--;
	h->adopted--;
	free(p->in_payload);
	free(p->out);
	free(p->ofds);
	free(p);
}

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A set of connection ids (the ones a take-over's delta touches): appended to, then sorted. */
struct id_set {
	uint64_t *ids;
	unsigned n, cap;
};

static int id_add(struct id_set *set, uint64_t id)
{
	if (ARRAY_RESERVE_ONE(set->ids, set->n, set->cap, 16) < 0)
		return -ENOMEM;
	set->ids[set->n++] = id;
	return 0;
}

/* Sorted for id_has; an empty set has no array (qsort's must not be NULL). */
static void id_sort(struct id_set *set)
{
	if (set->n > 1)
		qsort(set->ids, set->n, sizeof(*set->ids), id_cmp);
}

static bool id_has(const struct id_set *set, uint64_t id)
{
	return set->n && bsearch(&id, set->ids, set->n, sizeof(id), id_cmp);
}

/* The connections the records rs of kind k name (their holders, their owners), now (prev). */
static int touched_by(const struct warm_prev *prev, enum warm_kind k, const uint32_t *rs, uint32_t n,
		      struct id_set *set)
{
	int r = 0;

	for (uint32_t i = 0; i < n && r == 0; i++) {
		uint32_t at = rs[i];

		if (k == WARM_KIND_CONN && at < prev->nconns && prev->conns[at].state != WARM_CONN_FREE)
			r = id_add(set, prev->conns[at].conn_id);
		else if (k == WARM_KIND_BUF && at < prev->nbuffers && prev->bufs[at].state == WARM_BUF_LEASED)
			r = id_add(set, prev->bufs[at].conn_id);
		else if (k == WARM_KIND_SPILL && at < prev->nspills &&
			 (prev->spills[at].state == WARM_SPILL_FILE || prev->spills[at].state == WARM_SPILL_PAGE))
			r = id_add(set, prev->spills[at].conn_id);
	}
	return r;
}

/*
 * A buffer record that changed: the buffer's fd if it was renewed (the new one came with the
 * delta), and its state, free as the record says (a leased one is leased again with its
 * connection). -EXDEV: a change the next life cannot take (a buffer it does not have).
 */
static int buffer_again(struct server *s, struct server_handover *h, const uint32_t *rec_buf, uint32_t rec,
			char *why, size_t len)
{
	const struct warm_buf *wb = &h->prev->bufs[rec];
	uint32_t at = rec < h->prev->nbuffers ? rec_buf[rec] : UINT32_MAX;
	struct pool_buffer *b;

	if (at == UINT32_MAX) {
		if (wb->state == WARM_BUF_UNKNOWN)
			return 0; /* not one of its buffers then, nor now */
		snprintf(why, len, "buffer record %u changed, and the snapshot had no buffer for it", rec);
		return -EXDEV;
	}
	b = &s->pool->buffers[at];
	if (wb->state == WARM_BUF_UNKNOWN) {
		snprintf(why, len, "buffer %u of class \"%s\" was let go after the snapshot", b->index,
			 s->pool->classes[b->class_index].name);
		return -EXDEV;
	}
	if (wb->fd_id != b->fd_id) { /* renewed meanwhile: the new memfd came with the delta */
		char name[WARM_NAME_MAX], old[WARM_NAME_MAX];
		int fd, gone = -1;

		warm_name(WARM_NAME_BUF, wb->fd_id, name);
		warm_name(WARM_NAME_BUF, b->fd_id, old);
		fd = fdstore_take(h->fds, h->nfds, name);
		if (fd < 0) {
			snprintf(why, len, "buffer %u was renewed, and its memfd did not come", b->index);
			return -EXDEV;
		}
		pool_buffer_replace(b, fd, wb->fd_id, &gone);
		fdstore_forget(old);
		/* closed with what nobody took, once this life serves: maybe the last of its pages */
		if (gone >= 0 && fdstore_untake(h->fds, h->nfds, old, gone) < 0)
			close(gone);
		if (fdstore_add(name, fd, 0) < 0)
			log_warning("Buffer %u will not survive a restart: its memfd could not be kept", b->index);
	}
	if (lease_buffer_recast(s->leases, b, wb->state, wb->uid) < 0) {
		snprintf(why, len, "buffer %u is held by a connection the changes do not name", b->index);
		return -EXDEV;
	}
	return 0;
}

int server_takeover_apply(struct server *s, struct server_handover *h, int prev_fd, struct takeover_delta *d,
			  char *why, size_t len)
{
	_cleanup_free_ uint32_t *rec_buf = NULL;
	struct id_set touched = { 0 };
	struct peer *p, *next;
	int r = 0;

	/* who the changes touch, as the snapshot had them: their holders and owners then */
	for (int k = 0; k < WARM_KINDS && r == 0; k++)
		r = touched_by(h->prev, (enum warm_kind)k, d->dirty[k], d->ndirty[k], &touched);
	/* ... every connection the snapshot had in the middle of a request, decided now, and every
	 * one its records could not be taken over with then */
	for (uint32_t i = 0; i < h->prev->nconns && r == 0; i++)
		if (h->prev->conns[i].state != WARM_CONN_FREE && !conn_served(&h->prev->conns[i]))
			r = id_add(&touched, h->prev->conns[i].conn_id);
	for (unsigned i = 0; i < s->nparked && r == 0; i++)
		r = id_add(&touched, s->parked[i]);
	if (r < 0)
		goto out_oom;
	id_sort(&touched);
	/* those taken over from the snapshot let go: taken again from the records as they are */
	for (p = TAILQ_FIRST(&s->peers); p; p = next) {
		next = TAILQ_NEXT(p, link);
		if (id_has(&touched, p->conn_id))
			peer_unadopt(s, h, p);
	}
	/* the fds kept since, those forgotten since (closed, unless taken: their takers let go) */
	r = fdstore_handed_merge(&h->fds, &h->nfds, d->added, d->nadded, d->removed, d->nremoved, d->held, d->nheld);
	if (r < 0)
		goto out_oom;
	for (unsigned i = 0; i < d->nadded; i++)
		d->added[i].fd = -1; /* the hand-over's now */
	/* the records as they are now, and who they touch now */
	for (int k = 0; k < WARM_KINDS && r == 0; k++)
		r = warm_prev_update(h->prev, prev_fd, (enum warm_kind)k, d->dirty[k], d->ndirty[k]);
	if (r < 0) {
		snprintf(why, len, "cannot read the running life's records again: %s", strerror(-r));
		free(touched.ids);
		return r;
	}
	for (int k = 0; k < WARM_KINDS && r == 0; k++)
		r = touched_by(h->prev, (enum warm_kind)k, d->dirty[k], d->ndirty[k], &touched);
	if (r < 0 || !(rec_buf = records_to_buffers(s, h->prev)))
		goto out_oom;
	id_sort(&touched);
	for (uint32_t i = 0; i < d->ndirty[WARM_KIND_BUF] && r == 0; i++)
		r = buffer_again(s, h, rec_buf, d->dirty[WARM_KIND_BUF][i], why, len);
	/* the touched connections, as the records say now (a new one's socket came with the delta) */
	for (uint32_t i = 0; i < h->prev->nconns && r == 0; i++) {
		const struct warm_conn *c = &h->prev->conns[i];

		if (c->state != WARM_CONN_FREE && id_has(&touched, c->conn_id))
			adopt_conn(s, h, rec_buf, c);
	}
	free(touched.ids);
	return r;
out_oom:
	free(touched.ids);
	snprintf(why, len, "out of memory");
	return -ENOMEM;
}

void server_takeover_finish(struct server *s, struct server_handover *h, unsigned njournals)
{
	s->njournals = njournals;
	/* retired buffers whose holders did not come back go now, and so do their spill files */
	lease_retire_unheld(s->leases);
	spill_adopt_rest(s->spill, h->prev, h->fds, h->nfds);
	warm_publish(s->warm);
	server_resume_waits(s);
}

void server_wait_main(struct server *s, int chan, const char *ready, struct fdstore_fd *fds, unsigned nfds)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->prev_life.chan };

	snprintf(s->prev_life.ready, sizeof(s->prev_life.ready), "%s", ready);
	s->prev_life.chan = chan;
	s->prev_life.fds = fds;
	s->prev_life.nfds = nfds;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, chan, &ev) < 0)
		server_prev_life_event(s); /* as if it had gone: say so to the manager at once */
}

void server_answer_restart(struct server *s, uint64_t conn_id)
{
	struct peer *p;

	TAILQ_FOREACH(p, &s->peers, link)
		if (conn_id && p->conn_id == conn_id && !p->dead)
			send_result(p, 0, NULL);
}

uint64_t server_restart_unanswered(const struct server *s)
{
	return s->next.asker;
}

/*
 * The life this one took over from asks for the service back (restart = exec keeps the daemon's
 * pid): it executes its binary again, as this life's next life on chan, which this life did not
 * spawn. The connection that asked for the restart is answered by this life, once that one is
 * prepared (takeover_prepared), or refused.
 */
static void takeover_back_start(struct server *s, int chan, const struct takeover_back *b)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = &s->next.chan };
	uint64_t now = now_ns();
	struct peer *p;
	char text[PROTO_TEXT_MAX];

	if (s->next.chan >= 0 || s->restart_fd >= 0) {
		/* not reached: server_restart_check refuses until BACK or MAIN came */
		log_error("Refusing to hand the service back to pid %d: another restart is under way", (int)b->pid);
		(void)takeover_send(chan, TAKEOVER_FAILED, 0, "another restart is under way", -1);
		close(chan);
		return;
	}
	s->restart_peer = 0;
	TAILQ_FOREACH(p, &s->peers, link)
		if (b->asker && p->conn_id == b->asker && !p->dead) {
			s->restart_peer = p->id;
			p->busy = true; /* answered once this ends, as handle_restart's asker */
		}
	if (b->pid <= 0 || fcntl(chan, F_SETFL, O_NONBLOCK) < 0) {
		snprintf(text, sizeof(text), "pid %d could not have the service back: a bad channel", (int)b->pid);
		goto fail;
	}
	fdstore_handover_begin();
	s->next = (typeof(s->next)){ .chan = chan, .pid = b->pid, .deadline = now + TAKEOVER_PREPARE_MS * 1000000ull,
				     .idle_until = b->nice == TAKEOVER_NICE_NONE ? UINT64_MAX : now + TAKEOVER_IDLE_MS * 1000000ull,
				     .nice = b->nice, .state_fd = -1, .back_pair = { -1, -1 }, .coming_back = true,
				     .pidfd = (int)syscall(SYS_pidfd_open, b->pid, 0) };
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, chan, &ev) < 0) {
		snprintf(text, sizeof(text), "cannot wait for pid %d to have the service back: %s", (int)b->pid,
			 strerror(errno));
		if (s->next.pidfd >= 0)
			close(TAKE_FD(s->next.pidfd));
		s->next.chan = -1;
		fdstore_handover_end();
		goto fail;
	}
	log_info("Restart: handing the service back to pid %d (restart = exec keeps the daemon's pid)", (int)b->pid);
	return;
fail:
	/* it hears why, and exits; this life serves on, with its own pid */
	(void)takeover_send(chan, TAKEOVER_FAILED, 0, text, -1);
	close(chan);
	log_error("Refusing the restart: %s; pid %d serves on as the daemon", text, (int)getpid());
	if (restart_asker(s))
		send_result(restart_asker(s), -EBUSY, text);
}

void server_prev_life_event(struct server *s)
{
	struct takeover_msg m;
	int fds[TAKEOVER_FDS_MAX];
	unsigned nfds;
	char text[TAKEOVER_TEXT_MAX];
	int r = takeover_recv(s->prev_life.chan, &m, text, sizeof(text), fds, &nfds, 0);
	struct takeover_back back;
	int back_chan = -1;

	if (r == -EAGAIN)
		return;
	if (r == (int)sizeof(back) && m.type == TAKEOVER_BACK && m.count == 1 && nfds == 1) {
		memcpy(&back, text, sizeof(back));
		back_chan = fds[0];
		nfds = 0;
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	/* MAIN (or BACK), or the previous life ended without saying it: either way it is not in the way */
	if (r < 0 || (m.type != TAKEOVER_MAIN && back_chan < 0))
		log_warning("The previous life of the daemon ended without saying the service manager follows this one");
	else if (m.type == TAKEOVER_MAIN && m.arg)
		server_answer_restart(s, m.arg); /* it could not have the service back */
	epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->prev_life.chan, NULL);
	close(s->prev_life.chan);
	s->prev_life.chan = -1;
	notify_hold(false);
	/* what nobody took: closed now that the clients are served (closing the last copy of a
	 * memfd frees its pages, milliseconds), and the manager told to forget what nobody kept */
	fdstore_received_free(s->prev_life.fds, s->prev_life.nfds);
	s->prev_life.fds = NULL;
	s->prev_life.nfds = 0;
	fdstore_manager_ready();
	notify_send(s->prev_life.ready);
	if (back_chan >= 0)
		takeover_back_start(s, back_chan, &back);
}

void server_resume_waits(struct server *s)
{
	struct peer *p;

	/* only once every connection has its leases back: a waiter must not be given what an
	 * adopted connection still holds */
	TAILQ_FOREACH(p, &s->peers, link)
		if (p->busy && !p->dead)
			resume_wait(s, p);
}

#define QUIESCE_NS (1000 * 1000000ull) /* what a stop waits at most for clients to read their replies */

/*
 * Stopping: send every reply still queued (a client that does not read for QUIESCE_NS has its
 * connection left BUSY: the next life closes it), write every connection's record as it is now,
 * and from here on change neither the warm state nor the fd store, so that tearing down leaves
 * both to the next life as they are.
 */
void server_quiesce(struct server *s)
{
	uint64_t deadline = now_ns() + QUIESCE_NS;
	struct peer *p;

	/* a renewal in flight would keep its new memfd after the records are final: let it end and
	 * record what it did, before the replies go (it may grant the buffer to a waiter); a buffer
	 * still queued stays BROKEN: the next life renews it */
	recycler_halt(s->recycler);
	recycler_collect(s->recycler, svc_lease_renewed, s);
	for (;;) {
		bool pending = false;

		TAILQ_FOREACH(p, &s->peers, link) {
			if (!p->dead && p->out_len > p->out_off)
				peer_flush(p);
			pending |= !p->dead && p->out_len > p->out_off;
		}
		if (!pending || now_ns() >= deadline)
			break;
		(void)poll(NULL, 0, 5);
	}
	/* every record as it is now; those already so are not written again (a take-over hands
	 * over the records written since its snapshot: each rewritten here would be one more) */
	TAILQ_FOREACH(p, &s->peers, link)
		peer_note(p, false);
	/* a stop leaves the next life what the service manager holds: all of it (a re-execution
	 * hands the whole table over itself) */
	if (!s->reexec && !s->takeover)
		fdstore_flush(now_ns(), true);
	s->sealed = true;
	spill_seal(s->spill);
}

void server_set_start(struct server *s, const struct proto_status_start *start)
{
	s->start = *start;
}
