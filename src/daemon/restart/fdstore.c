/* SPDX-License-Identifier: MIT */
/*
 * fdstore.c - see fdstore.h. The in-process table mirrors what was sent to the service
 * manager, so that a re-execution hands over exactly what systemd would have handed back; it
 * also counts what the manager could hand back (the names' bytes, the entries) and refuses
 * what would not fit. `lock` guards the table, the stored list and `prepared`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "notify.h"
#include "size.h"
#include "util.h"

#define FIRST_FD 3 /* SD_LISTEN_FDS_START */
#define NAMES_FD_ENV "HUGEPOOLD_FDNAMES_FD"
#define NAMES_FILE_MAX (64u << 20) /* a names memfd larger than this is not ours */
/* what FDSTORE_HEADROOM entries of the daemon's own take in LISTEN_FDNAMES, at most */
#define HEADROOM_BYTES (FDSTORE_HEADROOM * 32u)
#define FLUSH_INTERVAL_NS 1000000000ull

struct kept {
	char name[FDSTORE_NAME_MAX + 1];
	int fd; /* the caller's */
	int own; /* the table's copy once prepared for a re-execution, else -1 */
	bool sent; /* to the service manager */
	bool client; /* FDSTORE_CLIENT: sent by fdstore_flush once kept FDSTORE_CLIENT_DELAY_NS */
	uint64_t since; /* CLOCK_MONOTONIC ns it was kept at */
	char state[FDSTORE_NAME_MAX + 40]; /* its FDSTORE=1 datagram */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept; /* the fds kept now, under lock */
static unsigned nkept, capkept;
/*
 * kept[] by name: an open-addressing table of indices + 1 (0 empty, SLOT_GONE a removed one),
 * nslots a power of two at least twice capkept, so that a name is found in a probe or two and
 * keeping or forgetting an fd costs the same with thousands kept. Under lock.
 */
#define SLOT_GONE UINT32_MAX
static uint32_t *slots;
static unsigned nslots, nslots_gone;
static unsigned nsent; /* of them, sent to the service manager */
static size_t sent_bytes; /* their names with a separator each: what LISTEN_FDNAMES will hold */
static bool prepared; /* fdstore_exec_prepare ran: the table owns a copy of every fd */
static unsigned entries_max = FDSTORE_ENTRIES_DEFAULT; /* set once at boot ($FDSTORE) */
static uint64_t due = UINT64_MAX; /* when fdstore_flush has something to send */

static uint32_t name_hash(const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return h;
}

/* The slot that holds name, or the one it would go to (the first removed or empty on its way). */
static uint32_t *slot_find(const char *name, bool *found)
{
	uint32_t *spare = NULL;

	*found = false;
	for (unsigned i = name_hash(name) & (nslots - 1);; i = (i + 1) & (nslots - 1)) {
		uint32_t *sl = &slots[i];

		if (*sl == 0)
			return spare ? spare : sl;
		if (*sl == SLOT_GONE) {
			if (!spare)
				spare = sl;
		} else if (strcmp(kept[*sl - 1].name, name) == 0) {
			*found = true;
			return sl;
		}
	}
}

/* Index every kept fd again into a table of n slots (a power of two); -ENOMEM leaves it as it was. */
static int slots_rebuild(unsigned n)
{
	uint32_t *old = slots;

	slots = calloc(n, sizeof(*slots));
	if (!slots) {
		slots = old;
		return -ENOMEM;
	}
	nslots = n;
	nslots_gone = 0;
	for (unsigned i = 0; i < nkept; i++) {
		bool found;

		*slot_find(kept[i].name, &found) = i + 1;
	}
	free(old);
	return 0;
}

/* kept[i] is gone: its slot freed, the last entry moved into its place (its slot follows). */
static void kept_drop(unsigned i)
{
	bool found;

	*slot_find(kept[i].name, &found) = SLOT_GONE;
	nslots_gone++;
	if (i != nkept - 1) {
		kept[i] = kept[nkept - 1];
		*slot_find(kept[i].name, &found) = i + 1;
	}
	nkept--;
}

/*
 * What the service manager already holds: the fds handed to this life, by name, sorted, with
 * the number each came as. Adding one of them again (the fd taken under that name, kept again
 * under it) sends nothing: systemd would drop the copy as a duplicate after comparing it with
 * every fd in the store, which for a pool of thousands of buffers is most of a warm start. A
 * name stands for one object for its whole life (warm.h's ids are random and never reused), and
 * the fd taken under it is its taker's until fdstore_remove: the same name on the same number is
 * the same file, without a system call to compare them.
 */
struct stored {
	char name[FDSTORE_NAME_MAX + 1];
	int fd; /* the number it was handed to this life as */
	bool gone; /* removed since: adding it again must send it */
	bool claimed; /* kept again by this life, under the same name */
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
		if (fds[i].fd < 0 || !fds[i].name[0])
			continue;
		snprintf(st[k].name, sizeof(st[k].name), "%s", fds[i].name);
		st[k++].fd = fds[i].fd;
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

