#!/usr/bin/env bash
# `steptrace report --html` on a real capture, loaded in headless Chromium:
# the script drew one bar per step (DOM after scripts ran) and the console
# logged no errors. A deliberately broken page must be caught (the check can
# fail). Optional: SCREENSHOT=path writes a PNG of the page.
#   html_chromium.sh STEPTRACE_BIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || { echo "chromium missing (tools/setup-deps.sh)"; exit 1; }
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
cap=$src/tests/corpus/capture/ok-straggler.cap
"$bin" report "$cap" --html "$t/report.html" --json "$t/report.json" > /dev/null
steps=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(sum(len(r["steps"]) for r in j["job"]["ranks"]))' "$t/report.json")
[ "$steps" -gt 0 ]

run_chrome() {  # FILE -> $t/dom, $t/log
  rm -rf "$t/profile"
  timeout 60 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --disable-extensions --user-data-dir="$t/profile" \
    --enable-logging=stderr --v=0 --virtual-time-budget=2000 --dump-dom "file://$1" > "$t/dom" 2> "$t/log" || true
}
console_errors() { grep -E 'CONSOLE|Uncaught' "$t/log" | grep -Ei 'error|uncaught' || true; }

# 1. The checks catch a broken page.
cat > "$t/broken.html" <<'HTML'
<!DOCTYPE html><html><body><script>document.body.setAttribute('data-x','1'); undefinedFunction();</script></body></html>
HTML
run_chrome "$t/broken.html"
grep -q 'data-x="1"' "$t/dom" || { echo "chromium did not run scripts"; cat "$t/log"; exit 1; }
[ -n "$(console_errors)" ] || { echo "console error of the broken page not seen"; cat "$t/log"; exit 1; }

# 2. The real report.
run_chrome "$t/report.html"
errs=$(console_errors)
if [ -n "$errs" ]; then echo "console errors:"; echo "$errs"; exit 1; fi
rendered=$(grep -o 'data-steps-rendered="[0-9]*"' "$t/dom" | grep -o '[0-9]*' || true)
[ "$rendered" = "$steps" ] || { echo "rendered '$rendered' steps, report has $steps"; exit 1; }
groups=$(grep -o '<g class="step"' "$t/dom" | wc -l)
segs=$(grep -o 'class="seg"' "$t/dom" | wc -l)
ranks=$(grep -o 'class="rank-seg"' "$t/dom" | wc -l)
[ "$groups" -eq "$steps" ] || { echo "$groups step groups for $steps steps"; exit 1; }
[ "$segs" -ge "$steps" ] || { echo "$segs bar segments for $steps steps"; exit 1; }
[ "$ranks" -gt 0 ] || { echo "no rank comparison bars"; exit 1; }
grep -q 'id="verdict"' "$t/dom"
if [ -n "${SCREENSHOT:-}" ]; then
  rm -rf "$t/profile"
  timeout 60 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$t/profile" --hide-scrollbars \
    --window-size=1200,1000 --virtual-time-budget=2000 --screenshot="$SCREENSHOT" "file://$t/report.html" 2>/dev/null
fi
echo "html ok: $steps steps rendered ($segs segments), no console errors"
