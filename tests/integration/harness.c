/* SPDX-License-Identifier: MIT */
/*
 * harness.c - see harness.h. Used by the integration tests only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "manager.h"

#define STOP_WAIT_MS 30000 /* a daemon that has not exited this long after SIGTERM is hung */

double harness_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/*
 * The watchdog (harness.h): the main thread arms, disarms and names the daemon; the watchdog's
 * thread waits for the deadline and kills. wd.lock guards everything in wd; the pid is set by
 * spawn once the daemon is ready and cleared by end_with before it signals or reaps, so the
 * watchdog never kills a pid the harness has reaped (and the system may have given to another
 * process).
 */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a new deadline: the thread looks again */
	pthread_once_t once;
	double deadline; /* harness_ms(); 0: disarmed */
	bool fired;
	char what[96];
	const struct daemon *d; /* the daemon it kills */
	pid_t pid; /* d's once it is ready and until the harness ends it, else 0 */
} wd = { .lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

static void *watchdog_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&wd.lock);
	for (;;) {
		double now = harness_ms();

		if (!wd.deadline || wd.fired) {
			pthread_cond_wait(&wd.cond, &wd.lock);
		} else if (now < wd.deadline) {
			long long ns = (long long)(wd.deadline * 1e6);
			struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

			pthread_cond_timedwait(&wd.cond, &wd.lock, &ts);
		} else {
			wd.fired = true;
			fprintf(stderr, "watchdog: %s still running after its budget; SIGKILL to the daemon (pid %d)\n",
				wd.what, (int)wd.pid);
			if (wd.pid > 0)
				kill(wd.pid, SIGKILL);
		}
	}
	return NULL;
}

static void watchdog_start(void)
{
	pthread_condattr_t a;
	pthread_t t;

	/* its deadlines are harness_ms(), CLOCK_MONOTONIC */
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&wd.cond, &a);
	pthread_condattr_destroy(&a);
	if (pthread_create(&t, NULL, watchdog_main, NULL) != 0) {
		fprintf(stderr, "harness: no watchdog thread: %s\n", strerror(errno));
		return;
	}
	pthread_detach(t);
}

void harness_watchdog_arm(const char *what, unsigned seconds)
{
	pthread_once(&wd.once, watchdog_start);
	pthread_mutex_lock(&wd.lock);
	wd.deadline = harness_ms() + seconds * 1000.0;
	wd.fired = false;
	snprintf(wd.what, sizeof(wd.what), "%s", what);
	pthread_cond_signal(&wd.cond);
	pthread_mutex_unlock(&wd.lock);
}

void harness_watchdog_watch(const struct daemon *d)
{
	pthread_mutex_lock(&wd.lock);
	wd.d = d;
	wd.pid = d ? d->pid : 0;
	pthread_mutex_unlock(&wd.lock);
}

bool harness_watchdog_fired(void)
{
	bool f;

	pthread_mutex_lock(&wd.lock);
	f = wd.fired;
	pthread_mutex_unlock(&wd.lock);
	return f;
}

void harness_watchdog_disarm(void)
{
	pthread_mutex_lock(&wd.lock);
	wd.deadline = 0;
	wd.fired = false;
	wd.d = NULL;
	wd.pid = 0;
	pthread_mutex_unlock(&wd.lock);
}

/* d now runs as pid (0: it ended): the watchdog kills that one if d is the daemon it watches. */
static void watchdog_pid(const struct daemon *d, pid_t pid)
{
	pthread_mutex_lock(&wd.lock);
	if (wd.d == d)
		wd.pid = pid;
	pthread_mutex_unlock(&wd.lock);
}

const char *harness_build(void)
{
	const char *b = getenv("HP_BUILD");

	return b && *b ? b : "build";
}

