/* SPDX-License-Identifier: MIT */
/*
 * fdstore.c - see fdstore.h. The in-process table mirrors what was sent to the service
 * manager, so that a re-execution hands over exactly what systemd would have handed back; it
 * also counts what the manager could hand back (the names' bytes, the entries) and refuses
 * what would not fit. `lock` guards the table and the stored list.
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
#include <sys/resource.h>
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
	int fd; /* the caller's, open until it is forgotten or removed (fdstore_exec hands these over) */
	bool sent; /* to the service manager */
	bool handed; /* given to a take-over's next life (fdstore_handover_next) */
	bool client; /* FDSTORE_CLIENT: sent by fdstore_flush once kept FDSTORE_CLIENT_DELAY_NS */
	bool poll; /* FDSTORE_POLL: its datagram leaves FDPOLL at systemd's default */
	uint64_t since; /* CLOCK_MONOTONIC ns it was kept at */
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
static unsigned entries_max = FDSTORE_ENTRIES_DEFAULT; /* set once at boot ($FDSTORE) */
static uint64_t due = UINT64_MAX; /* when fdstore_flush has something to send */
/* not the service's main process yet (fdstore_manager_wait): its messages, for later */
static bool waiting;
static char **held_back;
static unsigned nheld_back, capheld_back;

/* A take-over being handed (fdstore_handover_begin): what changed of what was given since. */
static struct {
	bool on;
	fdstore_name *removed, *held;
	unsigned nremoved, capremoved, nheld, capheld;
} ho;

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

static int stored_name_cmp(const void *name, const void *b)
{
	return strcmp(name, ((const struct stored *)b)->name);
}

static struct stored *stored_find(const char *name)
{
	return nstored ? bsearch(name, stored, nstored, sizeof(*stored), stored_name_cmp) : NULL;
}

