#!/bin/sh
# Builds the minicoder sandbox root filesystem with debootstrap, for machines
# that cannot pull a base image. Usage: rootfs.sh DIR [MIRROR]
# The result is what sandbox/Dockerfile produces: Debian bookworm with the
# toolchain below and an unprivileged `sandbox` user (uid/gid 10001).
set -eu
dir=$1
mirror=${2:-http://deb.debian.org/debian}
packages=python3,python3-pytest,git,ripgrep,build-essential,ca-certificates,procps
debootstrap --variant=minbase --include="$packages" bookworm "$dir" "$mirror"
# Same user and layout as the Dockerfile.
echo 'sandbox:x:10001:10001:minicoder sandbox:/home/sandbox:/bin/sh' >>"$dir/etc/passwd"
echo 'sandbox:x:10001:' >>"$dir/etc/group"
echo 'sandbox:!:20000:0:99999:7:::' >>"$dir/etc/shadow"
mkdir -p "$dir/workspace" "$dir/home/sandbox"
chown 10001:10001 "$dir/workspace" "$dir/home/sandbox"
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*
