#!/usr/bin/env bash
# A stand-in for the images' base, python:3.11-slim-bookworm, for machines that cannot reach
# Docker Hub: Debian bookworm from Debian's own packages (debootstrap, minbase) with its python3
# (3.11), venv and passwd, imported under the base's tag so the Dockerfiles build unchanged.
# It is NOT the official image (Python is Debian's 3.11.2 in /usr/bin, not python.org's in
# /usr/local/bin), and it carries this machine's CA bundle so pip works behind the same TLS proxy.
# Usage (as root, needs debootstrap and a Debian mirror): docker/standin-base.sh [TAG]
set -euo pipefail
TAG="${1:-python:3.11-slim-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
command -v debootstrap >/dev/null || { echo "error: debootstrap is needed (apt-get install debootstrap)" >&2; exit 1; }
ROOTFS="$(mktemp -d)"
trap 'rm -rf "$ROOTFS"' EXIT
echo "stand-in base: debootstrap bookworm from $MIRROR (a few minutes)" >&2
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,passwd \
  bookworm "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || { tail -20 "$ROOTFS.log" >&2; exit 1; }
rm -f "$ROOTFS.log"
[ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/"
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/* "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/*
tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'LABEL imagenet-build.stand-in="Debian bookworm minbase + python3 3.11 from Debian packages, not the official python image"' \
  --change 'CMD ["python3"]' - "$TAG" >/dev/null
echo "stand-in base: $TAG imported ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%d MB", $1/1e6}'))" >&2
