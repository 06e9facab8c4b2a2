#!/usr/bin/env bash
# man-pages.sh - every function of the public headers (include/hugepool.h, include/hugepool-heap.h)
# has its man page, and every page is well-formed:
#   - one page of man/ lists the function in its NAME section (make install links the name to
#     that page, scripts/man-names.sh), and that page's SYNOPSIS shows the header's prototype to
#     the letter and includes the header;
#   - no page lists in NAME, or shows in SYNOPSIS, a function the headers do not declare (a
#     stale page, or a link to nowhere), and a function page mentions as NAME() only its own
#     functions (others as NAME(3));
#   - a function page has NAME, SYNOPSIS, DESCRIPTION, RETURN VALUE, ERRORS and SEE ALSO, and
#     its SEE ALSO names its library's overview (libhugepool(3) or hugepool-heap(3));
#   - every hp_*(3) any page refers to exists;
#   - every page is clean under `mandoc -T lint -W warning` and under `man --warnings`, which
#     is what lintian runs on the Debian packages;
#   - the alerting rules hugepoolctl(1) gives as an example pass `promtool check rules`
#     (Debian's prometheus; skipped, saying so, without it).
# The SYNOPSIS and the references are read from pages rendered by mandoc; without mandoc those
# checks are skipped and say so (./dev.sh installs it). Run by tests/run-tests.sh (make check),
# or alone: tests/man-pages.sh [-v] [TREE] checks TREE's man/ and include/ (default: this tree);
# -v prints the checks that passed too. Prints "man: N passed, N failed, N skipped".
set -u
verbose=""
[ "${1:-}" = -v ] && { verbose=1; shift; }
here=$(cd "$(dirname "$0")/.." && pwd)
tree=$(cd "${1:-$here}" && pwd)
man_names="$here/scripts/man-names.sh"
passed=0 failed=0 skipped=0
tmp=$(mktemp -d /tmp/hugepool-man.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME COMMAND...: passes when COMMAND does; its output says why not
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		passed=$((passed + 1))
		[ -z "$verbose" ] || echo "ok   $name"
	else
		failed=$((failed + 1))
		echo "FAIL $name"
		[ -z "$out" ] || sed 's/^/     /' <<<"$out" | head -20
	fi
}

skip() { # skip NAME WHY
	skipped=$((skipped + 1))
	[ -z "$verbose" ] || echo "skip $1: $2"
}

