#!/usr/bin/env bash
# The man page renders with groff -ww and man -l without a warning, and names
# every option that `steptrace CMD --help` (and the daemon's) offers.
set -euo pipefail
bin=$1
page=$2
fail() { echo "man page: $*" >&2; exit 1; }
w=$(groff -man -Tutf8 -ww -z "$page" 2>&1) || fail "groff failed: $w"
[ -z "$w" ] || fail "groff -ww warnings: $w"
if command -v man >/dev/null 2>&1; then
  out=$(MANWIDTH=100 man -l "$page" 2>&1 >/dev/null) || fail "man -l failed: $out"
  [ -z "$out" ] || fail "man -l says: $out"
fi
# The roff source with its escapes undone: "\-\-pod" -> "--pod".
text=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$page")
missing=()
for cmd in run attach record report top diff check ctl daemon; do
  for opt in $("$bin" "$cmd" --help 2>&1 | grep -oE '^ +(-[a-zA-Z],)?--[a-z][a-z-]*' | grep -oE -- '--[a-z][a-z-]*'); do
    [ "$opt" = --help ] && continue
    grep -qe "$opt\b" <<<"$text" || missing+=("$cmd $opt")
  done
done
[ ${#missing[@]} -eq 0 ] || fail "options with no text: ${missing[*]}"
echo "man page: renders clean, every option of every command described"
