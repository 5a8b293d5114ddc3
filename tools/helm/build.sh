#!/usr/bin/env bash
# Build Helm (the version pinned in tools/helm/go.mod, as a Go 1.24+ `tool` of that module)
# once and cache it as .cache/helm/helm-<version> (git-ignored), for tests/deploy/test_helm.py,
# which lints and renders deploy/helm/chorus with it. Idempotent: when that binary is newer
# than go.mod, go.sum and this script, nothing is built.
#
# Prints the binary's path as the last line of stdout; progress goes to stderr.
# Needs Go 1.26+ (Helm's own go.mod asks for it; modules come from the Go module proxy; the
# default module and build caches are used). A cold build takes a few minutes on 2 CPUs;
# later ones are instant.
#
# The link flags are the ones Helm's Makefile sets: its version, and the Kubernetes version
# its client-go speaks (client-go v0.X.Y is Kubernetes 1.X), which `helm template` reports as
# .Capabilities.KubeVersion and `helm lint` checks deprecated APIs against. Without them
# Helm would claim Kubernetes 1.20 and v0.0.0.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: 'go' is not on PATH: install Go 1.26+ (https://go.dev/dl/) to build Helm," \
         "or put a helm binary on PATH and set HELM to it" >&2
    exit 3
fi

version_of() {  # the version of a module required in go.mod, in or out of a "require (...)" block
    awk -v m="$1" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m { print $2; exit }' "$here/go.mod"
}
version="$(version_of helm.sh/helm/v3)"
client_go="$(version_of k8s.io/client-go)"
if [[ -z "$version" || -z "$client_go" ]]; then
    echo "build.sh: no 'helm.sh/helm/v3 <version>' or 'k8s.io/client-go <version>' line in" \
         "$here/go.mod" >&2
    exit 1
fi
out="$root/.cache/helm/helm-$version"

fresh=1
for src in "$here/go.mod" "$here/go.sum" "$here/build.sh"; do
    [[ -x "$out" && "$out" -nt "$src" ]] || fresh=0
done
if (( fresh )); then
    echo "$out"
    exit 0
fi

# client-go v0.37.0 -> Kubernetes 1.37
IFS=. read -r k8s_major k8s_minor _ <<< "${client_go#v}"
k8s_major=$((k8s_major + 1))

mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"  # per process: concurrent builds don't clobber each other; mv is atomic
trap 'rm -f "$tmp"' EXIT
echo "build.sh: building Helm $version into $out (first time: a few minutes)..." >&2
start=$SECONDS
(cd "$here" && CGO_ENABLED=0 go build -buildvcs=false -trimpath -o "$tmp" -ldflags "-w -s \
    -X helm.sh/helm/v3/internal/version.version=$version \
    -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$k8s_major \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$k8s_major \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor" \
    helm.sh/helm/v3/cmd/helm)
mv -f "$tmp" "$out"
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$out"
