/* SPDX-License-Identifier: MIT */
/*
 * harness.h - run a real hugepoold for integration tests.
 *
 * harness_start() writes a configuration (a socket in a fresh temporary directory, hugepages
 * from $HP_TEST_HUGEPAGES, default "prefer", plus the caller's classes and limits), starts
 * $HP_BUILD/hugepoold (default build/) with its own NOTIFY_SOCKET and returns once the daemon
 * sent READY=1, so tests never sleep waiting for it. harness_stop() sends SIGTERM and reports
 * how the daemon ended, so a test can assert a clean exit (sanitizer builds exit non-zero on
 * any error they found).
 *
 * For tests that crash and restart a daemon (the journal tests): harness_start_opts() also
 * takes extra environment variables and a wrapper program the daemon runs under;
 * harness_kill() ends it with SIGKILL and harness_terminate() with SIGTERM, both keeping the
 * directory; harness_restart() starts it again on the same directory and configuration.
 * "@DIR@" in globals or classes stands for the temporary directory, so a journal can live
 * inside it ("directory = @DIR@/j"). Spill files go to @DIR@/spill unless globals set
 * spill_directory.
 *
 * The harness plays systemd's part (manager.h): READY=1 and, when asked, the fd store that warm
 * restarts hand their fds over in.
 *
 * Start and restart a daemon from the test's main thread: the daemon gets SIGTERM when the
 * thread that forked it ends (PR_SET_PDEATHSIG), so it never outlives a crashed test.
 *
 * A daemon restarted by take-over (takeover.h) goes on in another process, which tells the
 * manager MAINPID=, as systemd follows it: the harness is a child subreaper, so that the next
 * life, orphaned when the previous one exits, is its child to reap, and harness_pid (and every
 * call that signals or reaps the daemon) follows MAINPID=, reaping the life before.
 */
#ifndef HP_HARNESS_H
#define HP_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

#define HARNESS_ENV_MAX 4

struct daemon {
	pid_t pid;
	char dir[64];
	char socket[96];
	char conf[128];
	char log[128];
	int exit_status; /* when harness_start returned -ECHILD: how the daemon ended */
	/* how it is run (harness_restart runs it the same way) */
	char env[HARNESS_ENV_MAX][256];
	unsigned nenv;
	char wrapper[256]; /* "" = none */
	char binary[256]; /* the daemon's executable */
	unsigned starts; /* times a daemon was started on this directory */
	int took_over_status; /* a life that ended handing over: how (0, or what harness_stop reports) */
	/* the service manager (manager.h): $NOTIFY_SOCKET, and the fd store when fdstore_max > 0;
	 * it outlives each daemon, as systemd does, until harness_cleanup */
	struct manager *mgr;
	unsigned fdstore_max;
	bool no_manager; /* run without $NOTIFY_SOCKET (harness_opts) */
};

struct harness_opts {
	/* "NAME=VALUE" set in the daemon's environment (at most HARNESS_ENV_MAX; NULL ends) */
	const char *env[HARNESS_ENV_MAX + 1];
	/* run "WRAPPER hugepoold -v -c CONF": a path, relative to $HP_BUILD unless it starts
	 * with '/' (e.g. "tests/noiouring"); NULL = none */
	const char *wrapper;
	/* FileDescriptorStoreMax=: > 0 keeps the fds the daemon stores and hands them to the next
	 * start (harness_restart) from fd 3 with LISTEN_* set, as systemd does, and sets $FDSTORE
	 * as systemd 254+ does */
	unsigned fdstore_max;
	/* the daemon's executable (NULL: $HP_BUILD/hugepoold), e.g. a copy a test replaces */
	const char *binary;
	/* no service manager: no $NOTIFY_SOCKET (and no fd store), as a daemon started by hand or
	 * by a supervisor that knows nothing of sd_notify; the start returns once the daemon's
	 * socket accepts a connection */
	bool no_manager;
};

/*
 * globals: more global keys; classes: the [class] (and [journal]) sections. Returns 0 once
 * READY=1 came, or -ECHILD when the daemon exited first (exit_status says how; the directory
 * is kept).
 */
int harness_start(struct daemon *d, const char *globals, const char *classes);
/* The same with an environment and a wrapper (o may be NULL). */
int harness_start_opts(struct daemon *d, const char *globals, const char *classes, const struct harness_opts *o);
/*
 * Start the daemon again on d's directory and configuration after it ended (harness_kill,
 * harness_terminate), run as it was last started. The log is appended to, after a line
 * "=== harness: restart N ===". Returns as harness_start.
 */
