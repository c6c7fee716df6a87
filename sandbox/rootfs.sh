#!/bin/sh
# Builds the minicoder sandbox root filesystem with debootstrap, for machines
# that cannot pull a base image. Usage: rootfs.sh DIR [MIRROR]
# go-warm.sh and go-wrapper.sh are expected beside this script.
# The result is what sandbox/Dockerfile produces: Debian 13 "trixie" with the
# toolchains below and an unprivileged `sandbox` user (uid/gid 10001).
# debootstrap lays down a minimal system; apt-get inside it installs the rest
# (much faster than debootstrap --include, which unpacks one package at a time).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$1
mirror=${2:-http://deb.debian.org/debian}
# Keep this list and the Dockerfile's in step.
packages="python3 python3-pip python3-venv python3-pytest \
  nodejs npm yarnpkg node-typescript \
  rustc cargo rustfmt rust-clippy \
  golang-go \
  build-essential pkg-config \
  git ripgrep ca-certificates procps"
debootstrap --variant=minbase trixie "$dir" "$mirror"
echo "deb $mirror trixie main" >"$dir/etc/apt/sources.list"
# No manuals or documentation: they are a tenth of the image and nobody reads them here.
cat >"$dir/etc/dpkg/dpkg.cfg.d/minicoder-nodoc" <<'CFG'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
CFG
mount -t proc proc "$dir/proc"
trap 'umount "$dir/proc" 2>/dev/null || true' EXIT
# No fsync per unpacked file: a half-built root filesystem is thrown away anyway.
chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-unsafe-io $packages"
# Debian calls yarn `yarnpkg`; projects call it `yarn`.
ln -sf /usr/bin/yarnpkg "$dir/usr/local/bin/yarn"
install -m 0755 "$here/go-wrapper.sh" "$dir/usr/local/bin/go"
install -m 0755 "$here/go-warm.sh" "$dir/tmp/go-warm.sh"
mkdir -p "$dir/cache"
chroot "$dir" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin sh /tmp/go-warm.sh
rm -f "$dir/tmp/go-warm.sh"
umount "$dir/proc"
trap - EXIT
# Same user and layout as the Dockerfile.
echo 'sandbox:x:10001:10001:minicoder sandbox:/home/sandbox:/bin/sh' >>"$dir/etc/passwd"
echo 'sandbox:x:10001:' >>"$dir/etc/group"
echo 'sandbox:!:20000:0:99999:7:::' >>"$dir/etc/shadow"
mkdir -p "$dir/workspace" "$dir/home/sandbox"
chown 10001:10001 "$dir/workspace" "$dir/home/sandbox" "$dir/cache"
# What debootstrap installed before the exclusions took effect, and apt's leftovers.
find "$dir/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
rm -rf "$dir"/usr/share/man/* "$dir"/usr/share/info/* \
  "$dir"/var/cache/apt/archives/*.deb "$dir"/var/cache/apt/*.bin \
  "$dir"/var/lib/apt/lists/* "$dir"/var/log/* "$dir"/root/.cache
find "$dir/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
