#!/bin/sh
# minicoder: `go` with the image's warm, read-only build cache when no other
# cache is set (the project's cache volume sets GOCACHE itself).
if [ -z "${GOCACHE:-}" ] && [ -d /cache/go/build ]; then
  GOCACHE=/cache/go/build
  export GOCACHE
fi
exec /usr/bin/go "$@"