/* Remember what the service manager holds of fds (n of them, named; sorted by name or not). */
static void stored_set(const struct fdstore_fd *fds, unsigned n)
{
	struct stored *st = calloc(n ? n : 1, sizeof(*st));
	unsigned k = 0;
	bool sorted = true;

	for (unsigned i = 0; st && i < n; i++) {
		if (fds[i].fd < 0 || !fds[i].name[0] || !fds[i].held)
			continue;
		memcpy(st[k].name, fds[i].name, sizeof(st[k].name)); /* both FDSTORE_NAME_MAX + 1 */
		st[k].name[FDSTORE_NAME_MAX] = '\0';
		st[k].fd = fds[i].fd;
		sorted = sorted && (k == 0 || strcmp(st[k - 1].name, st[k].name) <= 0);
		k++;
	}
	/* a restart's thousands come sorted (fdstore_receive): sorting them again was most of this */
	if (!sorted)
		qsort(st, k, sizeof(*st), stored_cmp);
	pthread_mutex_lock(&lock);
	free(stored);
	stored = st;
	nstored = st ? k : 0;
	pthread_mutex_unlock(&lock);
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

static bool under; /* under_manager's answer, set once */

static void under_init(void)
{
	under = getenv("NOTIFY_SOCKET") != NULL;
}

/* Is a service manager keeping what we send? */
static bool under_manager(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	/* the daemon never sets or unsets it: looked up once, not per fd kept */
	pthread_once(&once, under_init);
	return under;
}

/* Tell the service manager msg (FDSTOREREMOVE=1), or keep it for when this life may; under lock. */
static void manager_msg(const char *msg)
{
	char *copy;

	if (!waiting) {
		(void)notify_send(msg);
		return;
	}
	if (ARRAY_RESERVE_ONE(held_back, nheld_back, capheld_back, 16) < 0 || !(copy = strdup(msg)))
		return; /* out of memory: the manager keeps a copy the next start drops */
	held_back[nheld_back++] = copy;
}

/* Append name to a list of names (a take-over's changes); under lock. */
static void name_append(fdstore_name **list, unsigned *n, unsigned *cap, const char *name)
{
	if (ARRAY_RESERVE_ONE(*list, *n, *cap, 64) < 0)
		return; /* out of memory: fdstore_handover_delta says so */
	snprintf((*list)[(*n)++], sizeof(fdstore_name), "%s", name);
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
		fds[i].held = true;
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
	fdstore_sort(fds, (unsigned)nfds);
	stored_set(fds, (unsigned)nfds);
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
		if (fds[i].fd >= 0 && !fds[i].gone) {
			int fd = fds[i].fd;

			fds[i].fd = -1;
			return fd;
		}
	return -1;
}

int fdstore_untake(struct fdstore_fd *fds, unsigned n, const char *name, int fd)
{
	for (unsigned i = handed_first(fds, n, name); i < n && strcmp(fds[i].name, name) == 0; i++)
		if (fds[i].fd < 0 && !fds[i].gone) {
			fds[i].fd = fd;
			return 0;
		}
	return -ENOENT;
}

bool fdstore_has(const struct fdstore_fd *fds, unsigned n, const char *name)
{
	for (unsigned i = handed_first(fds, n, name); i < n && strcmp(fds[i].name, name) == 0; i++)
		if (fds[i].fd >= 0 && !fds[i].gone)
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
			char msg[FDSTORE_NAME_MAX + 40];

			stored[i].gone = true;
			snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", stored[i].name);
			manager_msg(msg);
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

/*
 * Send kept[i] to the manager if it fits (else say so, once a minute); under lock. st: what the
 * manager holds under its name (stored_find), which the caller looked up.
 */
static int send_one(struct kept *k, struct stored *st, int msg_flags)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(60, 1);
	size_t len = strlen(k->name) + 1;
	int r = 0;

	if (!fits(len, k->client ? FDSTORE_CLIENT : 0)) {
		log_msg_ratelimited(&rl, LOG_WARNING,
				    "The service manager's file descriptor store is full (%u fds, %zu bytes of names, of "
				    "%u and %u): '%s' and what follows will survive a re-execution but not a restart by "
				    "the service manager",
				    nsent, sent_bytes, entries_max, FDSTORE_NAMES_MAX, k->name);
		if (st && !st->gone) { /* a previous life's, beyond what comes back now */
			char msg[FDSTORE_NAME_MAX + 40];

			st->gone = true;
			snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", k->name);
			manager_msg(msg);
		}
		return -ENOSPC;
	}
	/* one the manager holds already under that name and number is not sent again */
	if (!st || st->gone || st->fd != k->fd) {
		char msg[FDSTORE_NAME_MAX + 40];

		snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s%s", k->name, k->poll ? "" : "\nFDPOLL=0");
		r = notify_send_fds(msg, &k->fd, 1, msg_flags);
	}
	if (r < 0)
		return r;
	k->sent = true;
	nsent++;
	sent_bytes += len;
	if (ho.on && k->handed) /* the next life thinks the manager does not hold it yet */
		name_append(&ho.held, &ho.nheld, &ho.capheld, k->name);
	return 0;
}

int fdstore_add(const char *name, int fd, unsigned flags)
{
	struct kept *k;
	struct stored *st;
	uint32_t *slot;
	bool found;
	int r = 0;

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
	k = &kept[nkept];
	*k = (struct kept){ .fd = fd,
			    .client = flags & FDSTORE_CLIENT,
			    .poll = flags & FDSTORE_POLL,
			    .since = now_ns() };
	memcpy(k->name, name, strlen(name) + 1); /* name_valid: at most FDSTORE_NAME_MAX */
	if ((st = stored_find(name)))
		st->claimed = true;
	/* the daemon's own go now (waiting: the manager must have them); a client's wait for
	 * fdstore_flush, and so does one that found no room */
	if (under_manager() && !waiting && !k->client && (r = send_one(k, st, 0)) < 0 && r != -ENOSPC)
		goto out;
	if (under_manager() && !waiting && !k->sent)
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
	if (waiting) {
		pthread_mutex_unlock(&lock);
		return;
	}
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
		r = all || n < FDSTORE_FLUSH_MAX ? send_one(k, stored_find(k->name), all ? 0 : MSG_DONTWAIT) : -EAGAIN;
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

/* Drop kept[i] from the table; under lock. Returns whether the manager had been sent it. */
static bool kept_forget(unsigned i)
{
	struct kept *k = &kept[i];
	bool sent = k->sent;

	if (sent) {
		nsent--;
		sent_bytes -= strlen(k->name) + 1;
	}
	if (ho.on && k->handed) /* the next life has it: it must let go of it too */
		name_append(&ho.removed, &ho.nremoved, &ho.capremoved, k->name);
	kept_drop(i);
	return sent;
}

void fdstore_forget(const char *name)
{
	uint32_t *sl;
	bool found = false;

	pthread_mutex_lock(&lock);
	sl = nslots ? slot_find(name, &found) : NULL;
	if (found) {
		struct stored *st = stored_find(name);
		struct kept *k = &kept[*sl - 1];

		/* still the manager's under that name: kept again, it is not sent twice */
		if (k->sent && st && !st->gone)
			st->fd = k->fd;
		if (k->sent) {
			nsent--;
			sent_bytes -= strlen(k->name) + 1;
		}
		kept_drop(*sl - 1);
	}
	pthread_mutex_unlock(&lock);
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
	if (found)
		sent = kept_forget(*sl - 1);
	gone = stored_find(name);
	if (gone)
		gone->gone = true;
	/* also when not kept here: a name a previous life left; not for one never sent (a client
	 * that came and went within FDSTORE_CLIENT_DELAY_NS costs the manager nothing) */
	if (sent || gone || !found) {
		snprintf(state, sizeof(state), "FDSTOREREMOVE=1\nFDNAME=%s", name);
		manager_msg(state);
	}
	pthread_mutex_unlock(&lock);
}

int fdstore_barrier(int timeout_ms)
{
	int p[2], r;
	struct pollfd pfd;
	bool notes_held;

	/* the recycler asks while the loop may end the wait (fdstore_manager_ready) */
	pthread_mutex_lock(&lock);
	notes_held = waiting;
	pthread_mutex_unlock(&lock);
	if (!under_manager() || notes_held)
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

/* --- a take-over (takeover.h) ------------------------------------------------------------ */

int fdstore_handover_begin(void)
{
	pthread_mutex_lock(&lock);
	free(ho.removed);
	free(ho.held);
	ho = (typeof(ho)){ .on = true };
	for (unsigned i = 0; i < nkept; i++)
		kept[i].handed = false;
	pthread_mutex_unlock(&lock);
	return 0;
}

int fdstore_handover_batch(unsigned max, int (*give)(const struct fdstore_handed *batch, unsigned n, void *ud),
			   void *ud)
{
	struct fdstore_handed *out = calloc(max ? max : 1, sizeof(*out));
	unsigned n = 0;
	int r = 0;

	if (!out)
		return -ENOMEM;
	/* held throughout: the recycler thread forgets a buffer's memfd here before it closes it */
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; ho.on && i < nkept && n < max; i++) {
		struct kept *k = &kept[i];

		if (k->handed)
			continue;
		memcpy(out[n].name, k->name, sizeof(out[n].name));
		out[n].fd = k->fd;
		out[n++].held = k->sent;
	}
	if (n)
		r = give(out, n, ud);
	for (unsigned i = 0; r == 0 && i < n; i++) {
		bool found;
		uint32_t *sl = slot_find(out[i].name, &found);

		if (found)
			kept[*sl - 1].handed = true;
	}
	pthread_mutex_unlock(&lock);
	free(out);
	return r < 0 ? r : (int)n;
}

void fdstore_handover_given(const struct fdstore_handed *given, unsigned n)
{
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; ho.on && i < n; i++) {
		bool found;
		uint32_t *sl = slot_find(given[i].name, &found);

		if (found)
			kept[*sl - 1].handed = true;
	}
	pthread_mutex_unlock(&lock);
}

int fdstore_handover_delta(struct fdstore_handed **ret_added, unsigned *ret_nadded, fdstore_name **ret_removed,
			   unsigned *ret_nremoved, fdstore_name **ret_held, unsigned *ret_nheld)
{
	struct fdstore_handed *added;
	unsigned n = 0;
	int r = 0;

	pthread_mutex_lock(&lock);
	added = calloc(nkept ? nkept : 1, sizeof(*added));
	if (!added) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < nkept; i++)
		if (!kept[i].handed) {
			kept[i].handed = true;
			memcpy(added[n].name, kept[i].name, sizeof(added[n].name));
			added[n].fd = kept[i].fd;
			added[n++].held = kept[i].sent;
		}
	*ret_added = added;
	*ret_nadded = n;
	*ret_removed = ho.removed;
	*ret_nremoved = ho.nremoved;
	*ret_held = ho.held;
	*ret_nheld = ho.nheld;
	/* the lists are the caller's now; what changes from here on is recorded anew */
	ho.removed = ho.held = NULL;
	ho.nremoved = ho.capremoved = ho.nheld = ho.capheld = 0;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

void fdstore_handover_end(void)
{
	pthread_mutex_lock(&lock);
	free(ho.removed);
	free(ho.held);
	ho = (typeof(ho)){ 0 };
	pthread_mutex_unlock(&lock);
}

void fdstore_handed_init(const struct fdstore_fd *fds, unsigned n)
{
	stored_set(fds, n);
}

int fdstore_handed_merge(struct fdstore_fd **fds, unsigned *n, const struct fdstore_fd *added, unsigned nadded,
			 const fdstore_name *removed, unsigned nremoved, const fdstore_name *held, unsigned nheld)
{
	struct fdstore_fd *all = *fds;
	unsigned m = *n;
	struct stored *st;

	/* the added ones (sorted) merged into the sorted array: no sort of thousands again */
	if (nadded) {
		struct fdstore_fd *merged = malloc((m + nadded) * sizeof(*merged));
		unsigned i = 0, k = 0, o = 0;

		if (!merged)
			return -ENOMEM;
		while (i < m || k < nadded)
			merged[o++] = k == nadded || (i < m && strcmp(all[i].name, added[k].name) <= 0) ? all[i++]
												: added[k++];
		free(all);
		*fds = all = merged;
		*n = m = o;
	}
	/* forgotten by the running life: nobody takes it (closed with what nobody took); one this
	 * life took, its taker lets go of */
	for (unsigned r = 0; r < nremoved; r++)
		for (unsigned i = handed_first(all, m, removed[r]); i < m && strcmp(all[i].name, removed[r]) == 0; i++)
			if (all[i].fd >= 0)
				all[i].gone = true;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nremoved; i++)
		if ((st = stored_find(removed[i])))
			st->gone = true;
	/* what the manager holds now: the given ones it took since, and the added ones it has */
	if (nheld || nadded) {
		struct stored *more = calloc(nheld + nadded, sizeof(*more)), *merged;
		unsigned k = 0, i = 0, j = 0, o = 0;

		for (unsigned h = 0; more && h < nheld; h++)
			for (unsigned a = handed_first(all, m, held[h]); a < m && strcmp(all[a].name, held[h]) == 0; a++)
				if (all[a].fd >= 0 && !all[a].gone) {
					more[k] = (struct stored){ .fd = all[a].fd };
					memcpy(more[k++].name, held[h], sizeof(more[0].name));
					break;
				}
		for (unsigned a = 0; more && a < nadded; a++)
			if (added[a].held) {
				more[k] = (struct stored){ .fd = added[a].fd };
				memcpy(more[k++].name, added[a].name, sizeof(more[0].name));
			}
		/* the few sorted, then merged into the many: stored_find searches them */
		qsort(more, k, sizeof(*more), stored_cmp);
		merged = more ? malloc((nstored + k ? nstored + k : 1) * sizeof(*merged)) : NULL;
		while (merged && (i < nstored || j < k))
			merged[o++] = j == k || (i < nstored && stored_cmp(&stored[i], &more[j]) <= 0) ? stored[i++]
											   : more[j++];
		if (merged) {
			free(stored);
			stored = merged;
			nstored = o;
		}
		free(more);
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

void fdstore_manager_wait(void)
{
	pthread_mutex_lock(&lock);
	waiting = true;
	pthread_mutex_unlock(&lock);
}

void fdstore_manager_ready(void)
{
	pthread_mutex_lock(&lock);
	waiting = false;
	for (unsigned i = 0; i < nheld_back; i++) {
		(void)notify_send(held_back[i]);
		free(held_back[i]);
	}
	free(held_back);
	held_back = NULL;
	nheld_back = capheld_back = 0;
	/* what this life kept meanwhile goes as a client's does, a few at every turn of the event
	 * loop (fdstore_flush): the clients are served meanwhile; this life's state, the one that
	 * matters should it crash, the running life gave the manager before it stopped */
	for (unsigned i = 0; i < nkept; i++)
		if (!kept[i].sent)
			kept[i].since = 0;
	/* nothing is sent with no manager: a flush would be due, undone, for ever (the event loop
	 * spun at every turn after a take-over without one) */
	if (under_manager())
		due = 0;
	pthread_mutex_unlock(&lock);
}

/*
 * A re-execution's own fds (the names' memfd, the two binaries) need numbers above the kept
 * fds' range at the exec, when the daemon has stopped and can no longer refuse: taken here while
 * it serves, given back at the exec. Above the range as it is now by EXEC_SPARE_SLACK, for
 * what is kept meanwhile (connections accepted while the restart is checked).
 */
#define EXEC_SPARE 3
#define EXEC_SPARE_SLACK 1024
static int spare[EXEC_SPARE] = { -1, -1, -1 };

static void spare_close(void)
{
	for (unsigned i = 0; i < EXEC_SPARE; i++)
		if (spare[i] >= 0) {
			close(spare[i]);
			spare[i] = -1;
		}
}

int fdstore_exec_prepare(void)
{
	struct rlimit rl;
	int64_t top, min, lim = INT32_MAX;
	int null = -1, r = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < INT32_MAX)
		lim = (int64_t)rl.rlim_cur;
	pthread_mutex_lock(&lock);
	/* above 3 + nkept, the names' number, and below the limit (F_DUPFD refuses beyond it) */
	top = FIRST_FD + (int64_t)nkept + 1;
	min = MIN(top + EXEC_SPARE_SLACK, lim - EXEC_SPARE);
	if (min < top)
		r = -EMFILE;
	else if ((null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		r = -errno;
	for (unsigned i = 0; i < EXEC_SPARE && r == 0; i++)
		if (spare[i] < 0 && (spare[i] = fcntl(null, F_DUPFD_CLOEXEC, (int)min)) < 0 &&
		    (errno != EMFILE || (spare[i] = fcntl(null, F_DUPFD_CLOEXEC, (int)top)) < 0))
			r = -errno; /* none free above min (near the limit), and none above top either */
	if (null >= 0)
		close(null);
	if (r < 0) /* as it was: the daemon goes on serving */
		spare_close();
	pthread_mutex_unlock(&lock);
	return r;
}

/*
 * The names of kept[order[0]], kept[order[1]], ... joined by ':' (LISTEN_FDNAMES's format) in a
 * sealed memfd; -errno on failure. Built in memory and written at once: a write per name cost a
 * 4 GiB pool's restart 4 ms of its pause.
 */
static int names_memfd(const unsigned *order)
{
	_cleanup_close_ int fd = memfd_create("hugepoold-fdnames", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	if (fd < 0)
		return -errno;
	for (unsigned i = 0; i < nkept; i++)
		cap += strlen(kept[i].name) + 1;
	buf = malloc(cap ? cap : 1);
	if (!buf)
		return -ENOMEM;
	for (unsigned i = 0; i < nkept; i++) {
		const char *name = kept[order[i]].name;
		size_t n = strlen(name);

		memcpy(buf + len, name, n);
		len += n;
		if (i + 1 < nkept)
			buf[len++] = ':';
	}
	for (size_t done = 0; done < len;) {
		ssize_t n = write(fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/*
 * Which kept fd goes to 3 + t (order[t]): each one already in 3 .. 3 + nkept - 1 stays where it is
 * (after a re-execution, all of them), the others take the numbers left, in the table's order.
 * order has nkept entries.
 */
static void exec_order(unsigned *order)
{
	unsigned t = 0;

	for (unsigned i = 0; i < nkept; i++)
		order[i] = UINT32_MAX;
	for (unsigned i = 0; i < nkept; i++) {
		int slot = kept[i].fd - FIRST_FD;

		if (slot >= 0 && (unsigned)slot < nkept && order[slot] == UINT32_MAX)
			order[slot] = i;
	}
	for (unsigned i = 0; i < nkept; i++) {
		int slot = kept[i].fd - FIRST_FD;

		if (slot >= 0 && (unsigned)slot < nkept && order[slot] == i)
			continue; /* in place */
		while (order[t] != UINT32_MAX)
			t++;
		order[t] = i;
	}
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
	_cleanup_free_ unsigned *order = NULL;
	char num[32];
	int names, top, r = 0;

	pthread_mutex_lock(&lock);
	spare_close(); /* the numbers fdstore_exec_prepare kept for what follows */
	order = malloc((nkept ? nkept : 1) * sizeof(*order));
	if (!order) {
		pthread_mutex_unlock(&lock);
		return -ENOMEM;
	}
	exec_order(order);
	names = names_memfd(order);
	if (names < 0) {
		pthread_mutex_unlock(&lock);
		return names;
	}
	/*
	 * fds 3 .. 3 + nkept - 1 get the kept ones, 3 + nkept the names. What the exec needs is moved
	 * above that range first; whatever else of ours is in it (an epoll, a copy of nothing kept)
	 * is closed by the dup2 that takes its number, or by the exec.
	 */
	top = FIRST_FD + (int)nkept + 1;
	if ((r = move_above(&names, top)) == 0 && (r = move_above(&exe_fd, top)) == 0)
		r = move_above(&fallback_fd, top);
	for (unsigned t = 0; t < nkept && r == 0; t++) {
		int fd = kept[order[t]].fd, to = FIRST_FD + (int)t;

		/* in place: kept by this exec, as inherited; else a copy there (dup2 clears FD_CLOEXEC),
		 * whose original is out of the range and so still where it was */
		if (fd == to ? fcntl(fd, F_SETFD, 0) < 0 : dup2(fd, to) < 0)
			r = -errno;
	}
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
