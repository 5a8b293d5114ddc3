#!/usr/bin/env bash
# `make test-twice`: the whole of `make test` twice at once, in this checkout and in a
# temporary clone of it, so that each copy runs on a machine the other keeps busy (servers,
# child processes, coverage, disk), as a shared machine or a CI runner is. A test whose
# result depends on how busy the machine is fails here; both copies must pass.
#
# The clone is of what this checkout holds now: HEAD and the uncommitted changes to
# tracked files (not untracked files). It gets a virtual environment of its own (the pip
# cache makes that a few minutes) and a copy of this checkout's FerretDB build. Each
# copy's output goes to .cache/test-twice/{here,clone}.log, and the end of each is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
logs="$root/.cache/test-twice"
mkdir -p "$logs"
clone="$(mktemp -d "${TMPDIR:-/tmp}/chorus-test-twice.XXXXXX")"
trap 'rm -rf "$clone"' EXIT

snapshot="$(git stash create)"
git clone --quiet --shared --no-checkout "$root" "$clone"
git -C "$clone" checkout --quiet --detach "${snapshot:-HEAD}"
# Built from the same sources; copied after the checkout so that build.sh finds it newer
# than them and does not build it again.
if [[ -d "$root/.cache/ferretdb" ]]; then
    mkdir -p "$clone/.cache/ferretdb"
    find "$root/.cache/ferretdb" -maxdepth 1 -name 'ferretdb-*' -type f \
        -exec cp {} "$clone/.cache/ferretdb/" \;
fi

make_args=("$@")
started=$SECONDS
make -C "$root" test "${make_args[@]}" >"$logs/here.log" 2>&1 &
here=$!
make -C "$clone" test "${make_args[@]}" >"$logs/clone.log" 2>&1 &
other=$!
here_status=0 clone_status=0
wait "$here" || here_status=$?
wait "$other" || clone_status=$?

for copy in here clone; do
    echo "== $copy ($logs/$copy.log)"
    tail -n 25 "$logs/$copy.log"
done
verdict() { if [[ $1 == 0 ]]; then echo passed; else echo FAILED; fi; }
elapsed=$((SECONDS - started))
echo "== both copies took $((elapsed / 60)) min $((elapsed % 60)) s;" \
    "here: $(verdict "$here_status"), clone: $(verdict "$clone_status")"
[[ $here_status == 0 && $clone_status == 0 ]]
