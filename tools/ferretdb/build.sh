#!/usr/bin/env bash
# Build the FerretDB test server (tools/ferretdb, the version pinned in go.mod) once and cache
# it as .cache/ferretdb/ferretdb-<version> (git-ignored). Idempotent: when that binary is
# newer than main.go, go.mod, go.sum, patches/ and this script, nothing is built.
#
# Prints the binary's path as the last line of stdout; progress goes to stderr.
# Needs Go 1.24+ (modules come from the Go module proxy; the default GOPATH, module cache
# and build cache are used). A cold build takes about 2 minutes on 2 CPUs; later ones are
# instant.
#
# Seven changes are applied at build time, to a copy of the module in .cache/ (nothing of
# FerretDB is copied into this repository; patches/ holds code of ours that the build adds):
# 1. _id lookups use the index, 2. update, findAndModify and delete are atomic, 3. and 4.
# filters naming _ids read only those rows, 5. MongoDB 8's bulkWrite (with -bulk-write),
# 6. no leak tracking, 7. a `$set` of a sub-document under other keys is stored. Each is
# explained where it is made. The first: FerretDB 1.24's SQLite backend looks documents up
# by `_ferretdb_sjson->'$._id'` while its unique _id index is on `_ferretdb_sjson->"_id"`.
# SQLite matches an index to a query by the expression's text, so every read, update and
# delete by _id scanned the whole table, parsing each document's JSON: 11 ms per lookup
# at 1,250 utterances instead of 0.007 ms, growing with the data. Both spellings mean the
# JSON path $._id (SQLite reads `->'label'` as `$.label`), so the lookup is rewritten the
# way the index is written.
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
for src in "$here/main.go" "$here/go.mod" "$here/go.sum" "$here/build.sh" \
    "$here/patches/bulk_write.go.in"; do
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
# The fix (see the top of this file), made on a copy of the module (Go refuses to build
# edited files of its module cache), which a generated go.mod puts in its place.
work="$(dirname "$out")/build"
module_dir="$(cd "$here" && go mod download github.com/FerretDB/FerretDB \
    && go list -m -f '{{.Dir}}' github.com/FerretDB/FerretDB)"
rm -rf "$work" && mkdir -p "$work"
cp -R "$module_dir" "$work/FerretDB" && chmod -R u+w "$work/FerretDB"
metadata="$work/FerretDB/internal/backends/sqlite/metadata/metadata.go"
sed -i 's|IDColumn = DefaultColumn + "->'"'"'\$\._id'"'"'"|IDColumn = DefaultColumn + `->"_id"`|' \
    "$metadata"
if ! grep -q 'IDColumn = DefaultColumn + `->"_id"`' "$metadata"; then
    echo "build.sh: FerretDB $version no longer has the _id lookup this script fixes" \
         "(internal/backends/sqlite/metadata/metadata.go): check whether it still needs" \
         "the fix, then update build.sh" >&2
    exit 1
fi
# The second fix: FerretDB 1.x runs an update as "find, change in Go, write back" with nothing
# in between, so two updates of one document on two connections could lose one of them
# (`$inc` included), where MongoDB makes every single-document write atomic. One mutex around
# the read-modify-write commands (update, findAndModify, delete) gives them MongoDB's
# atomicity; SQLite runs one writer at a time anyway, so nothing is lost in throughput.
handler="$work/FerretDB/internal/handler"
cat > "$handler/chorus_atomic_writes.go" <<'GO'
package handler

import "sync"

// writeMu makes each read-modify-write command atomic, as on MongoDB (see tools/ferretdb).
var writeMu sync.Mutex
GO
sed -i 's|^\tmatched, modified, upserted, err := h.updateDocument(connCtx, params)$|\twriteMu.Lock(); matched, modified, upserted, err := h.updateDocument(connCtx, params); writeMu.Unlock()|' \
    "$handler/msg_update.go"
sed -i 's|^\tres, err := h.findAndModifyDocument(connCtx, params)$|\twriteMu.Lock(); res, err := h.findAndModifyDocument(connCtx, params); writeMu.Unlock()|' \
    "$handler/msg_findandmodify.go"
sed -i 's|^\t\td, err = h.execDelete(connCtx, c, \&p)$|\t\twriteMu.Lock(); d, err = h.execDelete(connCtx, c, \&p); writeMu.Unlock()|' \
    "$handler/msg_delete.go"
if [[ "$(cat "$handler/msg_update.go" "$handler/msg_findandmodify.go" "$handler/msg_delete.go" \
        | grep -c 'writeMu.Lock()')" != 3 ]]; then
    echo "build.sh: FerretDB $version no longer has the update, findAndModify and delete" \
         "calls this script makes atomic (internal/handler/msg_*.go): update build.sh" >&2
    exit 1
fi
# The third: its SQLite backend reads a document by _id only when the filter is exactly
# {_id: ...}; a filter with _id and more ({_id: x, "line.done": 3}, the compare-and-set of
# the users' line) read and parsed the whole collection, 600 ms per update at 320 users.
# The backend now narrows any filter naming one _id to that row; the handler applies the
# whole filter to what it returns, as it always does.
collection="$work/FerretDB/internal/backends/sqlite/collection.go"
sed -i '0,/^\tif params.Filter.Len() == 1 {$/s//\tif params.Filter.Len() >= 1 {/' "$collection"
if ! grep -q '^	if params.Filter.Len() >= 1 {$' "$collection"; then
    echo "build.sh: FerretDB $version no longer has the _id pushdown this script widens" \
         "(internal/backends/sqlite/collection.go): update build.sh" >&2
    exit 1
