#!/bin/sh
# minicoder: `go` with a writable build cache over the image's warm,
# read-only one (the whole standard library, compiled when the image was
# built), unless GOCACHE is set. The writable cache lives in this
# container's /tmp, which is emptied after every command: its entries start
# as links to the warm ones, so the standard library is never compiled again
# and what a command compiles never reaches another command or container.
if [ -z "${GOCACHE:-}" ] && [ -d /cache/go/build ]; then
  GOCACHE=${TMPDIR:-/tmp}/minicoder-go-build
  if [ ! -d "$GOCACHE" ]; then
    seed="$GOCACHE.$$"
    if mkdir -p "$seed" && cp -Rs /cache/go/build/. "$seed/" 2>/dev/null; then
      # Another `go` may have made it first: then this copy goes.
      mv -T "$seed" "$GOCACHE" 2>/dev/null || rm -rf "$seed"
    else
      rm -rf "$seed"
      mkdir -p "$GOCACHE"
    fi
  fi
  export GOCACHE
fi
exec /usr/bin/go "$@"
