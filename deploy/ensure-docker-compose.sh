#!/bin/sh
# Make sure `docker-compose` (Debian's 1.29, which validates docker-compose.yml offline with
# `docker-compose config -q`) is installed; `make test` calls this before the tests.
#
# Already installed: returns at once. Missing: installs Debian's package when apt-get exists
# and we are root; otherwise says why not and how, and exits 0 so the rest of `make test`
# still runs (tests/deploy then skip the validation, or fail when REQUIRE_DOCKER_COMPOSE=1).
set -eu

if command -v docker-compose >/dev/null 2>&1; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-docker-compose: docker-compose is missing and this is not a Debian-like" \
         "system (no apt-get); install docker-compose 1.29+ to validate docker-compose.yml" >&2
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-docker-compose: docker-compose is missing and installing it needs root;" \
         "run: sudo apt-get install docker-compose" >&2
    exit 0
fi

echo "ensure-docker-compose: installing Debian's docker-compose" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1 \
   && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          docker-compose >>"$log" 2>&1 \
   && command -v docker-compose >/dev/null 2>&1; then
    exit 0
fi
echo "ensure-docker-compose: could not install docker-compose with apt-get:" >&2
tail -n 20 "$log" >&2
exit 0
