/* SPDX-License-Identifier: MIT */
/*
 * reexec.h - the daemon becoming its binary again with everything handed over (hugepoolctl
 * restart, SIGUSR2, systemctl reload), checked before anything stops.
 *
 * A re-execution that fails once the daemon has torn itself down loses the pool, the leases and
 * every client, and outside systemd nothing starts the daemon again. So everything that can fail
 * is tried while the daemon still serves (reexec_prepare): the binary at the path the daemon was
 * started from is opened (that file, not whatever the path names later, is what runs), run with
 * --check-config on the daemon's own arguments (a binary that does not run, or a configuration
 * the next life would refuse, is refused here with its own words), and the fd store takes its
 * own copies of every fd it hands over (fdstore_exec_prepare). A refusal changes nothing: the
 * daemon goes on serving. Only then does the daemon stop, and reexec_run replaces it; should even
 * that exec fail, this life's own binary (opened at start, so also after an upgrade removed it)
 * is executed instead, taking over the same way.
 *
 * Event loop and main only.
 */
#ifndef HP_REEXEC_H
#define HP_REEXEC_H

#include <stddef.h>

/* At start, before anything can replace the binary: keep argv, resolve and open our binary. */
void reexec_init(char **argv);
/* The daemon's executable as it was started (the path, which names the new binary after an upgrade). */
const char *reexec_path(void);
/*
 * Check that a re-execution can happen (see above) and get ready for it. Returns 0, or a
 * negative errno with why in err (nothing changed then). Waits for the check, at most 10 s.
 */
int reexec_prepare(char *err, size_t errlen);
/* After the teardown: become the prepared binary (or this life's). Returns only on failure. */
int reexec_run(void);

#endif
