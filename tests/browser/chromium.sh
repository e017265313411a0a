# Shared by the page tests of tests/browser/ (sourced at their start):
#   exits 77 (CTest: skipped) when $CHROMIUM (default /usr/bin/chromium) is absent;
#   $profile       a temporary browser profile, removed at exit;
#   fail MSG       prints "FAIL: MSG" and counts it in $failures;
#   chrome ARGS... URL   headless Chromium with no network side traffic, letting the page's
#                  script run (--virtual-time-budget); stdout: e.g. the DOM (--dump-dom),
#                  stderr: the browser log (console messages included).
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "SKIPPED: $CHROMIUM not found; install it to run the page test (Debian: apt-get install chromium)"
  exit 77
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

chrome() {
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --no-default-browser-check \
    --user-data-dir="$profile" --enable-logging=stderr --v=0 --virtual-time-budget=5000 "$@"
}