fi
# The fourth: a filter {_id: {$in: [...]}} (a dialog's window, read in one command) is
# narrowed to those rows too, instead of reading the whole collection.
sed -i '0,/^\t\tcase string, types.ObjectID:$/s//\t\tcase *types.Document:\n\t\t\twhereClause, args = chorusIDsIn(v.(*types.Document))\n\t\tcase string, types.ObjectID:/' \
    "$collection"
cat > "$(dirname "$collection")/chorus_ids_in.go" <<'GO'
package sqlite

import (
	"fmt"
	"strings"

	"github.com/FerretDB/FerretDB/internal/backends/sqlite/metadata"
	"github.com/FerretDB/FerretDB/internal/handler/sjson"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// chorusIDsIn narrows {$in: [strings]} on _id to those rows (see tools/ferretdb/build.sh);
// anything else is left to the handler's filter.
func chorusIDsIn(cond *types.Document) (string, []any) {
	in, err := cond.Get("$in")
	if err != nil || cond.Len() != 1 {
		return "", nil
	}
	ids, ok := in.(*types.Array)
	if !ok || ids.Len() == 0 {
		return "", nil
	}
	marks := make([]string, 0, ids.Len())
	args := make([]any, 0, ids.Len())
	for i := 0; i < ids.Len(); i++ {
		id, ok := must.NotFail(ids.Get(i)).(string)
		if !ok {
			return "", nil
		}
		marks = append(marks, "?")
		args = append(args, string(must.NotFail(sjson.MarshalSingleValue(id))))
	}
	return fmt.Sprintf(` WHERE %s IN (%s)`, metadata.IDColumn, strings.Join(marks, ", ")), args
}
GO
if [[ "$(grep -c 'chorusIDsIn(v.(\*types.Document))' "$collection")" != 1 ]]; then
    echo "build.sh: FerretDB $version no longer has the _id pushdown this script extends" \
         "(internal/backends/sqlite/collection.go): update build.sh" >&2
    exit 1
fi
# The fifth: MongoDB 8's client-level bulkWrite (patches/bulk_write.go.in), answered only
# when the binary runs with -bulk-write, which also makes hello report wire version 25:
# the tests run the agent's 4-command turn of MongoDB 8 against it, and its 5-command turn
# of MongoDB 6 and 7 against the server without the flag.
cp "$here/patches/bulk_write.go.in" "$handler/chorus_bulk_write.go"
sed -i 's|^\t\t"buildInfo": {$|\t\t"bulkWrite": {\n\t\t\tHandler: h.MsgChorusBulkWrite,\n\t\t\tHelp:    "Runs inserts, updates and deletes in order.",\n\t\t},\n&|' \
    "$handler/commands.go"
sed -i 's|^\tres.Set("maxWireVersion", common.MaxWireVersion)$|\tres.Set("maxWireVersion", chorusMaxWireVersion())|' \
    "$handler/msg_hello.go"
if ! grep -q 'h.MsgChorusBulkWrite' "$handler/commands.go" \
        || ! grep -q 'chorusMaxWireVersion()' "$handler/msg_hello.go"; then
    echo "build.sh: FerretDB $version no longer has the command table or the hello reply" \
         "this script extends (internal/handler/commands.go, msg_hello.go): update build.sh" >&2
    exit 1
fi
# The sixth: FerretDB records the creator's stack of every cursor and iterator it opens, in
# a pprof profile, to find leaks in its own tests: a tenth of the server's CPU under load.
# Track and Untrack return at once.
resource="$work/FerretDB/internal/util/resource/resource.go"
sed -i 's|^func Track(obj any, token \*Token) {$|&\n\treturn|; s|^func Untrack(obj any, token \*Token) {$|&\n\treturn|' \
    "$resource"
if [[ "$(grep -A1 '^func \(Track\|Untrack\)(obj any, token \*Token) {$' "$resource" | grep -c return)" != 2 ]]; then
    echo "build.sh: FerretDB $version no longer has the resource tracking this script turns" \
         "off (internal/util/resource/resource.go): update build.sh" >&2
    exit 1
fi
# The seventh: an update's `$set` is skipped when the new value is "identical" to the old,
# and FerretDB 1.24's check compared two sub-documents' values but not their keys: setting
# {"b": 1} where {"a": 1} was stored left {"a": 1}, and said nothing was modified (a user
# attribute changed that way was lost). The check now compares keys too, as MongoDB does.
identical="$work/FerretDB/internal/types/identical.go"
sed -i 's|^\t\t\t_, aField, err := aIter.Next()$|\t\t\taKey, aField, err := aIter.Next()|; s|^\t\t\t_, bField, err := bIter.Next()$|\t\t\tbKey, bField, err := bIter.Next()|; s|^\t\t\tif !Identical(aField, bField) {$|\t\t\tif aKey != bKey \|\| !Identical(aField, bField) {|' \
    "$identical"
if [[ "$(grep -c 'aKey != bKey || !Identical(aField, bField)\|aKey, aField, err\|bKey, bField, err' "$identical")" != 3 ]]; then
    echo "build.sh: FerretDB $version no longer has the sub-document comparison this script" \
         "fixes (internal/types/identical.go): update build.sh" >&2
    exit 1
fi
{ cat "$here/go.mod"; echo "replace github.com/FerretDB/FerretDB => $work/FerretDB"; } \
    > "$work/go.mod"
cp "$here/go.sum" "$work/go.sum"
# The build says it has these fixes in its version ("v1.24.2+chorus-fixes"): the agent
# then trusts it as it trusts MongoDB (several connections, one $in for the window).
(cd "$here" && CGO_ENABLED=0 go build -buildvcs=false -trimpath -modfile "$work/go.mod" \
    -ldflags "-X main.fixes=chorus-fixes" -o "$tmp" .)
mv -f "$tmp" "$out"
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$out"
