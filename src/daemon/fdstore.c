/* SPDX-License-Identifier: MIT */
/*
 * fdstore.c - see fdstore.h. The in-process table mirrors what was sent to the service
 * manager, so that a re-execution hands over exactly what systemd would have handed back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "notify.h"
#include "util.h"

#define FIRST_FD 3 /* SD_LISTEN_FDS_START */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fdstore_fd *kept; /* the fds kept now, under lock */
static unsigned nkept, capkept;

/*
 * What the service manager already holds: the fds handed to this life, by name, sorted, with
 * the file each one is. Adding one of them again (the same file under the same name) sends
 * nothing: systemd would drop the copy as a duplicate after comparing it with every fd in the
 * store, which for a pool of thousands of buffers is most of a warm start.
 */
struct stored {
	char name[FDSTORE_NAME_MAX + 1];
	dev_t dev;
	ino_t ino;
	bool gone; /* removed since: adding it again must send it */
};
static struct stored *stored; /* under lock */
static unsigned nstored;

static int stored_cmp(const void *a, const void *b)
{
	return strcmp(((const struct stored *)a)->name, ((const struct stored *)b)->name);
}

static struct stored *stored_find(const char *name)
{
	struct stored key;

	snprintf(key.name, sizeof(key.name), "%s", name);
	return nstored ? bsearch(&key, stored, nstored, sizeof(*stored), stored_cmp) : NULL;
}

/* Remember what the service manager holds of fds (n of them, named). */
static void stored_set(const struct fdstore_fd *fds, unsigned n)
{
	struct stored *st = calloc(n ? n : 1, sizeof(*st));
	unsigned k = 0;

	for (unsigned i = 0; st && i < n; i++) {
		struct stat sb;

		if (fds[i].fd < 0 || !fds[i].name[0] || fstat(fds[i].fd, &sb) < 0)
			continue;
		snprintf(st[k].name, sizeof(st[k].name), "%s", fds[i].name);
		st[k].dev = sb.st_dev;
		st[k++].ino = sb.st_ino;
	}
	qsort(st, k, sizeof(*st), stored_cmp);
	pthread_mutex_lock(&lock);
	free(stored);
	stored = st;
	nstored = st ? k : 0;
	pthread_mutex_unlock(&lock);
}

/* Does the service manager hold fd under name already? Under lock. */
static bool stored_has(const char *name, int fd)
{
	const struct stored *s = stored_find(name);
	struct stat sb;

	return s && !s->gone && fstat(fd, &sb) == 0 && sb.st_dev == s->dev && sb.st_ino == s->ino;
}

/* systemd's fdname_is_valid(): printable ASCII except ':' */
static bool name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > FDSTORE_NAME_MAX)
		return false;
	for (const char *c = name; *c; c++)
		if (*c < ' ' || *c > '~' || *c == ':')
			return false;
	return true;
}

static int parse_uint(const char *s, unsigned long *ret)
{
	char *end;

	if (!s || !*s)
		return -ENOENT;
	errno = 0;
	*ret = strtoul(s, &end, 10);
	return errno || *end || *s == '-' ? -EINVAL : 0;
}

int fdstore_receive(struct fdstore_fd **ret, unsigned *n)
{
	unsigned long pid, nfds;
	const char *names = getenv("LISTEN_FDNAMES");
	struct fdstore_fd *fds;
	int r;

	*ret = NULL;
	*n = 0;
	r = parse_uint(getenv("LISTEN_PID"), &pid);
	if (r == 0)
		r = parse_uint(getenv("LISTEN_FDS"), &nfds);
	if (r == 0 && pid != (unsigned long)getpid())
		r = -ENOENT; /* meant for another process (the variables were inherited) */
	if (r == -EINVAL)
		log_warning("Ignoring LISTEN_PID=%s LISTEN_FDS=%s: not numbers", getenv("LISTEN_PID"),
			    getenv("LISTEN_FDS"));
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (r < 0 || nfds == 0)
		return 0;
	if (nfds > 1u << 20)
		return log_error_errno(-E2BIG, "LISTEN_FDS=%lu: more fds than any configuration keeps", nfds);
	fds = calloc(nfds, sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	for (unsigned long i = 0; i < nfds; i++) {
		const char *end = names ? strchrnul(names, ':') : NULL;
		size_t len = end ? (size_t)(end - names) : 0;

		fds[i].fd = FIRST_FD + (int)i;
		if (fcntl(fds[i].fd, F_SETFD, FD_CLOEXEC) < 0) {
			fds[i].fd = -1; /* not open after all */
			continue;
		}
		/* a missing or bad name makes the fd one nobody takes: it is closed with the rest */
		if (len <= FDSTORE_NAME_MAX) {
			memcpy(fds[i].name, names, len);
			fds[i].name[len] = '\0';
		}
		if (end)
			names = *end ? end + 1 : NULL;
	}
	stored_set(fds, (unsigned)nfds);
	*ret = fds;
	*n = (unsigned)nfds;
	return 0;
}

int fdstore_take(struct fdstore_fd *fds, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i].fd >= 0 && strcmp(fds[i].name, name) == 0) {
			int fd = fds[i].fd;

			fds[i].fd = -1;
			return fd;
		}
	return -1;
}

