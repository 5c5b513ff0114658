#!/usr/bin/env bash
# Real Kubernetes binaries for the lab, from a mirror folder laid out like upstream's release downloads:
#   MIRROR/vX.Y.Z/<binary>.xz (or the plain <binary>), MIRROR/vX.Y.Z/SHA256SUMS (sha256 of the plain binaries),
#   optional MIRROR/vX.Y.Z/PROVENANCE.md
# Each binary is checked against SHA256SUMS and unpacked once into the lab's cache, which the nodes mount read-only.
# Lab only: the roles and modules never read this (docs/lab.md, "Where the Kubernetes binaries come from").
#   kube-binaries.sh [VERSION...]     default: the versions the lab runs (v1.36.3 v1.22.3)
#   KGN_KUBE_MIRROR   the mirror folder (default: ../shared/kube beside the checkout, where these machines have one)
#   KGN_LAB_CACHE     the lab's cache (default /var/cache/kgn-lab); binaries go to $KGN_LAB_CACHE/kube/VERSION
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mirror=${KGN_KUBE_MIRROR:-$top/../shared/kube}
cache=${KGN_LAB_CACHE:-/var/cache/kgn-lab}/kube
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(v1.36.3 v1.22.3)

die() { echo "lab: $*" >&2; exit 1; }

unpack() {  # unpack VERSION: every binary SHA256SUMS names, checked, into $cache/VERSION
  local version=$1 src=$mirror/$1 dest=$cache/$1 sum name tmp have
  [ -r "$src/SHA256SUMS" ] || die "no $src/SHA256SUMS: set KGN_KUBE_MIRROR to a folder laid out as MIRROR/$version/" \
    "(the binaries and SHA256SUMS of upstream's release downloads, docs/lab.md)"
  mkdir -p "$dest"
  while read -r sum name; do
    [ -n "$name" ] || continue
    if [ -x "$dest/$name" ] && [ "$(cat "$dest/$name.sha256" 2>/dev/null)" = "$sum" ]; then
      continue   # unpacked and checked by an earlier run
    fi
    tmp=$(mktemp "$dest/.$name.XXXXXX")
    if [ -r "$src/$name.xz" ]; then
      xz -dc "$src/$name.xz" >"$tmp"
    elif [ -r "$src/$name" ]; then
      cp "$src/$name" "$tmp"
    else
      rm -f "$tmp"; die "$src has neither $name.xz nor $name, which its SHA256SUMS names"
    fi
    have=$(sha256sum "$tmp" | cut -d' ' -f1)
    if [ "$have" != "$sum" ]; then
      rm -f "$tmp"; die "$src/$name: sha256 $have, but SHA256SUMS says $sum: the mirror is damaged, nothing used"
    fi
    chmod 0755 "$tmp" && mv -f "$tmp" "$dest/$name"
    echo "$sum" >"$dest/$name.sha256"
    echo "lab: unpacked $version/$name (sha256 checked)"
  done <"$src/SHA256SUMS"
  [ ! -r "$src/PROVENANCE.md" ] || cp -f "$src/PROVENANCE.md" "$dest/PROVENANCE.md"
  printf 'Kubernetes %s binaries taken from %s, each checked against its SHA256SUMS.\n' \
    "$version" "$(cd "$src" && pwd)" >"$dest/SOURCE"
  echo "lab: Kubernetes $version from $(cd "$src" && pwd) (checked against its SHA256SUMS) in $dest"
}

for v in "${versions[@]}"; do unpack "$v"; done