# NAME<TAB>PROTOTYPE for each function a header declares, in its order: comments and
# preprocessor lines dropped, statements joined across lines, whitespace collapsed. A statement
# that names an hp_ function but does not read as a prototype is printed as "UNPARSED ...".
header_prototypes() {
	awk '
	function squeeze(s) {
		gsub(/[ \t]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s)
		gsub(/\( /, "(", s); gsub(/ \)/, ")", s); gsub(/ ,/, ",", s)
		return s
	}
	{
		line = $0; out = ""
		while (line != "") {
			if (incomment) {
				i = index(line, "*/")
				if (!i) { line = ""; break }
				line = substr(line, i + 2); incomment = 0
			} else {
				i = index(line, "/*")
				if (!i) { out = out line; line = ""; break }
				out = out substr(line, 1, i - 1) " "; line = substr(line, i + 2); incomment = 1
			}
		}
		if (out ~ /^[ \t]*#/)
			next
		buf = buf " " out
		while ((i = index(buf, ";")) > 0) {
			stmt = substr(buf, 1, i - 1); buf = substr(buf, i + 1)
			sub(/.*[{}]/, "", stmt) # a struct member, or what follows extern "C" {
			stmt = squeeze(stmt)
			if (stmt ~ /^typedef / || !match(stmt, /hp_[a-z0-9_]+\(/))
				continue
			name = substr(stmt, RSTART, RLENGTH - 1)
			if (stmt ~ /^[a-z_][a-z0-9_ ]*[ *]hp_[a-z0-9_]+\(.*\)$/)
				print name "\t" stmt
			else
				print name "\tUNPARSED " stmt
		}
	}' "$1"
}

# the page rendered as plain text, wide enough that no line of a prototype wraps
render() {
	mandoc -T ascii -O width=1000 "$1" | sed 's/.\x08//g'
}

# the prototypes a page's SYNOPSIS shows, one a line, squeezed as header_prototypes does
synopsis_prototypes() {
	render "$1" | awk '
	/^[A-Z]/ { section = $0; next }
	section == "SYNOPSIS" { buf = buf " " $0 }
	END {
		gsub(/#include <[^>]*>/, " ", buf)
		n = split(buf, stmts, ";")
		for (i = 1; i <= n; i++) {
			s = stmts[i]
			gsub(/[ \t]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s)
			gsub(/\( /, "(", s); gsub(/ \)/, ")", s); gsub(/ ,/, ",", s)
			if (s ~ /hp_[a-z0-9_]+\(/)
				print s
		}
	}'
}

synopsis_includes() {
	render "$1" | awk '/^[A-Z]/ { section = $0; next } section == "SYNOPSIS"' |
		grep -o '#include <[^>]*>' | sed 's/#include <\(.*\)>/\1/'
}

sections() { # the section headings of a page, one a line
	sed -n 's/^\.SH  *//p' "$1" | tr -d '"'
}

cd "$tree"
pages=(man/*.[1-8])
man3=(man/*.3)
have_mandoc=""
command -v mandoc >/dev/null && have_mandoc=1

# what the headers declare
: >"$tmp/functions"
for h in include/hugepool.h include/hugepool-heap.h; do
	header_prototypes "$h" | awk -v h="${h#include/}" -F '\t' '{ print $1 "\t" h "\t" $2 }' >>"$tmp/functions"
done
unparsed() { ! grep $'\tUNPARSED ' "$tmp/functions"; }
check "the headers' prototypes parse" unparsed
check "the headers declare functions" test -s "$tmp/functions"

# what each section 3 page lists in NAME: PAGE<TAB>NAME
: >"$tmp/names"
for p in "${man3[@]}"; do
	"$man_names" "$p" | sed "s|^|$p\t|" >>"$tmp/names"
done

declared() { cut -f1 "$tmp/functions" | grep -qxF -- "$1"; }

# every function: one page lists it, and shows its prototype
while IFS=$'\t' read -r f header proto; do
	listed=$(awk -F '\t' -v f="$f" '$2 == f { print $1 }' "$tmp/names")
	# a page of its own: named after a function it documents (a family's page after its first),
	# not an overview that lists every function
	own_page() {
		[ -n "$listed" ] || { echo "no page of man/ lists $f in its NAME section (man $f would find nothing)"; return 1; }
		[ "$(wc -l <<<"$listed")" -eq 1 ] || { echo "listed by more than one page:" $listed; return 1; }
		declared "$(basename "$listed" .3)" || { echo "listed only by $listed, which is no function's page"; return 1; }
	}
	check "$f: a function's page lists it in NAME" own_page
	page=$(head -1 <<<"$listed")
	if ! own_page >/dev/null; then
		skip "$f: SYNOPSIS" "no page of its own"
	elif [ -z "$have_mandoc" ]; then
		skip "$f: SYNOPSIS of $page" "mandoc not installed"
	else
		same_prototype() {
			synopsis_prototypes "$page" | grep -qxF -- "$proto" && return 0
			echo "$header: $proto"
			echo "$page: $(synopsis_prototypes "$page" | grep -F -- "$f(" || echo "(no prototype of $f)")"
			return 1
		}
		check "$f: SYNOPSIS of $page shows the prototype of $header" same_prototype
		includes() {
			synopsis_includes "$page" | grep -qxF -- "$header" || { echo "$page does not #include <$header>"; return 1; }
		}
		check "$f: SYNOPSIS of $page includes <$header>" includes
	fi
done <"$tmp/functions"

# every section 3 page: its names are its own or functions; what it shows, it lists
for p in "${man3[@]}"; do
	own=$(basename "$p" .3)
	# a function's page lists its functions (make install links each to it); an overview
	# (libhugepool.3, hugepool-heap.3) only itself: each function has a page of its own
	only_functions() {
		local n bad=0
		for n in $(awk -F '\t' -v p="$p" '$1 == p { print $2 }' "$tmp/names"); do
			if ! declared "$n" && [ "$n" != "$own" ]; then
				echo "lists $n, which no header declares"; bad=1
			elif declared "$n" && ! declared "$own"; then
				echo "lists the function $n: an overview lists only itself, each function is on a page of its own"; bad=1
			fi
		done
		return $bad
	}
	check "$p: NAME lists its own functions, or an overview only itself" only_functions
	case $own in hp_*) ;; *) continue ;; esac
	has_sections() {
		local s bad=0
		for s in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" ERRORS "SEE ALSO"; do
			sections "$p" | grep -qxF "$s" || { echo "no $s section"; bad=1; }
		done
		return $bad
	}
	check "$p: NAME, SYNOPSIS, DESCRIPTION, RETURN VALUE, ERRORS, SEE ALSO" has_sections
	if [ -z "$have_mandoc" ]; then
		skip "$p: SYNOPSIS and references" "mandoc not installed"
		continue
	fi
	shows_listed() {
		local f bad=0
		for f in $(synopsis_prototypes "$p" | grep -o 'hp_[a-z0-9_]*(' | tr -d '('); do
			awk -F '\t' -v p="$p" -v f="$f" '$1 == p && $2 == f { found = 1 } END { exit !found }' "$tmp/names" ||
				{ echo "SYNOPSIS shows $f, which NAME does not list"; bad=1; }
		done
		return $bad
	}
	check "$p: SYNOPSIS shows only functions its NAME lists" shows_listed
	own_calls() {
		local f bad=0
		for f in $(render "$p" | grep -o 'hp_[a-z0-9_]*()' | tr -d '()' | sort -u); do
			awk -F '\t' -v p="$p" -v f="$f" '$1 == p && $2 == f { found = 1 } END { exit !found }' "$tmp/names" ||
				{ echo "mentions $f(), which its NAME does not list: another page's function is $f(3)"; bad=1; }
		done
		return $bad
	}
	check "$p: mentions as NAME() only its own functions" own_calls
	see_overview() {
		render "$p" | awk '/^[A-Z]/ { section = $0; next } section == "SEE ALSO"' |
			grep -q -e 'libhugepool(3)' -e 'hugepool-heap(3)' || { echo "SEE ALSO names neither libhugepool(3) nor hugepool-heap(3)"; return 1; }
	}
	check "$p: SEE ALSO names the library's overview" see_overview
done

for p in "${pages[@]}"; do
	if [ -z "$have_mandoc" ]; then
		skip "$p: references and lint" "mandoc not installed"
		continue
	fi
	references() {
		local r bad=0
		for r in $(render "$p" | grep -o 'hp_[a-z0-9_]*(3)' | sed 's/(3)$//' | sort -u); do
			declared "$r" || [ -e "man/$r.3" ] || { echo "refers to $r(3), which is no page or function"; bad=1; }
		done
		return $bad
	}
	check "$p: every hp_*(3) it refers to exists" references
	lint() {
		local out
		out=$(mandoc -T lint -W warning "$p" 2>&1) && [ -z "$out" ] || { echo "$out"; return 1; }
	}
	check "$p: mandoc -T lint -W warning" lint
	if command -v man >/dev/null; then
		# as lintian's manpage-has-errors-from-man runs it
		man_warnings() {
			local out
			out=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$p" 2>&1 >/dev/null)
			[ -z "$out" ] || { echo "$out"; return 1; }
		}
		check "$p: man --warnings" man_warnings
	else
		skip "$p: man --warnings" "man not installed"
	fi
done

# hugepoolctl(1)'s example alerting rules: the EX block after ".SS Alerting rules", unescaped
rules() {
	sed -n '/^\.SS Alerting rules/,/^\.EE/p' "$tree/man/hugepoolctl.1" | sed -e '1,/^\.EX/d' -e '/^\.EE/d' \
		-e 's/\\-/-/g' -e "s/\\\\(aq/'/g" >"$tmp/rules.yml"
	[ -s "$tmp/rules.yml" ] || { echo "no alerting rules found in hugepoolctl.1"; return 1; }
	promtool check rules "$tmp/rules.yml"
}
if command -v promtool >/dev/null; then
	check "hugepoolctl.1: its alerting rules pass promtool check rules" rules
else
	skip "hugepoolctl.1: promtool check rules" "promtool missing (Debian's prometheus; ./dev.sh installs it)"
fi

printf '%-34s %3d passed %3d failed %3d skipped\n' "man pages" "$passed" "$failed" "$skipped"
echo "man: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
