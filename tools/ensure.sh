#!/bin/sh
# tools/ensure.sh TOOL: make sure a Debian-packaged tool the tests run is installed;
# `make test` calls it (the Makefile targets docker-compose, chromium and nginx).
#
#   docker-compose  Debian's docker-compose 1.29, which validates docker-compose.yml offline
#                   with `docker-compose config -q` (tests/deploy/test_compose.py)
#   chromium        /usr/bin/chromium and a font (so pages render text, not empty boxes), for
#                   the browser tests (tests/browser, driven by Playwright for Python). Debian's
#                   package, not `playwright install`: the browser must come from somewhere
#                   this machine can reach, and Debian's mirror is.
#   nginx           /usr/sbin/nginx (nginx-light: the binary alone, no extra modules), the load
#                   balancer of the rolling-restart test (tests/deploy/test_replicas.py), which
#                   runs it as an ordinary process with its own config in a temporary folder
#
# Already installed: says so and returns. Missing: installs the packages when apt-get exists
# and we are root, without starting any system service the package brings; otherwise says
# why not and how, and exits 0 so the rest of `make test` still runs (the tests that need
# the tool then skip, or fail when their REQUIRE_* variable is 1).
set -eu

case "${1:-}" in
    docker-compose)
        TOOL=docker-compose PACKAGES=docker-compose VERSION="version --short"
        ELSEWHERE="install docker-compose 1.29+ to validate docker-compose.yml" ;;
    chromium)
        TOOL=/usr/bin/chromium PACKAGES="chromium fonts-dejavu-core" VERSION=--version
        ELSEWHERE="install Chromium and set CHROMIUM=/path/to/chromium for the browser tests" ;;
    nginx)
        TOOL=/usr/sbin/nginx PACKAGES=nginx-light VERSION=-v
        ELSEWHERE="install nginx and set NGINX=/path/to/nginx for the replica test" ;;
    *)
        echo "usage: tools/ensure.sh docker-compose|chromium|nginx" >&2
        exit 2 ;;
esac
NAME=$1

found() { command -v "$TOOL" >/dev/null 2>&1; }
# Its version, from stdout (nginx writes it to stderr, Chromium's wrapper writes noise there).
# shellcheck disable=SC2086  # VERSION holds the tool's arguments, split on purpose
version() {
    out=$("$TOOL" $VERSION 2>/dev/null || true)
    [ -n "$out" ] || out=$("$TOOL" $VERSION 2>&1 || true)
    echo "${out:-version unknown}" | head -n 1
}

if found; then
    echo "ensure $NAME: installed ($(version))" >&2
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure $NAME: $TOOL is missing and this is not a Debian-like system (no" \
         "apt-get); $ELSEWHERE" >&2
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ensure $NAME: $TOOL is missing and installing it needs root;" \
         "run: sudo apt-get install $PACKAGES" >&2
    exit 0
fi

echo "ensure $NAME: installing Debian's $PACKAGES (a few minutes the first time)" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# policy-rc.d 101: a package must not start its system service (nginx's; the test runs its own).
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
fi
status=0
# shellcheck disable=SC2086  # PACKAGES is a list of package names
DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1 \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           $PACKAGES >>"$log" 2>&1 || status=$?
if [ "$created_policy" = 1 ]; then rm -f "$policy"; fi
if [ "$status" = 0 ] && found; then
    echo "ensure $NAME: installed $(version)" >&2
    exit 0
fi
echo "ensure $NAME: could not install $PACKAGES with apt-get:" >&2
tail -n 20 "$log" >&2
exit 0
