#!/bin/sh
# Make sure Debian's `nginx` binary is installed, for the rolling-restart test of agent
# replicas behind a load balancer (tests/deploy/test_replicas.py); `make test` calls this.
#
# The test runs nginx itself, as an ordinary process on 127.0.0.1 with its own config and
# prefix in a temporary folder: the package's system service is neither needed nor started.
#
# Already installed: says so and returns. Missing: installs `nginx-light` (the binary alone,
# no extra modules) when apt-get exists and we are root; otherwise says why not and how, and
# exits 0 so the rest of `make test` still runs (the test then skips, or fails when
# REQUIRE_NGINX=1).
set -eu

NGINX=/usr/sbin/nginx
PACKAGES="nginx-light"

if [ -x "$NGINX" ]; then
    echo "ensure-nginx: $NGINX is installed ($("$NGINX" -v 2>&1 || echo 'version unknown'))" >&2
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-nginx: $NGINX is missing and this is not a Debian-like system (no" \
         "apt-get); install nginx and set NGINX=/path/to/nginx for the replica test" >&2
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-nginx: $NGINX is missing and installing it needs root;" \
         "run: sudo apt-get install $PACKAGES" >&2
    exit 0
fi

echo "ensure-nginx: installing Debian's $PACKAGES" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# policy-rc.d 101: the package must not start its system service (the test runs its own).
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
fi
status=0
DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1 \
   && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          $PACKAGES >>"$log" 2>&1 || status=$?
if [ "$created_policy" = 1 ]; then rm -f "$policy"; fi
if [ "$status" = 0 ] && [ -x "$NGINX" ]; then
    echo "ensure-nginx: installed $("$NGINX" -v 2>&1)" >&2
    exit 0
fi
echo "ensure-nginx: could not install $PACKAGES with apt-get:" >&2
tail -n 20 "$log" >&2
exit 0
