/* SPDX-License-Identifier: MIT */
/*
 * safedir.c - see safedir.h. The walk keeps an O_PATH fd of the directory reached so far and
 * looks at each next name with fstatat(AT_SYMLINK_NOFOLLOW) before opening it with O_NOFOLLOW,
 * so what is checked is what is opened; a symlink restarts the walk at its target (from "/" or
 * from the directory it is in), at most SYMLINKS_MAX times, and ".." walks again from "/" to the
 * parent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safedir.h"
#include "util.h"

#define SYMLINKS_MAX 32

static bool trusted_owner(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* May someone other than its owner (root or us) add, rename or remove names in directory st? */
static bool others_may_write(const struct stat *st)
{
	return st->st_mode & (S_IWGRP | S_IWOTH);
}

/*
 * Is the entry st (called name) of directory dir (called at) one nobody else can swap? why in err
 * when not.
 */
static bool entry_safe(const char *at, const struct stat *dir, const char *name, const struct stat *st,
		       char *err, size_t errlen)
{
	if (!trusted_owner(dir->st_uid)) {
		snprintf(err, errlen, "'%s' belongs to uid %u, who could replace '%s' in it", at, (unsigned)dir->st_uid,
			 name);
		return false;
	}
	if (others_may_write(dir) && !(dir->st_mode & S_ISVTX)) {
		snprintf(err, errlen, "'%s' (mode %04o) lets others replace '%s' in it", at,
			 (unsigned)(dir->st_mode & 07777), name);
		return false;
	}
	if (S_ISLNK(st->st_mode) && !trusted_owner(st->st_uid)) {
		snprintf(err, errlen, "'%s/%s' is a symlink of uid %u", at, name, (unsigned)st->st_uid);
		return false;
	}
	if (others_may_write(dir) && !trusted_owner(st->st_uid)) {
		/* sticky: only the entry's owner may rename it, and that owner is not trusted */
		snprintf(err, errlen, "'%s/%s' belongs to uid %u in a directory every user may write", at, name,
			 (unsigned)st->st_uid);
		return false;
	}
	return true;
}

/*
 * Go on with path (then what was still to do, rest): from "/" when from_root (the walk's fd
 * *dir, its stat *dst and its name at start there again), else from where the walk is. The new
 * path to do replaces *todo; *rest points into it.
 */
static int walk_again(const char *path, const char *rest, bool from_root, char **todo, char **ret_rest, int *dir,
		      struct stat *dst, char at[PATH_MAX])
{
	char *next;

	if (asprintf(&next, "%s/%s", path, rest ? rest : "") < 0)
		return -ENOMEM;
	free(*todo);
	*todo = *ret_rest = next;
	if (!from_root)
		return 0;
	close(*dir);
	*dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dir < 0 || fstat(*dir, dst) < 0)
		return -errno;
	snprintf(at, PATH_MAX, "/");
	return 0;
}

int safedir_open(const char *path, unsigned flags, char *err, size_t errlen)
{
	_cleanup_free_ char *todo = NULL;
	char at[PATH_MAX] = "/", target[PATH_MAX];
	_cleanup_close_ int dir = -1;
	struct stat dst, st;
	unsigned links = 0;
	char *rest, *name;
	int fd, r;

	if (path[0] != '/') {
		snprintf(err, errlen, "'%s' is not an absolute path", path);
		return -EINVAL;
	}
	todo = strdup(path);
	dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (!todo || dir < 0 || fstat(dir, &dst) < 0) {
		snprintf(err, errlen, "cannot open '/': %m");
		return todo ? -errno : -ENOMEM;
	}
	rest = todo;
	while ((name = strsep(&rest, "/"))) {
		bool last;

		if (!*name || strcmp(name, ".") == 0)
			continue;
		while (rest && *rest == '/')
			rest++;
		last = !rest || !*rest;
		if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			int e = errno;

			if (e != ENOENT || !last || !(flags & SAFEDIR_CREATE)) {
				snprintf(err, errlen, "cannot look at '%s%s%s': %s", at, strcmp(at, "/") ? "/" : "", name,
					 strerror(e));
				return -e;
			}
			/* ours from the start: made in a directory the walk has trusted so far */
			if (!entry_safe(at, &dst, name, &(struct stat){ .st_uid = geteuid() }, err, errlen))
				return -EPERM;
			if (mkdirat(dir, name, 0700) < 0 && errno != EEXIST) {
				snprintf(err, errlen, "cannot create '%s%s%s': %m", at, strcmp(at, "/") ? "/" : "", name);
				return -errno;
			}
			if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				snprintf(err, errlen, "cannot look at '%s/%s': %m", at, name);
				return -errno;
			}
		}
		if (strcmp(name, "..") == 0) {
			/* up: walk again from "/" to the parent, then on (each step checked anew) */
			*strrchr(at, '/') = '\0';
			if ((r = walk_again(at, rest, true, &todo, &rest, &dir, &dst, at)) < 0)
				return r;
			continue;
		}
		if (!entry_safe(at, &dst, name, &st, err, errlen))
			return -EPERM;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(dir, name, target, sizeof(target) - 1);

			if (n <= 0 || ++links > SYMLINKS_MAX) {
				snprintf(err, errlen, "cannot follow the symlink '%s/%s'", at, name);
				return n < 0 ? -errno : -ELOOP;
			}
			target[n] = '\0';
			/* what remains after the link's target: from "/", or from the link's directory */
			if ((r = walk_again(target, rest, target[0] == '/', &todo, &rest, &dir, &dst, at)) < 0)
				return r;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "'%s%s%s' is not a directory", at, strcmp(at, "/") ? "/" : "", name);
			return -ENOTDIR;
		}
		fd = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP) {
			/* out of fds or memory, not a race: say so */
			snprintf(err, errlen, "cannot open '%s%s%s': %m", at, strcmp(at, "/") ? "/" : "", name);
			return -errno;
		}
		if (fd < 0 || fstat(fd, &dst) < 0 || dst.st_dev != st.st_dev || dst.st_ino != st.st_ino) {
			snprintf(err, errlen, "'%s%s%s' changed while it was opened", at, strcmp(at, "/") ? "/" : "", name);
			if (fd >= 0)
				close(fd);
			return -EAGAIN;
		}
		close(dir);
		dir = fd;
		snprintf(at + strlen(at), sizeof(at) - strlen(at), "%s%s", strcmp(at, "/") ? "/" : "", name);
	}
	if ((flags & SAFEDIR_OWN) && dst.st_uid != geteuid()) {
		snprintf(err, errlen, "'%s' belongs to uid %u, not to the daemon (uid %u)", at, (unsigned)dst.st_uid,
			 (unsigned)geteuid());
		return -EPERM;
	}
	/* the O_PATH fd becomes one that can list and create: the same directory, opened as "." */
	fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open '%s': %m", at);
		return -errno;
	}
	return fd;
}
