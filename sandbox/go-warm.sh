#!/bin/sh
# Fills Go's build cache at /cache/go/build with the whole standard library
# and what `go test` adds for it: a test of a package importing every
# importable standard package compiles them all and records the facts
# `go test`'s vet step needs of each. `go test` in a fresh sandbox
# container then compiles, vets and links only the project's own packages
# (under a second for a small module using math/big and net/http, against
# about three without the facts and half a minute without the cache). Run
# as root inside the image being built; the sandbox user owns the result.
# The cache is read-only in containers: the `go` wrapper gives each
# container a writable one whose entries link to these.
set -eu
warm=$(mktemp -d)
go() {
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$warm" GOCACHE=/cache/go/build GOTOOLCHAIN=local \
    GOFLAGS= GOPROXY=off /usr/bin/go "$@"
}
cat >"$warm/go.mod" <<'MOD'
module minicoder.invalid/warm

go 1.24
MOD
cd "$warm"
{
  echo 'package warm'
  echo
  echo 'import ('
  go list -e -f '{{if and (gt (len .GoFiles) 0) (not .Incomplete)}}{{.ImportPath}}{{end}}' std |
    grep -vE '(^|/)(internal|vendor)(/|$)|^cmd/' | sed 's/.*/\t_ "&"/'
  echo ')'
} >warm.go
cat >warm_test.go <<'SRC'
package warm

import "testing"

func TestWarm(t *testing.T) {}
SRC
go test ./... >/dev/null
go build std
cd /
rm -rf "$warm"
chown -R 10001:10001 /cache
