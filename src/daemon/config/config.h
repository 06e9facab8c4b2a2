/* SPDX-License-Identifier: MIT */
/*
 * config.h - hugepoold's configuration: the parsed form of hugepoold.conf.
 *
 * config_load() reads a file of "key = value" lines with "[class NAME]" and "[journal NAME]"
 * sections into a struct config; it is called once at boot by the main thread (and by
 * --check-config). The result is
 * read-only afterwards and owned by main. Every error names the file, the line and the reason and
 * stops the load: the daemon refuses to start on any bad line rather than guessing.
 */
#ifndef HP_CONFIG_H
#define HP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jio.h"

#define CONFIG_DEFAULT_PATH "/etc/hugepool/hugepoold.conf"
#define CONFIG_DEFAULT_SOCKET "/run/hugepool/hugepoold.sock"
#define CONFIG_DEFAULT_SPILL_DIR "/var/tmp/hugepool"
/* a journal without a directory key gets CONFIG_DEFAULT_STATE_DIR/NAME: the unit's StateDirectory= */
#define CONFIG_DEFAULT_STATE_DIR "/var/lib/hugepool"
#define CONFIG_CLASS_NAME_MAX 31 /* bytes, without the NUL; [A-Za-z0-9_.-] */
#define CONFIG_CLASSES_MAX 64
#define CONFIG_JOURNALS_MAX 16
#define CONFIG_JOURNAL_NAME_MAX 31 /* same characters as class names */

enum hugepages_mode {
	HUGEPAGES_PREFER, /* hugetlb if enough free hugepages, else regular shmem (logged) */
	HUGEPAGES_REQUIRE, /* hugetlb or refuse to start */
	HUGEPAGES_OFF, /* regular shared memory (memfd) with MADV_HUGEPAGE */
};

/* How a restart asked of the running daemon (hugepoolctl restart, SIGUSR2) happens (reexec.h). */
enum restart_mode {
	RESTART_AUTO, /* takeover under a service manager ($NOTIFY_SOCKET) but as pid 1, else exec */
	RESTART_TAKEOVER, /* the next life starts beside this one and takes over (a new pid; not as pid 1) */
	RESTART_EXEC, /* this process executes the binary again (the same pid) */
};

/*
 * page_size = auto: the daemon picks a class's hugepage size at start (pages.h): 1 GiB for a
 * class whose buffers are a multiple of 1 GiB where the kernel offers 1 GiB pages, else 2 MiB.
 */
#define CONFIG_PAGE_SIZE_AUTO UINT64_C(0)

struct config_class {
	char name[CONFIG_CLASS_NAME_MAX + 1];
	uint64_t size; /* bytes per buffer, > 0, a multiple of the page size in use */
	uint32_t count; /* buffers, > 0 */
	/* 2M, 1G or CONFIG_PAGE_SIZE_AUTO: its page_size key, else the global one */
	uint64_t page_size;
	unsigned line; /* where it was defined, for messages */
};

/* jio.h's kinds under the configuration's names; jio.c holds the one table of their names */
enum journal_backend {
	JOURNAL_BACKEND_AUTO = JIO_AUTO, /* libaio, else io_uring, else sync (logged); then inline or
					  * queued as measured (journal_path.h) */
	JOURNAL_BACKEND_URING = JIO_URING,
	JOURNAL_BACKEND_AIO = JIO_AIO,
	JOURNAL_BACKEND_SYNC = JIO_SYNC,
};

/*
 * Who may do something: user names, numeric uids, "@group" names or "@gid", as written; the
 * daemon resolves them when it starts (access.h). set = the key was given.
 */
#define CONFIG_ACL_MAX 16
#define CONFIG_ACL_NAME_MAX 32 /* with the NUL */
struct config_acl {
	bool set;
	unsigned n;
	struct config_acl_entry {
		bool group; /* "@..." */
		char name[CONFIG_ACL_NAME_MAX]; /* a name or decimal digits */
	} e[CONFIG_ACL_MAX];
};

enum journal_op { JOURNAL_APPEND, JOURNAL_READ, JOURNAL_TRUNCATE, JOURNAL_OPS };