pid_t harness_metrics_http(const struct daemon *d, int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char bin[256];
	pid_t pid;

	if (lfd < 0)
		return -1;
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) < 0) {
		close(lfd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	snprintf(bin, sizeof(bin), "%s/hugepoolctl", harness_build());
	pid = fork();
	if (pid == 0) {
		char n[16];

		dup2(lfd, 3);
		snprintf(n, sizeof(n), "%d", (int)getpid());
		setenv("LISTEN_PID", n, 1);
		setenv("LISTEN_FDS", "1", 1);
		execl(bin, bin, "-s", d->socket, "metrics", "--http", (char *)NULL);
		_exit(127);
	}
	close(lfd);
	return pid;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -errno;
}

bool harness_two_uids(void)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "skipped: needs root to run clients of two uids (0 and %d)\n", HARNESS_OTHER_UID);
	return false;
}

/* harness_as_uid in two steps: the child's pid, then its result */
static pid_t as_uid_start(uid_t uid, int (*fn)(void *arg), void *arg)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		gid_t g = (gid_t)uid;

		if (setgroups(1, &g) < 0 || setresgid(g, g, g) < 0 || setresuid(uid, uid, uid) < 0)
			_exit(126);
		_exit(fn(arg) & 0xff);
	}
	return pid;
}

static int as_uid_wait(pid_t pid)
{
	int status;

	if (pid < 0)
		return pid;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int harness_as_uid(uid_t uid, int (*fn)(void *arg), void *arg)
{
	return as_uid_wait(as_uid_start(uid, fn, arg));
}

int harness_other_start(struct harness_other *o, uid_t uid, int (*fn)(void *arg), void *arg)
{
	char x;

	if (pipe2(o->ready, O_CLOEXEC) < 0 || pipe2(o->go, O_CLOEXEC) < 0)
		return -errno;
	o->pid = as_uid_start(uid, fn, arg);
	close(o->ready[1]);
	close(o->go[0]);
	if (o->pid < 0)
		return o->pid;
	return read(o->ready[0], &x, 1) == 1 ? 0 : -EPIPE; /* EOF: it ended before it was ready */
}

int harness_other_finish(struct harness_other *o)
{
	int r;

	close(o->go[1]);
	r = as_uid_wait(o->pid);
	close(o->ready[0]);
	return r;
}

void harness_other_child(struct harness_other *o)
{
	close(o->go[1]);
	close(o->ready[0]);
}

int harness_other_ready(struct harness_other *o)
{
	char x = 'r';

	if (write(o->ready[1], &x, 1) != 1)
		return -EPIPE;
	return read(o->go[0], &x, 1) == 0 ? 0 : -EPROTO;
}

/* Copy src to dst replacing every "@DIR@" by dir; -ENAMETOOLONG when it does not fit. */
static int subst_dir(char *dst, size_t len, const char *src, const char *dir)
{
	size_t n = 0, dl = strlen(dir);

	for (const char *p = src ? src : ""; *p;) {
		const char *add = p;
		size_t k = 1;

		if (strncmp(p, "@DIR@", 5) == 0) {
			add = dir;
			k = dl;
			p += 5;
		} else {
			p++;
		}
		if (n + k >= len)
			return -ENAMETOOLONG;
		memcpy(dst + n, add, k);
		n += k;
	}
	dst[n] = '\0';
	return 0;
}

/* Remember how to run the daemon: o's environment, wrapper and binary (o NULL: none, the built one). */
static int set_opts(struct daemon *d, const struct harness_opts *o)
{
	d->nenv = 0;
	d->wrapper[0] = '\0';
	snprintf(d->binary, sizeof(d->binary), "%s/hugepoold", harness_build());
	if (!o)
		return 0;
	if (o->binary && (size_t)snprintf(d->binary, sizeof(d->binary), "%s", o->binary) >= sizeof(d->binary))
		return -ENAMETOOLONG;
	for (unsigned i = 0; i < HARNESS_ENV_MAX && o->env[i]; i++) {
		if (!strchr(o->env[i], '=') || strlen(o->env[i]) >= sizeof(d->env[0]))
			return -EINVAL;
		snprintf(d->env[d->nenv++], sizeof(d->env[0]), "%s", o->env[i]);
	}
	if (o->wrapper) {
		int n = o->wrapper[0] == '/' ? snprintf(d->wrapper, sizeof(d->wrapper), "%s", o->wrapper)
					     : snprintf(d->wrapper, sizeof(d->wrapper), "%s/%s", harness_build(), o->wrapper);

		if (n < 0 || (size_t)n >= sizeof(d->wrapper))
			return -ENAMETOOLONG;
	}
	return 0;
}

/* Does a listening socket accept a connection at path (waiting wait_ms first when not)? */
static bool socket_accepts(const char *path, int wait_ms)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	if (!ok)
		usleep((useconds_t)wait_ms * 1000);
	return ok;
}

