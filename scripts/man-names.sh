#!/bin/sh
# SPDX-License-Identifier: MIT
# man-names.sh - the names a man page's NAME section lists, one a line, in their order: for
# "hp_journal_wait, hp_journal_wait_lsn, hp_journal_durable_lsn \- wait for ..." those three.
# A page documents every name it lists: `make install` links each name other than the page's
# own to the page (hp_journal_wait_lsn.3 -> hp_journal_wait.3), so that `man NAME` opens it,
# and tests/man-pages.sh checks that every public function is listed by exactly one page.
# Usage: scripts/man-names.sh PAGE
set -eu
# the section's lines up to the next .SH, joined; the names end at " \- "
sed -n '/^\.SH NAME/,/^\.SH/{/^\.SH/d;/^\.\\"/d;p;}' "$1" | tr '\n' ' ' |
	sed -e 's/ \\- .*//' -e 's/\\-/-/g' | tr ',' '\n' | awk '{ $1 = $1 } NF'