	return s && !s->gone && s->fd == fd;
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

/* A variable of the environment as a decimal number: -ENOENT when unset or empty. */
static int parse_uint(const char *s, uint64_t *ret)
{
	if (!s || !*s)
		return -ENOENT;
	return decimal_parse(s, ret);
}

/* Is a service manager keeping what we send? */
static bool under_manager(void)
{
	return getenv("NOTIFY_SOCKET") != NULL;
}

/*
 * The names a re-execution left in the memfd at fd (NAMES_FD_ENV), as one string joined by ':';
 * NULL if it cannot be read. The fd is closed.
 */
static char *names_from_memfd(int fd)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > NAMES_FILE_MAX ||
	    !(buf = malloc((size_t)st.st_size + 1)))
		goto out;
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);

		if (n <= 0) {
			free(buf);
			buf = NULL;
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
out:
	close(fd);
	return buf;
}

/* The lowest fd number at or above FIRST_FD that is not open (-1 if none can be had). */
static int first_free_fd(void)
{
	int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, FIRST_FD);

	if (fd < 0)
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* no stderr: the lowest free of all */
	if (fd >= 0)
		close(fd);
	return fd;
}

int fdstore_receive(struct fdstore_fd **ret, unsigned *n)
{
	uint64_t pid, nfds, v;
	bool whole;
	_cleanup_free_ char *owned = NULL;
	const char *names = getenv("LISTEN_FDNAMES");
	struct fdstore_fd *fds;
	int r;

	*ret = NULL;
	*n = 0;
	/* systemd 254+ says how many fds its store keeps (FileDescriptorStoreMax=) */
	if (parse_uint(getenv("FDSTORE"), &v) == 0 && v > 0 && v <= 1u << 20)
		entries_max = (unsigned)v;
	r = parse_uint(getenv("LISTEN_PID"), &pid);
	if (r == 0)
		r = parse_uint(getenv("LISTEN_FDS"), &nfds);
	if (r == 0 && pid != (uint64_t)getpid())
		r = -ENOENT; /* meant for another process (the variables were inherited) */
	if (r < 0 && r != -ENOENT)
		log_warning("Ignoring LISTEN_PID=%s LISTEN_FDS=%s: not numbers", getenv("LISTEN_PID"),
			    getenv("LISTEN_FDS"));
	/* a re-execution's names, in a memfd after the fds (fdstore_exec) */
	if (r == 0 && parse_uint(getenv(NAMES_FD_ENV), &v) == 0 && v >= FIRST_FD + nfds && v <= INT32_MAX) {
		owned = names_from_memfd((int)v);
		names = owned;
		if (!owned)
			log_warning("Cannot read the names of the fds handed over (%s=%" PRIu64 "): %m; they are closed",
				    NAMES_FD_ENV, v);
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	unsetenv(NAMES_FD_ENV);
	if (r < 0 || nfds == 0)
		return 0;
	if (nfds > 1u << 20)
		return log_error_errno(-E2BIG, "LISTEN_FDS=%" PRIu64 ": more fds than any configuration keeps", nfds);
	fds = calloc(nfds, sizeof(*fds));
	if (!fds)
		return log_oom("the fds handed over");
	/* every one close-on-exec in one call (Linux 5.11), where none is missing: a number in
	 * their range that is not open would be taken, once this life opens a file, for the fd
	 * named there */
	whole = close_range(FIRST_FD, FIRST_FD + (unsigned)nfds - 1, CLOSE_RANGE_CLOEXEC) == 0 &&
		first_free_fd() >= FIRST_FD + (int)nfds;
	for (uint64_t i = 0; i < nfds; i++) {
		const char *end = names ? strchrnul(names, ':') : NULL;
		size_t len = end ? (size_t)(end - names) : 0;

		fds[i].fd = FIRST_FD + (int)i;
		if (!whole && fcntl(fds[i].fd, F_SETFD, FD_CLOEXEC) < 0)
			fds[i].fd = -1; /* not open after all; its name is still the i-th */
		/* a missing or bad name makes the fd one nobody takes: it is closed with the rest */
		if (fds[i].fd >= 0 && len <= FDSTORE_NAME_MAX) {
			memcpy(fds[i].name, names, len);
			fds[i].name[len] = '\0';
		}
		if (end)
			names = *end ? end + 1 : NULL;
	}
	stored_set(fds, (unsigned)nfds);
	fdstore_sort(fds, (unsigned)nfds);
	*ret = fds;
	*n = (unsigned)nfds;
	return 0;
}

static int handed_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fdstore_fd *)a)->name, ((const struct fdstore_fd *)b)->name);
}