bool fdstore_has(const struct fdstore_fd *fds, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i].fd >= 0 && strcmp(fds[i].name, name) == 0)
			return true;
	return false;
}

void fdstore_received_free(struct fdstore_fd *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (fds[i].fd < 0)
			continue;
		/* nobody wanted it: the service manager must not keep it for the next life either */
		fdstore_remove(fds[i].name);
		close(fds[i].fd);
	}
	free(fds);
}

int fdstore_add(const char *name, int fd, bool poll)
{
	char state[FDSTORE_NAME_MAX + 40];
	int r = 0;

	if (!name_valid(name) || fd < 0)
		return -EINVAL;
	snprintf(state, sizeof(state), "FDSTORE=1\nFDNAME=%s%s", name, poll ? "" : "\nFDPOLL=0");
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nkept; i++)
		if (strcmp(kept[i].name, name) == 0) {
			r = -EEXIST;
			goto out;
		}
	if (nkept == capkept) {
		unsigned cap = capkept ? 2 * capkept : 64;
		struct fdstore_fd *k = realloc(kept, cap * sizeof(*k));

		if (!k) {
			r = -ENOMEM;
			goto out;
		}
		kept = k;
		capkept = cap;
	}
	r = stored_has(name, fd) ? 0 : notify_send_fds(state, &fd, 1);
	if (r < 0)
		goto out;
	snprintf(kept[nkept].name, sizeof(kept[nkept].name), "%s", name);
	kept[nkept++].fd = fd;
	r = 0;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

void fdstore_remove(const char *name)
{
	char state[FDSTORE_NAME_MAX + 40];
	struct stored *gone;

	if (!name_valid(name))
		return;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nkept; i++)
		if (strcmp(kept[i].name, name) == 0) {
			kept[i] = kept[--nkept];
			break;
		}
	gone = stored_find(name);
	if (gone)
		gone->gone = true;
	/* also when not kept here: a name a previous life left */
	snprintf(state, sizeof(state), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	(void)notify_send(state);
	pthread_mutex_unlock(&lock);
}

int fdstore_barrier(int timeout_ms)
{
	int p[2], r;
	struct pollfd pfd;

	if (!getenv("NOTIFY_SOCKET"))
		return 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	/* the manager closes its copy of the write end once it has read this datagram, and it
	 * reads the socket in order: a hangup on the read end means all before it was processed */
	r = notify_send_fds("BARRIER=1", &p[1], 1);
	close(p[1]);
	if (r < 0) {
		close(p[0]);
		return r;
	}
	pfd = (struct pollfd){ .fd = p[0], .events = 0 };
	do
		r = poll(&pfd, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	close(p[0]);
	return r < 0 ? -errno : r == 0 ? -ETIMEDOUT : 0;
}

unsigned fdstore_count(void)
{
	unsigned n;

	pthread_mutex_lock(&lock);
	n = nkept;
	pthread_mutex_unlock(&lock);
	return n;
}

int fdstore_exec_prepare(void)
{
	int r = 0;

	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nkept && r == 0; i++) {
		int fd = fcntl(kept[i].fd, F_DUPFD_CLOEXEC, FIRST_FD + (int)nkept);

		if (fd < 0)
			r = -errno;
		else
			kept[i].fd = fd; /* the table's own now; the original may be closed */
	}
	pthread_mutex_unlock(&lock);
	return r;
}

int fdstore_exec(const char *path, char *const argv[])
{
	_cleanup_free_ char *names = NULL;
	char num[32];
	size_t len = 1;

	if (access(path, X_OK) < 0)
		return -errno;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nkept; i++)
		len += strlen(kept[i].name) + 1;
	names = calloc(1, len);
	if (!names) {
		pthread_mutex_unlock(&lock);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < nkept; i++) {
		strcat(names, kept[i].name);
		if (i + 1 < nkept)
			strcat(names, ":");
	}
	/* fdstore_exec_prepare put them all above 3 + nkept: moving one never overwrites another */
	for (unsigned i = 0; i < nkept; i++)
		if (dup2(kept[i].fd, FIRST_FD + (int)i) < 0) { /* dup2 clears FD_CLOEXEC on the copy */
			pthread_mutex_unlock(&lock);
			return -errno;
		}
	snprintf(num, sizeof(num), "%d", (int)getpid());
	setenv("LISTEN_PID", num, 1);
	snprintf(num, sizeof(num), "%u", nkept);
	setenv("LISTEN_FDS", num, 1);
	setenv("LISTEN_FDNAMES", names, 1);
	pthread_mutex_unlock(&lock);
	execv(path, argv);
	return -errno;
}