struct config_journal {
	char name[CONFIG_JOURNAL_NAME_MAX + 1];
	char directory[256]; /* absolute; created (0700) if missing; default /var/lib/hugepool/NAME */
	uint64_t segment_size; /* bytes per segment file; multiple of 4096, >= 1 MiB; default 64M */
	uint32_t segments; /* files preallocated and reused in turn; 2..1024, default 4 */
	enum journal_backend backend; /* default auto */
	bool direct; /* O_DIRECT with aligned batches; default off */
	uint64_t max_batch_delay_ns; /* time budget from the first pending record; default 2ms;
				      * a duration: 500us, 2ms, 1s (0 = flush at once) */
	uint64_t max_batch_bytes; /* default 1M; <= segment_size - 4096 */
	uint64_t ring_size; /* per writer: a power of two, 64K..64M; default 1M */
	bool recycle; /* when_full = recycle: reuse the oldest segment; block (default): refuse */
	/* append, read, truncate: who besides root and the daemon's uid may; unset = the
	 * members of the socket's group */
	struct config_acl access[JOURNAL_OPS];
	unsigned line;
};

#define CONFIG_GROUP_MAX 64 /* a group name with its NUL */

struct config {
	char socket_path[108]; /* sizeof(sun_path) */
	mode_t socket_mode; /* octal in the file, default 0660 */
	char socket_group[CONFIG_GROUP_MAX]; /* "" = the daemon's group */
	/* its members (and root and the daemon's own uid) see every client in status; "" = none */
	char admin_group[CONFIG_GROUP_MAX];
	/* its members see in status what admins see, and may do nothing else they may; "" = none */
	char monitor_group[CONFIG_GROUP_MAX];
	enum hugepages_mode hugepages; /* default prefer */
	enum restart_mode restart; /* default auto */
	/* 2M (default), 1G or CONFIG_PAGE_SIZE_AUTO: the hugetlb page size of every class that
	 * does not say its own */
	uint64_t page_size;
	unsigned prefault_threads; /* 0 = one per online CPU (default) */
	uint32_t max_connections; /* all clients together; default 1024 */
	uint32_t max_connections_per_uid; /* default 64; 0 = unlimited */
	uint64_t max_bytes_per_uid; /* leased bytes; default 0 = unlimited */
	/* journal writers open at once, all journals, all connections of a uid; default 64, 0 = no
	 * limit (a journal has 1024 writer slots for everyone) */
	uint32_t max_journal_writers_per_uid;
	/* the longest an acquire may wait, whatever it asks: a waiting request holds back later
	 * ones of its class (FIFO), so this bounds how long one client can stall a class;
	 * default 60 s, 0 = as long as the client asks */
	uint64_t max_acquire_wait_ns;
	/* spill streams (see spill.h); byte and file limits: 0 = unlimited */
	char spill_directory[256]; /* absolute; created (0700) if missing; default /var/tmp/hugepool */
	uint64_t spill_threshold; /* default in-memory bytes of a stream; 0..1G, default 1M */
	uint64_t spill_max_bytes; /* all spill files together; default 16G */
	uint32_t spill_max_files; /* default 4096 */
	uint64_t spill_max_bytes_per_uid; /* default 0 */
	uint32_t spill_max_files_per_uid; /* default 1024 */
	unsigned nclasses;
	struct config_class classes[CONFIG_CLASSES_MAX];
	unsigned njournals;
	struct config_journal journals[CONFIG_JOURNALS_MAX];
};

/* Fill *cfg with the defaults above and no classes. */
void config_init(struct config *cfg);

/*
 * Parse the file at path into *cfg (which config_load initialises first). On failure returns a
 * negative errno and writes a one-line message into err ("FILE:LINE: reason"), for example
 *   hugepoold.conf:12: unknown key "sise" in [class big]
 *   hugepoold.conf:3: bad size "12Q" for "size": expected a number with an optional K, M, G or T suffix
 *   hugepoold.conf:9: duplicate class "big" (first defined on line 4)
 * -ENOENT/-EACCES etc. when the file cannot be read (message says so), -EINVAL for content.
 */
int config_load(const char *path, struct config *cfg, char *err, size_t errlen);

/* Same as config_load, from a string already in memory (name is used in messages). */
int config_parse(const char *name, const char *text, struct config *cfg, char *err, size_t errlen);

/* Total bytes of all classes (size * count). */
uint64_t config_pool_bytes(const struct config *cfg);
/* Buffers of every class together. */
uint64_t config_buffers(const struct config *cfg);

/* A page_size value as the file writes it: "2M", "1G" or "auto". */
const char *config_page_size_name(uint64_t page_size);

/* "prefer", "require", "off" (config.c's table, also what `hugepages` takes) */
const char *hugepages_mode_to_string(enum hugepages_mode m);
int hugepages_mode_from_string(const char *s, enum hugepages_mode *ret);
const char *journal_backend_name(enum journal_backend b);
/* "auto", "takeover", "exec" */
const char *restart_mode_to_string(enum restart_mode m);
int restart_mode_from_string(const char *s, enum restart_mode *ret);

#endif
