#!/usr/bin/env bash
# Recipe of the sandbox base image. floe up rebuilds the image only when this file changes
# (the image tag is a hash of it). Usage: sandbox-image.sh ROOTFS_DIR
# A minimal Debian with python3 + pytest + pip + git + patch + curl (as task images have them;
# the sandbox has no network, test/lockedDoors.test.ts shows pip and curl reach nothing), and an
# unprivileged user `agent`.
set -euo pipefail
rootfs=$1
mirror=${FLOE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
debootstrap --variant=minbase --include=python3,python3-pytest,python3-pip,git,patch,procps,curl,ca-certificates bookworm "$rootfs" "$mirror"
chroot "$rootfs" useradd --uid 1000 --create-home --shell /bin/bash agent
mkdir -p "$rootfs/work" "$rootfs/grade"
chroot "$rootfs" chown agent:agent /work
# Nothing in the image may be an answer key: no apt lists, no caches.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/usr/share/doc/*
