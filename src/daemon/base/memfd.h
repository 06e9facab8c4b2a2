/* SPDX-License-Identifier: MIT */
/*
 * memfd.h - the one way hugepoold makes shared memory it hands to clients: a memfd of a fixed
 * size, sealed so that nobody (the client included) can shrink or grow it under the daemon's
 * mapping, nor change the seals, and mapped shared by the daemon. Pool buffers, journal rings
 * and wake pages, and counters pages are all made here.
 */
#ifndef HP_MEMFD_H
#define HP_MEMFD_H

#include <stdint.h>

/*
 * A memfd called name (MFD_CLOEXEC | MFD_ALLOW_SEALING | extra_flags: MFD_HUGETLB and a size
 * flag for hugetlb), size bytes, sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, and mapped
 * MAP_SHARED with prot at *ret_map. Returns the fd, or a negative errno with nothing left
 * open or mapped (for hugetlb, a page shortage shows here as -ENOMEM: mmap reserves the pages).
 */
int sealed_memfd(const char *name, unsigned extra_flags, uint64_t size, int prot, void **ret_map);

#endif