int harness_restart(struct daemon *d);
/* The same with another environment and wrapper (o NULL: none); later restarts keep them. */
int harness_restart_opts(struct daemon *d, const struct harness_opts *o);
/* Rewrite d's configuration as harness_start would (for the next restart). */
int harness_reconfigure(struct daemon *d, const char *globals, const char *classes);
/* SIGKILL, reap; returns 128 + SIGKILL normally (or how it had ended). Keeps the directory. */
int harness_kill(struct daemon *d);
/*
 * SIGTERM, wait; returns the exit status (0 = clean) or 128 + signal. A daemon still running
 * 30 s after SIGTERM is hung: it gets SIGKILL (said on stderr) and 128 + SIGKILL is returned.
 * On anything but a clean exit the log is printed. Keeps the directory.
 */
int harness_terminate(struct daemon *d);
/*
 * As harness_terminate, but prints the log only when the exit was not clean, and removes the
 * directory after a clean exit (unless $HP_TEST_KEEP is set: then the log is printed too).
 */
int harness_stop(struct daemon *d);
/* Remove the temporary directory (after a start that returned -ECHILD). */
void harness_cleanup(struct daemon *d);
/*
 * The daemon's pid now: the one the service manager follows after a take-over (the life before
 * reaped; should it have ended other than clean, said on stderr and kept in took_over_status).
 */
pid_t harness_pid(struct daemon *d);
/* Wait (at most timeout_ms) until the manager follows pid; false if it does not. */
bool harness_follows(struct daemon *d, pid_t pid, int timeout_ms);

/* Print the daemon's log to stderr (for a failing test). */
void harness_dump_log(const struct daemon *d);
/* Count the lines of the daemon's log that contain s. */
int harness_log_count(const struct daemon *d, const char *s);

/*
 * Clients of two uids (the security tests). harness_two_uids() is true when this process may
 * run code as HARNESS_OTHER_UID (it is root); otherwise it says on stderr why a test that needs
 * it is skipped. harness_as_uid() runs fn(arg) in a child process whose uid, gid and groups are
 * all `uid` and returns the child's exit status: fn's return value (keep it within 0..125),
 * 126 when the uid could not be taken, 128 + signal when the child died of one.
 */
#define HARNESS_OTHER_UID 65534
bool harness_two_uids(void);
int harness_as_uid(uid_t uid, int (*fn)(void *arg), void *arg);

/*
 * Another uid in step with the test: harness_other_start runs fn(arg) as uid and returns once fn
 * said it is ready (holding what it attacks with); the test does its part; harness_other_finish
 * tells fn to go on and returns fn's result as harness_as_uid does. In fn: harness_other_child
 * first (before it forks processes of its own), harness_other_ready when ready (it returns when
 * the test finishes: the pipe's end closes, for every process that waits on it).
 */
struct harness_other {
	pid_t pid;
	int ready[2], go[2];
};
int harness_other_start(struct harness_other *o, uid_t uid, int (*fn)(void *arg), void *arg);
int harness_other_finish(struct harness_other *o);
void harness_other_child(struct harness_other *o);
int harness_other_ready(struct harness_other *o);

/*
 * A hang detector, one per process: harness_watchdog_arm gives the case at hand a budget; once
 * it is spent, the watchdog SIGKILLs the daemon harness_watchdog_watch named (while it runs: the
 * harness tells it each pid as it starts and ends that daemon), so that every call blocked on
 * a hung daemon returns an error, and a hung daemon makes a failed case, never a hung run. It
 * fires once per arm and says so on stderr; harness_watchdog_fired tells the case. Its thread
 * starts at the first arm. case.h watches the daemon its start() started and disarms in its
 * teardown; a case that arms no budget has no watchdog.
 */
void harness_watchdog_arm(const char *what, unsigned seconds);
void harness_watchdog_watch(const struct daemon *d);
bool harness_watchdog_fired(void);
void harness_watchdog_disarm(void);

/*
 * The metrics endpoint as systemd's Accept=no socket serves it: `hugepoolctl -s SOCKET metrics
 * --http` started with a listening TCP socket on 127.0.0.1 (an ephemeral port, in *port) as fd 3,
 * LISTEN_FDS=1 and LISTEN_PID its own. Returns its pid (kill and reap it), -1 if the socket could
 * not be made, or the fork failed.
 */
pid_t harness_metrics_http(const struct daemon *d, int *port);

/* The build directory under test: $HP_BUILD, default "build". */
const char *harness_build(void);

/* Milliseconds since an arbitrary start (CLOCK_MONOTONIC). */
double harness_ms(void);

#endif