/* Fork and exec the daemon on d's configuration, wait for READY=1 (or, with no manager, for its
 * socket to accept a connection) or its end. */
static int spawn(struct daemon *d)
{
	extern char **environ;
	char notify_env[128], fdstore_env[32], ready_env[8][256];
	char **env;
	unsigned nenv = 0, nenviron = 0;
	struct manager_layout *layout = NULL;
	bool again = d->starts > 0;
	double deadline;
	int r;

	if (!d->mgr) {
		char path[96];

		snprintf(path, sizeof(path), "%s/notify", d->dir);
		r = manager_new(path, d->fdstore_max, &d->mgr);
		if (r < 0)
			return r;
	}
	manager_reset_ready(d->mgr);
	if (d->fdstore_max && !(layout = manager_prepare(d->mgr)))
		return -ENOMEM;
	/* the child's whole environment is made here: after fork only async-signal-safe calls */
	while (environ[nenviron])
		nenviron++;
	env = calloc(nenviron + d->nenv + 8, sizeof(*env));
	if (!env) {
		manager_layout_free(layout);
		return -ENOMEM;
	}
	snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s/notify", d->dir);
	for (unsigned i = 0; i < nenviron; i++)
		if (strncmp(environ[i], "NOTIFY_SOCKET=", 14) && strncmp(environ[i], "LISTEN_", 7) &&
		    strncmp(environ[i], "FDSTORE=", 8))
			env[nenv++] = environ[i];
	if (!d->no_manager)
		env[nenv++] = notify_env;
	/* as systemd 254+ says FileDescriptorStoreMax= */
	snprintf(fdstore_env, sizeof(fdstore_env), "FDSTORE=%u", d->fdstore_max);
	if (d->fdstore_max)
		env[nenv++] = fdstore_env;
	for (unsigned i = 0; i < d->nenv; i++) {
		snprintf(ready_env[i], sizeof(ready_env[i]), "%s", d->env[i]);
		env[nenv++] = ready_env[i];
	}
	d->starts++;
	d->exit_status = 0;
	/* a next life started by take-over is orphaned when its predecessor ends: ours to reap */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	d->pid = fork();
	if (d->pid < 0) {
		int e = -errno;

		d->pid = 0;
		free(env);
		manager_layout_free(layout);
		return e;
	}
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_CLOEXEC | (again ? O_APPEND : O_TRUNC), 0644);

		if (fd >= 0) {
			if (again) {
				char line[64];
				int n = snprintf(line, sizeof(line), "=== harness: restart %u ===\n", d->starts - 1);

				(void)!write(fd, line, (size_t)n);
			}
			dup2(fd, STDERR_FILENO);
			dup2(fd, STDOUT_FILENO);
		}
		/* never outlive the test, even when it crashes */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		manager_layout_child(layout, env, &nenv);
		env[nenv] = NULL;
		if (d->wrapper[0])
			execve(d->wrapper, (char *[]){ d->wrapper, d->binary, "-v", "-c", d->conf, NULL }, env);
		else
			execve(d->binary, (char *[]){ "hugepoold", "-v", "-c", d->conf, NULL }, env);
		_exit(127);
	}
	free(env);
	manager_layout_free(layout);
	/* wait for READY=1, or for the daemon to die */
	deadline = harness_ms() + 60000;
	for (;;) {
		int status;

		/* short waits only so that a daemon dying before READY is noticed */
		if (d->no_manager ? socket_accepts(d->socket, 10) : manager_wait_ready(d->mgr, 10))
			break;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			d->pid = 0;
			return -ECHILD;
		}
		if (harness_ms() > deadline)
			return -ETIMEDOUT;
	}
	watchdog_pid(d, d->pid); /* ready: from now on a hang is the watchdog's (before, the deadline's) */
	return 0;
}

