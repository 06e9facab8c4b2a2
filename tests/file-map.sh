#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# file-map.sh - docs/ARCHITECTURE.md's file map against the tree: every file the repository
# tracks in src/, tests/, bench/, java/, systemd/, scripts/ and debian/ is named by a row of the
# map, and every path a row names exists. A row's first cell names files by path in backquotes,
# `dir/name.[ch]` for a .c and .h pair, globs (`bench_*.c`), and after a path, bare names in that
# path's folder (`src/lib/merge_engine.c`, `merge_internal.h`); a folder (`tests/unit/`) names the
# files directly in it, except under src/, whose files each have a row of their own (its folders'
# rows are headings). Run by tests/run-tests.sh (make check), once; prints one closing line,
# "map: N passed, N failed".
# Usage: tests/file-map.sh
set -u
cd "$(dirname "$0")/.."
doc=docs/ARCHITECTURE.md
passed=0 failed=0
declare -A named=() dirs=()

# the map's rows: the first cell of each table line of the "File map" section
rows=$(awk '/^## File map/ {on = 1; next} /^## / {on = 0} on && /^\| `/' "$doc" | cut -d'|' -f2)
while IFS= read -r cell; do
	base=""
	for tok in $(grep -o '`[^`]*`' <<<"$cell" | tr -d '`'); do
		case $tok in
		*/) base=$tok; dirs[$tok]=1; continue ;;
		*/*) base=$(dirname "$tok")/ ;;
		*) tok=$base$tok ;;
		esac
		case $tok in
		*.\[ch\]) names=("${tok%.\[ch\]}.c" "${tok%.\[ch\]}.h") ;;
		*) names=("$tok") ;;
		esac
		for n in "${names[@]}"; do
			if [[ $n == *'*'* ]]; then
				for g in $n; do [ -e "$g" ] && named[$g]=1; done
				compgen -G "$n" >/dev/null || { echo "FAIL the map names $n, which matches no file"; failed=$((failed + 1)); }
			else
				named[$n]=1
				[ -e "$n" ] || { echo "FAIL the map names $n, which does not exist"; failed=$((failed + 1)); }
			fi
		done
	done
done <<<"$rows"

# every file of the tree's code, named by a row (a folder's row names what is directly in it,
# but under src/)
files=$(git ls-files src tests bench java systemd scripts debian 2>/dev/null |
	grep -v -e '^tests/fuzz/corpus/' -e '/src/test/resources/' -e '/src/main/resources/')
for f in $files; do
	d=$(dirname "$f")/
	if [ -n "${named[$f]:-}" ] || { [ -n "${dirs[$d]:-}" ] && [[ $f != src/* ]]; }; then
		passed=$((passed + 1))
	else
		echo "FAIL $f: no row of the file map in $doc names it"
		failed=$((failed + 1))
	fi
done
echo "map: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
