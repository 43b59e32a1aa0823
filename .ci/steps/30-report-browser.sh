#!/usr/bin/env bash
# The HTML report in a real browser: generate a report from a synthetic run, load it in
# headless Chromium, fail on console errors, failed loads or broken images, and take
# screenshots at phone (390 px) and laptop (1280 px) widths into target/report-browser/.
source "$(dirname "$0")/../lib.sh"

need_command chromium chromium

out=target/report-browser
rm -rf "$out" target/report-fixture
mkdir -p "$out"
run_dir=$(cargo run --quiet --locked --example synthetic_report -- --out target/report-fixture --requests 192 --seed 7)
html="$PWD/$run_dir/report.html"
test -s "$html"

profile=$(mktemp -d)
on_exit "rm -rf '$profile'"
chrome() {
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --enable-logging=stderr --v=0 "$@"
}

# 1. Load the page, run nothing (the page has no script), dump the DOM and the console log.
chrome --dump-dom "file://$html" >"$out/dom.html" 2>"$out/console.log" || {
  cat "$out/console.log"; echo "chromium could not load $html"; exit 1; }
# Any page console message (CONSOLE lines: errors, CSP violations, uncaught exceptions) fails;
# chromium's own dbus/sandbox noise in a container does not.
if grep -E ":CONSOLE[:(]|Uncaught|Failed to load resource|Refused to" "$out/console.log"; then
  echo "console errors while loading report.html (see $out/console.log)"; exit 1
fi
grep -q "<h1>spark-bench report" "$out/dom.html" || { echo "report.html did not render its title"; exit 1; }
svgs=$(grep -c "<svg " "$out/dom.html" || true)
[ "$svgs" -ge 5 ] || { echo "expected at least 5 inline charts, found $svgs"; exit 1; }
# No images at all (inline SVG only), so none can be broken; nothing that could load from
# the network (chromium does not log a failed <img>, so this is checked on the DOM).
if grep -E "<img|<image|<script|<link|<iframe|<object|<embed" "$out/dom.html"; then
  echo "report.html must not contain img/image/script/link/iframe/object/embed elements"; exit 1
fi

# 2. Screenshots at phone and laptop widths.
chrome --hide-scrollbars --window-size=390,2400 --screenshot="$out/phone-390.png" "file://$html" 2>>"$out/console.log"
chrome --hide-scrollbars --window-size=1280,2400 --screenshot="$out/laptop-1280.png" "file://$html" 2>>"$out/console.log"
for f in phone-390 laptop-1280; do
  test -s "$out/$f.png" || { echo "no screenshot $f.png"; exit 1; }
done
# 3. The percentile method against numpy on the same samples: spark-bench's p50/p90/p99 are
# numpy.percentile(method="inverted_cdf") within the histogram's 0.1 % (and not numpy's
# default linear method: the script prints both). Needs numpy in a venv.
NUMPY_VERSION="2.4.6"
venv=target/report-browser-venv
if PIP_TIMEOUT=300 venv_with "$venv" "numpy==$NUMPY_VERSION"; then
  "$venv/bin/python" scripts/percentile_check.py
  "$venv/bin/python" scripts/percentile_check.py "$run_dir"
else
  echo "numpy not installable here: percentile check against numpy skipped (the Rust test covers the example)"
fi
echo "report.html OK in Chromium: $svgs inline charts, no console errors; screenshots in $out/"
