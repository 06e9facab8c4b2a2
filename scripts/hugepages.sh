# SPDX-License-Identifier: MIT
# hugepages.sh - reserve 2 MiB hugepages for a run and give them back afterwards; sourced by
# tests/run-tests.sh, bench/run-bench.sh and dev.sh so that they share one policy:
#   hugepages_reserve TAG NEED [nolock]
#     makes NEED pages free (free minus those already promised to mappings) by raising
#     nr_hugepages, as root only; says what it did, or why not, prefixed "TAG: ". Unless
#     "nolock", it first takes /tmp/hugepool-hugepages.lock for the life of the shell, so two
#     runs never restore over each other. Returns 0 when NEED pages are free afterwards.
#   hugepages_restore
#     puts nr_hugepages back to what it was before hugepages_reserve changed it (call it from
#     the caller's EXIT trap).
# The pool code reads the same two sysfs files (pages_available in src/daemon/pool/pages.c).

HUGEPAGES_DIR=/sys/kernel/mm/hugepages/hugepages-2048kB
HUGEPAGES_RESTORE=""
HUGEPAGES_TAG=""

hugepages_free() {
	echo $(($(cat "$HUGEPAGES_DIR/free_hugepages") - $(cat "$HUGEPAGES_DIR/resv_hugepages")))
}

hugepages_reserve() {
	local tag=$1 need=$2 nolock=${3:-} free total
	HUGEPAGES_TAG=$tag
	if [ ! -d "$HUGEPAGES_DIR" ]; then
		echo "$tag: no 2 MiB hugepage support in this kernel ($HUGEPAGES_DIR missing)"
		return 1
	fi
	if [ "$(id -u)" -eq 0 ] && [ -z "$nolock" ] && command -v flock >/dev/null; then
		exec 9>/tmp/hugepool-hugepages.lock
		flock 9
	fi
	free=$(hugepages_free)
	total=$(cat "$HUGEPAGES_DIR/nr_hugepages")
	if [ "$free" -ge "$need" ]; then
		echo "$tag: $free 2 MiB hugepages free, $need wanted: enough"
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "$tag: only $free 2 MiB hugepages free, $need wanted, and only root may reserve more" \
		     "(run as root, or: echo $((total + need - free)) | sudo tee $HUGEPAGES_DIR/nr_hugepages)"
		return 1
	fi
	HUGEPAGES_RESTORE=$total
	echo $((total + need - free)) > "$HUGEPAGES_DIR/nr_hugepages"
	echo "$tag: reserved 2 MiB hugepages for the run: nr_hugepages $total ->" \
	     "$(cat "$HUGEPAGES_DIR/nr_hugepages") ($(hugepages_free) free; restored at exit)"
	[ "$(hugepages_free)" -ge "$need" ]
}

hugepages_restore() {
	[ -n "$HUGEPAGES_RESTORE" ] || return 0
	echo "$HUGEPAGES_RESTORE" > "$HUGEPAGES_DIR/nr_hugepages" 2>/dev/null || true
	echo "$HUGEPAGES_TAG: 2 MiB hugepages restored to $HUGEPAGES_RESTORE"
	HUGEPAGES_RESTORE=""
}
