#!/usr/bin/env bash
# run-fuzz.sh - build every tests/fuzz/fuzz_*.c with clang's libFuzzer (plus ASan and UBSan) and
# run it for $FUZZ_SECONDS seconds, starting from the saved corpus. New inputs land in
# build-fuzz/corpus/<target>/; merge the useful ones into tests/fuzz/corpus/<target>/ with
#   build-fuzz/fuzz_<target> -merge=1 tests/fuzz/corpus/<target> build-fuzz/corpus/<target>
# A crash leaves its input in build-fuzz/ and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-60}
out=build-fuzz
mkdir -p "$out"
# the daemon is a folder per subsystem (src/daemon/*/): every one of them, main.c aside
srcs=$(ls src/common/*.c src/lib/*.c src/daemon/*/*.c src/cli/http.c)
daemon_includes=$(for d in src/daemon/*/; do printf -- '-I%s ' "${d%/}"; done)
flags="-std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -pthread
	-DHUGEPOOL_VERSION=\"fuzz\" -Iinclude -Isrc/common $daemon_includes -Isrc/lib -Isrc/cli -Itests/fuzz"
rc=0
for f in tests/fuzz/fuzz_*.c; do
	t=$(basename "$f" .c)
	name=${t#fuzz_}
	echo "== $t: $secs s"
	# shellcheck disable=SC2086
	clang $flags -o "$out/$t" "$f" $srcs -luring -laio
	mkdir -p "$out/corpus/$name"
	if ! (cd "$out" && "./$t" -max_total_time="$secs" -print_final_stats=1 \
		"corpus/$name" "../tests/fuzz/corpus/$name" 2>&1 | tail -n 12); then
		rc=1
	fi
done
exit $rc
