/* SPDX-License-Identifier: MIT */
/*
 * acquire.c - the smallest useful libhugepool client (the README's example): connect, lease
 * two buffers of a class, use them, give them back. Build against an installed libhugepool:
 *   cc -o acquire acquire.c $(pkg-config --cflags --libs hugepool)
 * Usage: acquire [SOCKET [CLASS]]
 */
#include <stdio.h>
#include <string.h>

#include <hugepool.h>

int main(int argc, char **argv)
{
	const char *socket_path = argc > 1 ? argv[1] : NULL; /* NULL: $HUGEPOOL_SOCKET or the default */
	const char *class_name = argc > 2 ? argv[2] : "small";
	struct hp_buffer bufs[2];
	hp_conn *c;
	int r;

	r = hp_connect(socket_path, &c);
	if (r < 0) {
		fprintf(stderr, "cannot connect to hugepoold: %s\n", hp_strerror(r));
		return 1;
	}
	/* wait up to a second for two buffers; they arrive mapped and faulted in */
	r = hp_acquire(c, class_name, 2, 1000, bufs);
	if (r < 0) {
		fprintf(stderr, "cannot lease 2 buffers of class '%s': %s (%s)\n", class_name, hp_strerror(r),
			hp_last_error(c));
		hp_disconnect(c);
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		memset(bufs[i].addr, 0x2a, bufs[i].size);
		printf("lease %#llx: %zu bytes at %p\n", (unsigned long long)bufs[i].lease_id, bufs[i].size,
		       bufs[i].addr);
	}
	hp_release(c, bufs, 2);
	hp_disconnect(c); /* would also have released them */
	return 0;
}