pid_t harness_pid(struct daemon *d)
{
	pid_t main_pid = d->mgr ? manager_main_pid(d->mgr) : 0;
	int status;

	if (d->pid <= 0 || main_pid <= 0 || main_pid == d->pid)
		return d->pid;
	/* the life before hands over, tells the manager, and exits: reap it */
	for (double deadline = harness_ms() + STOP_WAIT_MS;;) {
		pid_t r = waitpid(d->pid, &status, WNOHANG);

		if (r == d->pid || (r < 0 && errno != EINTR)) {
			if (r == d->pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
				d->took_over_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
				fprintf(stderr, "harness: hugepoold (pid %d) ended with status %d after handing over\n",
					(int)d->pid, d->took_over_status);
			}
			break;
		}
		if (harness_ms() > deadline) {
			fprintf(stderr, "harness: hugepoold (pid %d) still running after handing over: SIGKILL\n",
				(int)d->pid);
			kill(d->pid, SIGKILL);
			d->took_over_status = 128 + SIGKILL;
		}
		usleep(1000);
	}
	d->pid = main_pid;
	watchdog_pid(d, main_pid);
	return main_pid;
}

bool harness_follows(struct daemon *d, pid_t pid, int timeout_ms)
{
	double deadline = harness_ms() + timeout_ms;

	while (harness_pid(d) != pid && harness_ms() < deadline)
		usleep(1000);
	return d->pid == pid;
}

/* Write d's configuration: the harness's globals, then the caller's. */
static int write_conf(struct daemon *d, const char *globals, const char *classes)
{
	const char *huge = getenv("HP_TEST_HUGEPAGES") ? getenv("HP_TEST_HUGEPAGES") : "prefer";
	char g[4096], c[6144], conf[sizeof(g) + sizeof(c) + 512];

	if (subst_dir(g, sizeof(g), globals, d->dir) < 0 || subst_dir(c, sizeof(c), classes, d->dir) < 0)
		return -ENAMETOOLONG;
	/* a test that sets hugepages itself overrides $HP_TEST_HUGEPAGES; spill files and the
	 * socket stay in the test's directory unless the test says where; the socket is open to
	 * every user (clients of another uid) unless the test sets its mode */
	conf[0] = '\0';
	if (!globals || !strstr(globals, "socket ="))
		snprintf(conf, sizeof(conf), "socket = %s\n", d->socket);
	if (!globals || !strstr(globals, "socket_mode ="))
		snprintf(conf + strlen(conf), sizeof(conf) - strlen(conf), "socket_mode = 0666\n");
	if (!globals || !strstr(globals, "hugepages ="))
		snprintf(conf + strlen(conf), sizeof(conf) - strlen(conf), "hugepages = %s\n", huge);
	snprintf(conf + strlen(conf), sizeof(conf) - strlen(conf), "%s\n", g);
	if (!globals || !strstr(globals, "spill_directory ="))
		snprintf(conf + strlen(conf), sizeof(conf) - strlen(conf), "spill_directory = %s/spill\n", d->dir);
	snprintf(conf + strlen(conf), sizeof(conf) - strlen(conf), "%s\n", c);
	return write_file(d->conf, conf) < 0 ? -EIO : 0;
}

