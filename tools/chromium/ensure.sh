#!/bin/sh
# Make sure Debian's `chromium` is installed at /usr/bin/chromium, for the browser tests
# (tests/browser, driven by Playwright for Python); `make test` calls this before the tests.
#
# Why Debian's package and not `playwright install`: the browser must come from somewhere
# this machine can reach, and Debian's mirror is; Playwright's own download servers may not be.
#
# Already installed: says so and returns. Missing: installs `chromium` and a font (so pages
# render text, not empty boxes) when apt-get exists and we are root; otherwise says why not
# and how, and exits 0 so the rest of `make test` still runs (the browser tests then skip,
# or fail when REQUIRE_BROWSER=1).
set -eu

CHROMIUM=/usr/bin/chromium
PACKAGES="chromium fonts-dejavu-core"

if [ -x "$CHROMIUM" ]; then
    echo "ensure-chromium: $CHROMIUM is installed ($("$CHROMIUM" --version 2>/dev/null || echo 'version unknown'))" >&2
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: $CHROMIUM is missing and this is not a Debian-like system" \
         "(no apt-get); install Chromium and set CHROMIUM=/path/to/chromium for the" \
         "browser tests" >&2
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-chromium: $CHROMIUM is missing and installing it needs root;" \
         "run: sudo apt-get install $PACKAGES" >&2
    exit 0
fi

echo "ensure-chromium: installing Debian's $PACKAGES (a few minutes the first time)" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1 \
   && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          $PACKAGES >>"$log" 2>&1 \
   && [ -x "$CHROMIUM" ]; then
    echo "ensure-chromium: installed $("$CHROMIUM" --version 2>/dev/null || echo chromium)" >&2
    exit 0
fi
echo "ensure-chromium: could not install $PACKAGES with apt-get:" >&2
tail -n 20 "$log" >&2
exit 0
