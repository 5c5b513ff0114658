#!/usr/bin/env bash
# Build the lab's node images from Debian's mirror with debootstrap, only when missing.
# No registry is reachable here, so nothing is ever pulled.
# Usage: build-images.sh [SUITE...]   (default: bullseye bookworm trixie)
set -euo pipefail

mirror=${KGN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=python3,python3-yaml,systemd,systemd-sysv,dbus,ca-certificates,gnupg,apt-transport-https,openssl,procps,kmod
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(bullseye bookworm trixie)

build() {
  local suite=$1 image=local/debian:$1 rootfs
  if docker image inspect "$image" >/dev/null 2>&1; then
    echo "lab: image $image present"
    return 0
  fi
  rootfs=$(mktemp -d "/var/tmp/kgn-rootfs-$suite.XXXXXX")
  echo "lab: building $image with debootstrap (about a minute)"
  debootstrap --variant=minbase --include="$packages" \
    --components=main,contrib,non-free"$( [ "$suite" = bullseye ] || echo ,non-free-firmware)" \
    "$suite" "$rootfs" "$mirror" >"/var/tmp/kgn-debootstrap-$suite.log" 2>&1 || {
      echo "lab: debootstrap $suite failed, see /var/tmp/kgn-debootstrap-$suite.log" >&2
      rm -rf "$rootfs"; return 1; }
  # A container has no hardware clock, udev or getty; masking them keeps boot quiet and quick.
  for unit in systemd-udevd.service systemd-udev-trigger.service getty@tty1.service \
              systemd-timesyncd.service systemd-resolved.service; do
    ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
  done
  echo "$suite" >"$rootfs/etc/kgn-lab-node"
  tar -C "$rootfs" -c . | docker import -c 'CMD ["/lib/systemd/systemd"]' - "$image" >/dev/null
  rm -rf "$rootfs"
  echo "lab: built $image"
}

for s in "${suites[@]}"; do
  build "$s"
  mkdir -p "${KGN_LAB_CACHE:-/var/cache/kgn-lab}/apt/$s/partial"   # the per-suite apt cache node containers mount
done
