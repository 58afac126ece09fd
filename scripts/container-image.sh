#!/usr/bin/env bash
# Builds, once, a small Debian bookworm image for podman without any image registry:
# mmdebstrap makes the root file system from Debian's mirror (~25 s) and podman imports
# it. A second call finds the image and does nothing. The container tests, the runtime
# image (Containerfile) and the fleet tests all start from it.
# Usage: scripts/container-image.sh [NAME]   (default localhost/airlock-base:bookworm)
# Needs: podman, mmdebstrap (apt-get install -y podman mmdebstrap), root.
set -euo pipefail
name=${1:-localhost/airlock-base:bookworm}
# Everything the sandboxed interpreters and the tests inside the container need; the
# image carries no airlock binary (tests mount bin/airlock, the Containerfile copies it).
# uidmap (newuidmap, newgidmap) lets a non-root server give sandboxes subordinate ids.
packages=python3,nodejs,bash,libseccomp2,ca-certificates,procps,util-linux,uidmap
# The image carries its package list as a label: an image cached from an older list is
# built again.
if podman image exists "$name"; then
  have=$(podman image inspect --format '{{index .Labels "airlock.packages"}}' "$name" 2>/dev/null || true)
  if [ "$have" = "$packages" ]; then
    exit 0
  fi
  echo "container-image: $name has packages '${have:-unlabelled}', want '$packages'; rebuilding" >&2
fi
for cmd in podman mmdebstrap; do
  command -v "$cmd" >/dev/null || { echo "container-image: $cmd is needed (apt-get install -y podman mmdebstrap)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "container-image: building $name from Debian bookworm ($packages)" >&2
mmdebstrap --quiet --variant=minbase --include="$packages" bookworm "$work/rootfs.tar" >&2
podman import --quiet --change "LABEL airlock.packages=$packages" "$work/rootfs.tar" "$name" >/dev/null
echo "container-image: $name ready" >&2
