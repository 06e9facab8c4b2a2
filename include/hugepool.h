/* SPDX-License-Identifier: MIT */
/*
 * hugepool.h - libhugepool, the client library of hugepoold. The whole public API.
 *
 * A process connects to the local hugepoold over its Unix socket and leases buffers from the
 * daemon's pool: shared memory that the daemon pre-faulted at boot (hugetlb pages when it could
 * get them), so a freshly started process holds gigabytes of ready memory in milliseconds.
 * Leases belong to the connection: hp_disconnect, exit or a crash (even SIGKILL) ends them all.
 *
 * Conventions: functions return 0 (or a count) on success and a negative errno on failure;
 * hp_strerror() explains one, hp_last_error() gives the daemon's own words for the last failure
 * on a connection. errno is not part of the API. The library never prints and never exits.
 *
 * Thread safety: an hp_conn is not thread-safe: use one connection per thread, or serialise
 * calls on a shared one yourself (a blocking hp_acquire holds the connection while it waits).
 * Different connections are independent. hp_strerror is thread-safe.
 */
#ifndef HUGEPOOL_H
#define HUGEPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HP_VERSION_MAJOR 0
#define HP_VERSION_MINOR 1
#define HP_DEFAULT_SOCKET "/run/hugepool/hugepoold.sock"
#define HP_NAME_MAX 32 /* class names, with the NUL */
#define HP_ACQUIRE_MAX 1024 /* buffers in one hp_acquire */

typedef struct hp_conn hp_conn;

/* A leased buffer, mapped read-write and shared into the calling process. */
struct hp_buffer {
	void *addr;
	size_t size;
	uint64_t lease_id; /* the daemon's name for this lease */
	char class_name[HP_NAME_MAX];
};

/*
 * Connect to hugepoold. socket_path NULL means $HUGEPOOL_SOCKET if set, else HP_DEFAULT_SOCKET.
 * Errors: -ENOENT/-ECONNREFUSED no daemon there, -EACCES not allowed to connect, -EUSERS the
 * daemon refuses more connections (of this uid, or at all), -EPROTONOSUPPORT protocol mismatch.
 */
int hp_connect(const char *socket_path, hp_conn **ret);

/* Close the connection; every buffer still leased through it is unmapped and released. NULL ok. */
void hp_disconnect(hp_conn *c);

/*
 * Lease n buffers (1..HP_ACQUIRE_MAX) of class class_name, all or none, and map them into
 * bufs[0..n-1]. timeout_ms: 0 = only if they are free now, > 0 = wait at most that long,
 * < 0 = wait as long as it takes. Waiters of a class are served in order of arrival.
 * Buffers come faulted in and mapped with their page tables populated; their content is what
 * the previous holder of the same uid left, or zeroes when it passes from another uid.
 * Errors: -ENOENT no such class, -E2BIG more buffers than the class has, -EINVAL n = 0,
 * -EAGAIN not free now (timeout 0), -ETIMEDOUT, -EDQUOT the uid's byte limit, -ENOMEM,
 * -ECONNRESET the daemon went away.
 */
int hp_acquire(hp_conn *c, const char *class_name, unsigned n, int64_t timeout_ms, struct hp_buffer *bufs);

/* Unmap and release n buffers obtained from hp_acquire on this connection. */
int hp_release(hp_conn *c, struct hp_buffer *bufs, unsigned n);

struct hp_class_status {
	char name[HP_NAME_MAX];
	uint64_t size; /* bytes per buffer */
	uint32_t total, free, leased, waiters;
	uint32_t zeroing; /* being given fresh pages for another uid (counted in none of the others) */
};

struct hp_client_status {
	char name[HP_NAME_MAX];
	pid_t pid;
	uid_t uid;
	gid_t gid;
	uint32_t leases;
	uint64_t leased_bytes;
	uint64_t connected_ns; /* CLOCK_REALTIME, ns since the epoch */
	int waiting; /* 1 while an acquire of this client waits */
};

struct hp_lease_status {
	uint64_t lease_id;
	pid_t pid;
	uid_t uid;
	uint32_t class_index; /* into hp_status.classes */
	uint64_t since_ns; /* CLOCK_REALTIME */
};

struct hp_status {
	char daemon_version[16];
	pid_t daemon_pid;
	uint64_t started_ns; /* CLOCK_REALTIME */
	uint64_t page_size;
	int hugetlb; /* 1: hugetlb pages of page_size */
	int fallback; /* 1: hugepages were preferred but not available */
	char fallback_reason[128];
	uint64_t pool_bytes;
	uint64_t boot_prefault_ns;
	uint32_t boot_threads;
	uint64_t connections_total, acquires, grants, releases, timeouts, denials, protocol_errors,
		recycled_buffers, disconnect_releases;
	uint32_t nclasses, nclients, nleases;
	struct hp_class_status *classes;
	struct hp_client_status *clients;
	struct hp_lease_status *leases;
};

/* The daemon's state. Free the result with hp_status_free. */
int hp_status(hp_conn *c, struct hp_status **ret);
void hp_status_free(struct hp_status *st);

/* A message for a negative errno returned by this library (static, thread-safe). */
const char *hp_strerror(int err);

/*
 * The daemon's explanation of the last failure on c ("" if none or it gave none). With c NULL:
 * why the calling thread's last hp_connect failed (a refusal's reason from the daemon, or the
 * socket path and system error), "" after a successful one. The text stays valid until the
 * next call on c (or the thread's next hp_connect).
 */
const char *hp_last_error(const hp_conn *c);

#ifdef __cplusplus
}
#endif
#endif
