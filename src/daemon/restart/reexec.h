/* SPDX-License-Identifier: MIT */
/*
 * reexec.h - the daemon becoming its binary again with everything handed over (hugepoolctl
 * restart, SIGUSR2, systemctl reload), checked before anything stops.
 *
 * A re-execution that fails once the daemon has stopped loses the pool, the leases and every
 * client, and outside systemd nothing starts the daemon again. So everything that can fail is
 * tried while the daemon still serves: the binary at the path the daemon was started from is
 * opened (that file, not whatever the path names later, is what runs) and run with
 * --check-config on the daemon's own arguments (a binary that does not run, or a configuration
 * the next life would refuse, is refused with its own words), and the fd store keeps the few fd
 * numbers the exec will need (fdstore_exec_prepare). A refusal changes nothing: the daemon goes
 * on serving. Only then does the daemon stop, and reexec_run replaces it; should even that
 * exec fail, this life's own binary (opened at start, so also after an upgrade removed it) is
 * executed instead, taking over the same way.
 *
 * The check runs beside the event loop, which goes on serving the clients meanwhile:
 * reexec_check_start spawns it and returns the fd to poll (its standard error); each time that
 * fd is readable, and at reexec_check_deadline, the loop calls reexec_check_poll until it says
 * how the check ended. Event loop and main only.
 */
#ifndef HP_REEXEC_H
#define HP_REEXEC_H

#include <stddef.h>
#include <stdint.h>

/* At start, before anything can replace the binary: keep argv, resolve and open our binary. */
void reexec_init(char **argv);
/* The daemon's executable as it was started (the path, which names the new binary after an upgrade). */
const char *reexec_path(void);
/*
 * Start checking that a re-execution can happen. Returns the fd to poll for the check's end (a
 * pipe: readable when it wrote or exited), or a negative errno with why in err (-EBUSY: a check
 * runs already).
 */
int reexec_check_start(char *err, size_t errlen);
/* When the running check must be given up (CLOCK_MONOTONIC ns; UINT64_MAX: none runs). */
uint64_t reexec_check_deadline(void);
/*
 * Look at the running check (now: the time; past its deadline it is killed): -EINPROGRESS while
 * it runs; 0 when it passed and the fds the exec needs are kept (the caller stops and calls
 * reexec_run);
 * else a negative errno with why in err. The fd reexec_check_start returned is closed once this
 * returns anything but -EINPROGRESS.
 */
int reexec_check_poll(uint64_t now, char *err, size_t errlen);
/* Give up a running check (the daemon stops instead). */
void reexec_check_cancel(void);
/* After the teardown: become the checked binary (or this life's). Returns only on failure. */
int reexec_run(void);

/*
 * A restart by take-over (takeover.h) runs the next binary beside this life instead of checking
 * it: reexec_open_next opens and checks the file at the path as reexec_check_start does and
 * keeps it (for reexec_run too, should the take-over end in a re-execution): its fd, owned here,
 * or a negative errno with why in err. reexec_args: the daemon's argv.
 */
int reexec_open_next(char *err, size_t errlen);
char **reexec_args(void);
/*
 * A restart that keeps the pid (restart = exec without a service manager): this life, taken over
 * by a next life that hands the service back (takeover.h, BACK), becomes the binary
 * reexec_open_next checked (or this life's) again, the next life of a take-over on chan
 * (takeover_exec). Returns only on failure.
 */
int reexec_back(int chan, int nice);
/*
 * The children this process must reap though it did not start them in this image: a life that
 * handed the service back ends as this process's child, after its exec. reexec_reap_add
 * records one; each exec of this process passes the list on (HUGEPOOLD_REAP); reexec_reap,
 * from the event loop, reaps those that ended and says when to look again (CLOCK_MONOTONIC
 * ns; UINT64_MAX: none is left).
 */
void reexec_reap_add(pid_t pid);
uint64_t reexec_reap(uint64_t now);

#endif
