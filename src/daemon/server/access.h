/* SPDX-License-Identifier: MIT */
/*
 * access.h - who a client is, and whether that is enough: credentials from the socket, and
 * the access lists of the configuration resolved to ids.
 *
 * A client's uid, gid and pid come from SO_PEERCRED and its supplementary groups from
 * SO_PEERGROUPS, both taken once when it connects (the kernel records them at connect(), so a
 * client cannot change them afterwards). Root and the daemon's own uid may do anything; anyone
 * else may do what an access list names its uid or one of its groups for. Lists are resolved
 * once at start, so a name that does not exist stops the daemon instead of denying at random.
 *
 * Who may connect at all is the socket's file permissions: socket_mode for its owner (the
 * daemon), its group and the others, and a POSIX ACL entry that lets monitor_group in too
 * (access_socket_grant), so that a monitoring agent need not be in the socket's group, whose
 * membership is also every journal's default access list and the right to lease. A client that
 * only that entry let in may ask for the status and nothing else (access_mode_admits says
 * which clients the mode alone lets in).
 */
#ifndef HP_ACCESS_H
#define HP_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "config.h"

struct access_creds {
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* supplementary, from SO_PEERGROUPS; NULL if none or unknown */
	unsigned ngroups;
};

struct access_list {
	unsigned nuids, ngids;
	uid_t uids[CONFIG_ACL_MAX];
	gid_t gids[CONFIG_ACL_MAX + 1]; /* + the default group */
};

/* The credentials of the client on fd (cred from SO_PEERCRED); free with access_creds_free. */
void access_creds_get(int fd, const struct ucred *cred, struct access_creds *ret);
void access_creds_free(struct access_creds *c);
/* Root or the daemon's own uid. */
bool access_is_daemon(const struct access_creds *c);
bool access_in_group(const struct access_creds *c, gid_t g);

/*
 * Resolve acl to ids; an unset acl is `dflt` (the group of the socket). Returns 0, or -ENOENT
 * with the unknown name in err.
 */
int access_list_resolve(const struct config_acl *acl, gid_t dflt, struct access_list *ret, char *err,
			size_t errlen);
/* Does the list (or being root or the daemon's uid) let c do it? */
bool access_allows(const struct access_list *l, const struct access_creds *c);

/*
 * Would the mode of the daemon's socket alone, owned by the daemon's uid and by group
 * socket_gid, let c connect (write permission, as the kernel decides it without an ACL)?
 */
bool access_mode_admits(const struct access_creds *c, mode_t mode, gid_t socket_gid);

/*
 * Give the socket at path (mode socket_mode) an access ACL whose one entry beyond the mode lets
 * group *monitor read and write it (connect); monitor NULL: no such entry (the ACL is the mode,
 * which removes one a previous life set). The mode's group bits then show the ACL's mask, which
 * is socket_mode's group bits and read-write. 0 or a negative errno (-EOPNOTSUPP: the file
 * system has no POSIX ACLs). path's directory must be one nobody else can bend (safedir.h).
 */
int access_socket_grant(const char *path, mode_t socket_mode, const gid_t *monitor);

#endif