void fdstore_sort(struct fdstore_fd *fds, unsigned n)
{
	if (n > 1)
		qsort(fds, n, sizeof(*fds), handed_cmp);
}

/* Where the first entry named name is, or would be (the array is sorted by name). */
static unsigned handed_first(const struct fdstore_fd *fds, unsigned n, const char *name)
{
	unsigned lo = 0, hi = n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (strcmp(fds[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int fdstore_take(struct fdstore_fd *fds, unsigned n, const char *name)
{
	/* a name the manager holds twice: the copies follow each other */
	for (unsigned i = handed_first(fds, n, name); i < n && strcmp(fds[i].name, name) == 0; i++)
		if (fds[i].fd >= 0) {
			int fd = fds[i].fd;

			fds[i].fd = -1;
			return fd;
		}
	return -1;
}

bool fdstore_has(const struct fdstore_fd *fds, unsigned n, const char *name)
{
	for (unsigned i = handed_first(fds, n, name); i < n && strcmp(fds[i].name, name) == 0; i++)
		if (fds[i].fd >= 0)
			return true;
	return false;
}

void fdstore_received_free(struct fdstore_fd *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	free(fds);
	/* what nobody kept again (not taken, or taken under another name): the service manager
	 * must not keep it for the next life either */
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nstored; i++)
		if (!stored[i].claimed && !stored[i].gone) {
			stored[i].gone = true;
			(void)notify_sendf("FDSTOREREMOVE=1\nFDNAME=%s", stored[i].name);
		}
	pthread_mutex_unlock(&lock);
}

/* Would one more entry of len bytes (with its separator) still come back from the manager? */
static bool fits(size_t len, unsigned flags)
{
	unsigned room = flags & FDSTORE_CLIENT ? FDSTORE_HEADROOM : 0;
	size_t room_bytes = flags & FDSTORE_CLIENT ? HEADROOM_BYTES : 0;

	return nsent + 1 + room <= entries_max && sent_bytes + len + room_bytes <= FDSTORE_NAMES_MAX;
}

/* Send kept[i] to the manager if it fits (else say so, once a minute); under lock. */
static int send_one(struct kept *k, int msg_flags)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(60, 1);
	size_t len = strlen(k->name) + 1;
	struct stored *st = stored_find(k->name);
	int r = 0;

	if (!fits(len, k->client ? FDSTORE_CLIENT : 0)) {
		log_msg_ratelimited(&rl, LOG_WARNING,
				    "The service manager's file descriptor store is full (%u fds, %zu bytes of names, of "
				    "%u and %u): '%s' and what follows will survive a re-execution but not a restart by "
				    "the service manager",
				    nsent, sent_bytes, entries_max, FDSTORE_NAMES_MAX, k->name);
		if (st && !st->gone) { /* a previous life's, beyond what comes back now */
			st->gone = true;
			(void)notify_sendf("FDSTOREREMOVE=1\nFDNAME=%s", k->name);
		}
		return -ENOSPC;
	}
	if (!stored_has(k->name, k->fd))
		r = notify_send_fds(k->state, &k->fd, 1, msg_flags);
	if (r < 0)
		return r;
	k->sent = true;
	nsent++;
	sent_bytes += len;
	return 0;
}

int fdstore_add(const char *name, int fd, unsigned flags)
{
	struct kept *k;
	struct stored *st;
	uint32_t *slot;
	bool found;
	int own = -1, r = 0;

	if (!name_valid(name) || fd < 0)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	if (nkept == capkept) {
		unsigned cap = capkept ? 2 * capkept : 64;
		struct kept *n = realloc(kept, cap * sizeof(*n));

		if (!n) {
			r = -ENOMEM;
			goto out;
		}
		kept = n;
		capkept = cap;
	}
	/* at most half the slots taken or removed, so that every probe ends soon */
	if ((nslots < 2 * capkept || 2 * (nkept + 1 + nslots_gone) > nslots) &&
	    (r = slots_rebuild(MAX(nslots, 4 * capkept))) < 0)
		goto out;
	slot = slot_find(name, &found);
	if (found) {
		r = -EEXIST;
		goto out;
	}
	/* kept after fdstore_exec_prepare: the table needs its own copy too */
	if (prepared && (own = fcntl(fd, F_DUPFD_CLOEXEC, FIRST_FD)) < 0) {
		r = -errno;
		goto out;
	}
	k = &kept[nkept];
	*k = (struct kept){ .fd = fd, .own = own, .client = flags & FDSTORE_CLIENT, .since = now_ns() };
	snprintf(k->name, sizeof(k->name), "%s", name);
	snprintf(k->state, sizeof(k->state), "FDSTORE=1\nFDNAME=%s%s", name, flags & FDSTORE_POLL ? "" : "\nFDPOLL=0");
	if ((st = stored_find(name)))
		st->claimed = true;
	/* the daemon's own go now (waiting: the manager must have them); a client's wait for
	 * fdstore_flush, and so does one that found no room */
	if (under_manager() && !k->client && (r = send_one(k, 0)) < 0 && r != -ENOSPC) {
		if (own >= 0)
			close(own);
		goto out;
	}
	if (under_manager() && !k->sent)
		due = MIN(due, k->since + FDSTORE_CLIENT_DELAY_NS);
	if (*slot == SLOT_GONE)
		nslots_gone--;
	*slot = ++nkept;
	r = 0;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

uint64_t fdstore_due(void)
{
	uint64_t d;

	pthread_mutex_lock(&lock);
	d = due;
	pthread_mutex_unlock(&lock);
	return d;
}

void fdstore_flush(uint64_t now, bool all)
{
	unsigned n = 0;

	if (!under_manager())
		return;
	pthread_mutex_lock(&lock);
	due = UINT64_MAX;
	for (unsigned i = 0; i < nkept; i++) {
		struct kept *k = &kept[i];
		int r;

		if (k->sent)
			continue;
		if (!all && now < k->since + FDSTORE_CLIENT_DELAY_NS) {
			due = MIN(due, k->since + FDSTORE_CLIENT_DELAY_NS);
			continue;
		}
		/* a stop waits for the manager; the event loop never does, and sends a few a second */
		r = all || n < FDSTORE_FLUSH_MAX ? send_one(k, all ? 0 : MSG_DONTWAIT) : -EAGAIN;
		n++;
		if (r < 0) /* busy, or no room now (one may be made): again later */
			due = MIN(due, now + FLUSH_INTERVAL_NS);
	}
	pthread_mutex_unlock(&lock);
	/* a stop: the manager must have taken them before it sees this process end, or it would
	 * hand the next life the store without them while it holds the sockets (the clients'
	 * requests then go unanswered) */
	if (all && n)
		(void)fdstore_barrier(5000);
}

void fdstore_remove(const char *name)
{
	char state[FDSTORE_NAME_MAX + 40];
	struct stored *gone;
	uint32_t *sl;
	bool found = false, sent = false;

	if (!name_valid(name))
		return;
	pthread_mutex_lock(&lock);
	sl = nslots ? slot_find(name, &found) : NULL;
	if (found) {
		struct kept *k = &kept[*sl - 1];

		if (k->own >= 0)
			close(k->own);
		sent = k->sent;
		if (sent) {
			nsent--;
			sent_bytes -= strlen(k->name) + 1;
		}
		kept_drop(*sl - 1);
	}
	gone = stored_find(name);
	if (gone)
		gone->gone = true;
	/* also when not kept here: a name a previous life left; not for one never sent (a client
	 * that came and went within FDSTORE_CLIENT_DELAY_NS costs the manager nothing) */
	if (sent || gone || !found) {
		snprintf(state, sizeof(state), "FDSTOREREMOVE=1\nFDNAME=%s", name);
		(void)notify_send(state);
	}
	pthread_mutex_unlock(&lock);
}

int fdstore_barrier(int timeout_ms)
{
	int p[2], r;
	struct pollfd pfd;

	if (!under_manager())
		return 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	/* the manager closes its copy of the write end once it has read this datagram, and it
	 * reads the socket in order: a hangup on the read end means all before it was processed */
	r = notify_send_fds("BARRIER=1", &p[1], 1, 0);
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

void fdstore_usage(struct fdstore_usage *ret)
{
	pthread_mutex_lock(&lock);
	*ret = (struct fdstore_usage){ .kept = nkept, .sent = nsent, .sent_bytes = sent_bytes,
				       .entries_max = entries_max, .names_max = FDSTORE_NAMES_MAX };
	pthread_mutex_unlock(&lock);
}

int fdstore_exec_prepare(void)
{
	unsigned i;
	int r = 0;

	pthread_mutex_lock(&lock);
	for (i = 0; i < nkept && !prepared; i++) {
		kept[i].own = fcntl(kept[i].fd, F_DUPFD_CLOEXEC, FIRST_FD);
		if (kept[i].own < 0) {
			r = -errno;
			break;
		}
	}
	if (r < 0) /* as it was: the daemon goes on serving */
		while (i--) {
			close(kept[i].own);
			kept[i].own = -1;
		}
	else
		prepared = true;
	pthread_mutex_unlock(&lock);
	return r;
}

/* The names joined by ':' (LISTEN_FDNAMES's format) in a sealed memfd; -errno on failure. */
static int names_memfd(void)
{
	_cleanup_close_ int fd = memfd_create("hugepoold-fdnames", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	for (unsigned i = 0; i < nkept; i++) {
		size_t len = strlen(kept[i].name);

		if (write(fd, kept[i].name, len) != (ssize_t)len ||
		    (i + 1 < nkept && write(fd, ":", 1) != 1))
			return errno ? -errno : -EIO;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/* Move *fd (ours) to a number at or above min, unless it is there already. */
static int move_above(int *fd, int min)
{
	int to;

	if (*fd < 0 || *fd >= min)
		return 0;
	to = fcntl(*fd, F_DUPFD_CLOEXEC, min);
	if (to < 0)
		return -errno;
	close(*fd);
	*fd = to;
	return 0;
}

int fdstore_exec(int exe_fd, int fallback_fd, char *const argv[])
{
	extern char **environ;
	char num[32];
	int names, top, r = 0;

	pthread_mutex_lock(&lock);
	if (!prepared) {
		pthread_mutex_unlock(&lock);
		return -EINVAL;
	}
	names = names_memfd();
	if (names < 0) {
		pthread_mutex_unlock(&lock);
		return names;
	}
	/* fds 3 .. 3 + nkept - 1 get the kept ones, 3 + nkept the names: first move every fd of
	 * ours out of that range, so that placing one never overwrites another */
	top = FIRST_FD + (int)nkept + 1;
	for (unsigned i = 0; i < nkept && r == 0; i++)
		r = move_above(&kept[i].own, top);
	if (r == 0 && (r = move_above(&names, top)) == 0 && (r = move_above(&exe_fd, top)) == 0)
		r = move_above(&fallback_fd, top);
	for (unsigned i = 0; i < nkept && r == 0; i++)
		if (dup2(kept[i].own, FIRST_FD + (int)i) < 0) /* dup2 clears FD_CLOEXEC on the copy */
			r = -errno;
	if (r == 0 && dup2(names, FIRST_FD + (int)nkept) < 0)
		r = -errno;
	if (r < 0) {
		pthread_mutex_unlock(&lock);
		return r;
	}
	snprintf(num, sizeof(num), "%d", (int)getpid());
	setenv("LISTEN_PID", num, 1);
	snprintf(num, sizeof(num), "%u", nkept);
	setenv("LISTEN_FDS", num, 1);
	snprintf(num, sizeof(num), "%d", FIRST_FD + (int)nkept);
	setenv(NAMES_FD_ENV, num, 1);
	unsetenv("LISTEN_FDNAMES");
	pthread_mutex_unlock(&lock);
	fexecve(exe_fd, argv, environ);
	r = -errno;
	if (fallback_fd >= 0) {
		log_error_errno(r, "Failed to execute the daemon's binary: %m; running this life's binary again");
		fexecve(fallback_fd, argv, environ);
		log_error_errno(errno, "Failed to execute this life's binary again: %m");
	}
	return r;
}
