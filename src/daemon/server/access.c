/* SPDX-License-Identifier: MIT */
/*
 * access.c - see access.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
