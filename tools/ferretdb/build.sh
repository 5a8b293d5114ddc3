#!/usr/bin/env bash
# Build the FerretDB test server (tools/ferretdb, the version pinned in go.mod) once and cache
# it as .cache/ferretdb/ferretdb-<version> (git-ignored). Idempotent: when that binary is
# newer than main.go, go.mod, go.sum and this script, nothing is built.
#
# Prints the binary's path as the last line of stdout; progress goes to stderr.
# Needs Go 1.24+ (modules come from the Go module proxy; the default GOPATH, module cache
# and build cache are used). A cold build takes about 2 minutes on 2 CPUs; later ones are
# instant.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: 'go' is not on PATH: install Go 1.24+ (https://go.dev/dl/) to build" \
         "FerretDB, or set MONGODB_URL to an existing MongoDB server" >&2
    exit 3
fi

# "require github.com/FerretDB/FerretDB v1.24.2", or the same inside a "require (...)" block
version="$(awk '$1 == "require" { $1 = ""; $0 = $0 } $1 == "github.com/FerretDB/FerretDB" { print $2; exit }' \
    "$here/go.mod")"
if [[ -z "$version" ]]; then
    echo "build.sh: no 'require github.com/FerretDB/FerretDB <version>' line in $here/go.mod" >&2
    exit 1
fi
out="$root/.cache/ferretdb/ferretdb-$version"

fresh=1
for src in "$here/main.go" "$here/go.mod" "$here/go.sum" "$here/build.sh"; do
    [[ -x "$out" && "$out" -nt "$src" ]] || fresh=0
done
if (( fresh )); then
    echo "$out"
    exit 0
fi

mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"  # per process: concurrent builds don't clobber each other; mv is atomic
trap 'rm -f "$tmp"' EXIT
echo "build.sh: building FerretDB $version into $out (first time: about 2 minutes)..." >&2
start=$SECONDS
(cd "$here" && CGO_ENABLED=0 go build -buildvcs=false -trimpath -o "$tmp" .)
mv -f "$tmp" "$out"
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$out"
