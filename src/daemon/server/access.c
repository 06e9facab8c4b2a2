/* SPDX-License-Identifier: MIT */
/*
 * access.c - see access.h.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>

#include "access.h"
#include "size.h"

void access_creds_get(int fd, const struct ucred *cred, struct access_creds *ret)
{
	gid_t small[64];
	socklen_t len = sizeof(small);

	*ret = (struct access_creds){ .uid = cred->uid, .gid = cred->gid };
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, small, &len) == 0) {
		ret->groups = malloc(len ? len : 1);
		if (ret->groups) {
			memcpy(ret->groups, small, len);
			ret->ngroups = len / sizeof(gid_t);
		}
		return;
	}
	if (errno != ERANGE)
		return; /* an old kernel: the primary group only */
	/* len now says how much it takes */
	ret->groups = malloc(len);
	if (ret->groups && getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, ret->groups, &len) == 0) {
		ret->ngroups = len / sizeof(gid_t);
	} else {
		free(ret->groups);
		ret->groups = NULL;
	}
}

void access_creds_free(struct access_creds *c)
{
	free(c->groups);
	c->groups = NULL;
	c->ngroups = 0;
}

bool access_is_daemon(const struct access_creds *c)
{
	return c->uid == 0 || c->uid == geteuid();
}

bool access_in_group(const struct access_creds *c, gid_t g)
{
	if (c->gid == g)
		return true;
	for (unsigned i = 0; i < c->ngroups; i++)
		if (c->groups[i] == g)
			return true;
	return false;
}

/* A decimal id, or -1. */
static long number(const char *s)
{
	uint64_t v;

	return decimal_parse(s, &v) == 0 && v <= INT32_MAX ? (long)v : -1;
}

int access_list_resolve(const struct config_acl *acl, gid_t dflt, struct access_list *ret, char *err,
			size_t errlen)
{
	*ret = (struct access_list){ 0 };
	if (!acl->set) {
		ret->gids[ret->ngids++] = dflt;
		return 0;
	}
	for (unsigned i = 0; i < acl->n; i++) {
		const struct config_acl_entry *e = &acl->e[i];
		long id = number(e->name);

		if (e->group) {
			struct group *g = id < 0 ? getgrnam(e->name) : NULL;

			if (id < 0 && !g) {
				snprintf(err, errlen, "no group \"%s\"", e->name);
				return -ENOENT;
			}
			ret->gids[ret->ngids++] = id >= 0 ? (gid_t)id : g->gr_gid;
		} else {
			struct passwd *pw = id < 0 ? getpwnam(e->name) : NULL;

			if (id < 0 && !pw) {
				snprintf(err, errlen, "no user \"%s\"", e->name);
				return -ENOENT;
			}
			ret->uids[ret->nuids++] = id >= 0 ? (uid_t)id : pw->pw_uid;
		}
	}
	return 0;
}

bool access_allows(const struct access_list *l, const struct access_creds *c)
{
	if (access_is_daemon(c))
		return true;
	for (unsigned i = 0; i < l->nuids; i++)
		if (l->uids[i] == c->uid)
			return true;
	for (unsigned i = 0; i < l->ngids; i++)
		if (access_in_group(c, l->gids[i]))
			return true;
	return false;
}

bool access_mode_admits(const struct access_creds *c, mode_t mode, gid_t socket_gid)
{
	if (access_is_daemon(c))
		return true; /* root, or the owner */
	/* the group's bits alone decide for a member, whatever the others' say */
	return access_in_group(c, socket_gid) ? (mode & 0020) != 0 : (mode & 0002) != 0;
}

int access_socket_grant(const char *path, mode_t socket_mode, const gid_t *monitor)
{
	struct {
		struct posix_acl_xattr_header h;
		struct posix_acl_xattr_entry e[5];
	} acl = { .h = { .a_version = htole32(POSIX_ACL_XATTR_VERSION) } };
	unsigned n = 0;

	/* in the order the kernel wants them: by tag, then by id */
#define ENTRY(tag, perm, id) \
	acl.e[n++] = (struct posix_acl_xattr_entry){ htole16(tag), htole16(perm), htole32((uint32_t)(id)) }
	ENTRY(ACL_USER_OBJ, (socket_mode >> 6) & 7, ACL_UNDEFINED_ID);
	ENTRY(ACL_GROUP_OBJ, (socket_mode >> 3) & 7, ACL_UNDEFINED_ID);
	if (monitor) {
		ENTRY(ACL_GROUP, ACL_READ | ACL_WRITE, *monitor);
		ENTRY(ACL_MASK, ((socket_mode >> 3) & 7) | ACL_READ | ACL_WRITE, ACL_UNDEFINED_ID);
	}
	ENTRY(ACL_OTHER, socket_mode & 7, ACL_UNDEFINED_ID);
#undef ENTRY
	if (lsetxattr(path, "system.posix_acl_access", &acl, sizeof(acl.h) + n * sizeof(acl.e[0]), 0) < 0)
		return -errno;
	return 0;
}