int harness_start_opts(struct daemon *d, const char *globals, const char *classes, const struct harness_opts *o)
{
	int r;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/hugepool-test.XXXXXX");
	if (!mkdtemp(d->dir))
		return -errno;
	/* other uids (the cross-uid tests) must reach the socket */
	chmod(d->dir, 0755);
	snprintf(d->socket, sizeof(d->socket), "%s/sock", d->dir);
	snprintf(d->conf, sizeof(d->conf), "%s/hugepoold.conf", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	r = set_opts(d, o);
	if (r < 0)
		return r;
	d->fdstore_max = o ? o->fdstore_max : 0;
	d->no_manager = o && o->no_manager;
	r = write_conf(d, globals, classes);
	return r < 0 ? r : spawn(d);
}

int harness_reconfigure(struct daemon *d, const char *globals, const char *classes)
{
	return write_conf(d, globals, classes);
}

int harness_start(struct daemon *d, const char *globals, const char *classes)
{
	return harness_start_opts(d, globals, classes, NULL);
}

int harness_restart(struct daemon *d)
{
	if (d->pid > 0 || !d->dir[0])
		return -EBUSY;
	return spawn(d);
}

int harness_restart_opts(struct daemon *d, const struct harness_opts *o)
{
	int r;

	if (d->pid > 0 || !d->dir[0])
		return -EBUSY;
	r = set_opts(d, o);
	return r < 0 ? r : spawn(d);
}

void harness_dump_log(const struct daemon *d)
{
	char line[1024];
	FILE *f = fopen(d->log, "re");

	if (!f)
		return;
	fprintf(stderr, "--- daemon log %s ---\n", d->log);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

int harness_log_count(const struct daemon *d, const char *s)
{
	char line[1024];
	int n = 0;
	FILE *f = fopen(d->log, "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, s) != NULL;
	fclose(f);
	return n;
}


/*
 * Send sig, reap; the daemon's exit status or 128 + signal. A daemon that does not exit within
 * STOP_WAIT_MS of SIGTERM (a hung event loop never reads its signalfd) is killed with SIGKILL,
 * so that a test's teardown cannot hang: that is reported and returned as 128 + SIGKILL.
 */
static int end_with(struct daemon *d, int sig)
{
	double deadline = harness_ms() + STOP_WAIT_MS;
	struct pollfd pfd = { .events = POLLIN };
	int status = 0;
	pid_t r;

	if (harness_pid(d) <= 0)
		return -1;
	watchdog_pid(d, 0); /* ended here, with the harness's own bound */
	pfd.fd = (int)syscall(SYS_pidfd_open, d->pid, 0); /* readable once it exits: no sleeping */
	kill(d->pid, sig);
	for (;;) {
		r = waitpid(d->pid, &status, sig == SIGKILL ? 0 : WNOHANG);
		if (r == d->pid || (r < 0 && errno != EINTR))
			break;
		if (r == 0 && harness_ms() > deadline) {
			fprintf(stderr, "harness: hugepoold (pid %d) still running %d ms after signal %d: SIGKILL\n",
				(int)d->pid, STOP_WAIT_MS, sig);
			sig = SIGKILL;
			kill(d->pid, SIGKILL);
		} else if (r == 0 && (pfd.fd < 0 || poll(&pfd, 1, 100) < 0)) {
			struct timespec ts = { 0, 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	if (pfd.fd >= 0)
		close(pfd.fd);
	d->pid = 0;
	d->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return d->exit_status;
}

int harness_kill(struct daemon *d)
{
	return end_with(d, SIGKILL);
}

int harness_terminate(struct daemon *d)
{
	int ret = end_with(d, SIGTERM);

	if (ret > 0)
		harness_dump_log(d);
	return ret;
}

int harness_stop(struct daemon *d)
{
	int ret = end_with(d, SIGTERM);

	if (ret == -1)
		return -1;
	if (ret == 0 && d->took_over_status)
		ret = d->took_over_status; /* a life before ended badly (a sanitizer's report) */
	if (ret != 0 || getenv("HP_TEST_KEEP")) {
		harness_dump_log(d);
		return ret;
	}
	harness_cleanup(d);
	return ret;
}

void harness_cleanup(struct daemon *d)
{
	char cmd[256];

	manager_free(d->mgr);
	d->mgr = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d->dir);
}
