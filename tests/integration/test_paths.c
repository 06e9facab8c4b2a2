/* SPDX-License-Identifier: MIT */
/*
 * test_paths.c - the directories hugepoold keeps files in (spill files, journals, its socket)
 * against another uid that plants names first (the second audit, finding 4): a symlink or a
 * directory of that uid where the daemon's directory should be, in a directory every user may
 * write (as /var/tmp and /tmp are), is refused at start with the reason, and nothing is created
 * or removed where it leads; leftover spill files are removed only when they are the daemon's.
 *
 * The daemon runs as root here, as it does outside systemd, and the attacker is
 * HARNESS_OTHER_UID; without root every case is skipped.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"

#define CLASSES "[class one]\nsize = 4K\ncount = 1\n"

/* A root-owned scratch tree: pub/ (mode 1777, as /var/tmp) and shm/ (1777, as /dev/shm), other/ (0700). */
static char top[64];

static void mk(const char *name, mode_t mode)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", top, name);
	assert_int_equal(mkdir(path, mode), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(top, sizeof(top), "/tmp/hugepool-paths.XXXXXX");
	if (!mkdtemp(top))
		return -1;
	chmod(top, 0755);
	mk("pub", 01777);
	mk("shm", 01777);
	mk("other", 0700);
	return 0;
}

static int cleanup(void **state)
{
	char cmd[128];

	teardown(state); /* a daemon a failed case left running */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	return system(cmd) == 0 ? 0 : -1;
}

static bool exists(const char *name)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", top, name);
	return lstat(path, &st) == 0;
}

/* As the other uid: symlink pub/NAME -> top/TARGET, or make pub/NAME a directory of its own. */
struct plant {
	const char *name, *target; /* target NULL: a directory */
};

static int plant_main(void *arg)
{
	const struct plant *p = arg;
	char link[128], to[128];

	snprintf(link, sizeof(link), "%s/pub/%s", top, p->name);
	if (!p->target)
		return mkdir(link, 0777) == 0 && chmod(link, 0777) == 0 ? 0 : 20;
	snprintf(to, sizeof(to), "%s/%s", top, p->target);
	return symlink(to, link) == 0 ? 0 : 21;
}

/* A file that belongs to uid in top/dir. */
static void file_of(const char *dir, const char *name, uid_t uid)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s/%s", top, dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchown(fd, uid, uid), 0);
	close(fd);
}

/*
 * The default spill directory lives in /var/tmp. Another uid made it a symlink to /dev/shm
 * first: the daemon (root) took it, since the target belongs to root, removed that uid's victim's
 * "spill-*" files there ("Removed 1 spill files left in ...") and put spill bytes in memory. Now
 * it refuses to start, and the file is still there.
 */
static void test_spill_symlink_refused(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	char globals[256];

	(void)state;
	if (!harness_two_uids())
		skip();
	file_of("shm", "spill-victim", HARNESS_OTHER_UID + 1);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, plant_main, &(struct plant){ "hugepool", "shm" }), 0);
	snprintf(globals, sizeof(globals), "hugepages = off\nspill_directory = %s/pub/hugepool\n", top);
	start_refused(&d, globals, CLASSES, 6, "is a symlink of uid 65534");
	assert_true(exists("shm/spill-victim"));
}

/* A journal directory planted as a symlink into a directory of root's: refused, nothing made there. */
static void test_journal_symlink_refused(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	char classes[256];

	(void)state;
	if (!harness_two_uids())
		skip();
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, plant_main, &(struct plant){ "j", "other" }), 0);
	snprintf(classes, sizeof(classes), CLASSES "[journal j]\ndirectory = %s/pub/j\nsegment_size = 1M\n", top);
	start_refused(&d, "hugepages = off\n", classes, 5, "is a symlink of uid 65534");
	assert_false(exists("other/j-000.seg"));
}

/*
 * The socket's directory made by another uid in a directory everyone may write: that uid could
 * put a socket of its own at the path once the daemon bound it (a fake daemon for every client)
 * or have root unlink a socket elsewhere. Refused at start.
 */
static void test_socket_dir_of_another_uid_refused(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	char globals[256];

	(void)state;
	if (!harness_two_uids())
		skip();
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, plant_main, &(struct plant){ "run", NULL }), 0);
	snprintf(globals, sizeof(globals), "hugepages = off\nsocket = %s/pub/run/hugepoold.sock\n", top);
	start_refused(&d, globals, CLASSES, 4, "pub/run' belongs to uid 65534 in a directory every user may write");
}

/* The same places made by the daemon itself, or by root, are used as always. */
static void test_own_directories_used(void **state)
{
	static struct daemon d;
	char globals[512], classes[256];

	(void)state;
	if (!harness_two_uids())
		skip();
	/* in a directory every user may write: made by the daemon, so its own */
	snprintf(globals, sizeof(globals), "hugepages = off\nspill_directory = %s/pub/spill-own\n", top);
	snprintf(classes, sizeof(classes), CLASSES "[journal j]\ndirectory = %s/pub/j-own\nsegment_size = 1M\n", top);
	start(&d, globals, classes);
	stop(&d);
	assert_true(exists("pub/spill-own"));
	assert_true(exists("pub/j-own"));
}

/*
 * Names left in the spill directory from a daemon that died between creating and unlinking a
 * file are removed at start; a file of another uid there is not the daemon's to remove (the
 * directory is one the administrator made writable for others).
 */
static void test_leftovers_only_the_daemons(void **state)
{
	static struct daemon d;
	char globals[256];

	(void)state;
	if (!harness_two_uids())
		skip();
	mk("loose", 0777);
	file_of("loose", "spill-mine", 0);
	file_of("loose", "spill-theirs", HARNESS_OTHER_UID);
	snprintf(globals, sizeof(globals), "hugepages = off\nspill_directory = %s/loose\n", top);
	start(&d, globals, CLASSES);
	stop(&d);
	assert_false(exists("loose/spill-mine"));
	assert_true(exists("loose/spill-theirs"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_spill_symlink_refused, setup, cleanup),
		cmocka_unit_test_setup_teardown(test_journal_symlink_refused, setup, cleanup),
		cmocka_unit_test_setup_teardown(test_socket_dir_of_another_uid_refused, setup, cleanup),
		cmocka_unit_test_setup_teardown(test_own_directories_used, setup, cleanup),
		cmocka_unit_test_setup_teardown(test_leftovers_only_the_daemons, setup, cleanup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
