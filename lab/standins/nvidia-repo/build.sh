#!/usr/bin/env bash
# Build the lab's STAND-IN for NVIDIA's apt repository (NVIDIA's repositories are unreachable here).
# Laid out like https://nvidia.github.io so the role takes the same code path as with a real mirror:
#   <out>/libnvidia-container/gpgkey                      armored public key (throwaway, made here)
#   <out>/libnvidia-container/stable/deb/<arch>/          flat repo: *.deb Packages(.gz) Release InRelease Release.gpg
#   <out>/fingerprint                                     the key's fingerprint (to pin it in tests)
# Packages come from packages.txt + files/; every one says STAND-IN in its description.
# Rebuilt only when packages.txt, files/ or this script changed.
# Usage: build.sh [OUT]   (default /var/cache/kgn-lab/nvidia-repo; the lab mounts it at /srv/kgn-nvidia-repo)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${KGN_NVIDIA_REPO_OUT:-/var/cache/kgn-lab/nvidia-repo}}
arch=$(dpkg --print-architecture)

for tool in dpkg-deb apt-ftparchive gpg; do
  command -v "$tool" >/dev/null || { echo "nvidia-repo: $tool is missing (apt-get install dpkg-dev apt-utils gnupg)" >&2; exit 1; }
done

# -L: files/ links the captures the stand-in nvidia-ctk answers with (tests/unit/fixtures); their content counts
want=$( (cd "$here" && find -L . -type f ! -name '*.swp' -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.sources.sha" 2>/dev/null)" = "$want" ] && [ -s "$out/libnvidia-container/stable/deb/$arch/InRelease" ]; then
  echo "nvidia-repo: stand-in repository up to date ($out)"
  exit 0
fi

work=$(mktemp -d /var/tmp/kgn-nvidia-repo.XXXXXX)
trap 'rm -rf "$work"' EXIT
repo=$work/out/libnvidia-container/stable/deb/$arch
mkdir -p "$repo"

build_package() {  # name version arch depends extra files
  local name=$1 version=$2 parch=$3 depends=$4 extra=$5 files=$6 root field src dest mode
  root=$work/pkg/${name}_${version}
  mkdir -p "$root/DEBIAN" "$root/usr/share/doc/$name"
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: $parch"
    echo "Maintainer: kube-gpu-nodes lab <stand-in@kgn-lab.invalid>"
    echo "Priority: optional"
    [ -z "$depends" ] || echo "Depends: $depends"
    IFS=';' read -ra fields <<<"$extra"
    for field in "${fields[@]}"; do
      case "$field" in
        Conffiles:*) printf '%s\n' "${field#Conffiles: }" >>"$root/DEBIAN/conffiles" ;;
        Postinst:*) install -m 0755 "$here/files/${field#Postinst: }" "$root/DEBIAN/postinst" ;;
        ?*) echo "$field" ;;
      esac
    done
    echo "Description: STAND-IN for NVIDIA's $name $version (kube-gpu-nodes lab)"
    echo " Not NVIDIA software. Built by lab/standins/nvidia-repo/build.sh because NVIDIA's"
    echo " repositories cannot be reached from the lab. Same name, version and dependencies"
    echo " as the real package; its nvidia-container-runtime logs each call and runs runc."
  } >"$root/DEBIAN/control"
  IFS=';' read -ra entries <<<"$files"
  for entry in "${entries[@]}"; do
    [ -n "$entry" ] || continue
    IFS=':' read -r src dest mode <<<"$entry"
    install -D -m "$mode" "$here/files/$src" "$root$dest"
    sed -i "s/@VERSION@/${version%-*}/g" "$root$dest"
  done
  printf 'STAND-IN package built for the kube-gpu-nodes lab; not NVIDIA software.\n' \
    >"$root/usr/share/doc/$name/README.stand-in"
  dpkg-deb --root-owner-group -Zxz --build "$root" "$repo/${name}_${version}_${parch}.deb" >/dev/null
}

while IFS='|' read -r name version parch depends extra files; do
  case "$name" in ''|'#'*) continue ;; esac
  build_package "$name" "$version" "$parch" "$depends" "$extra" "$files"
done <"$here/packages.txt"

# Throwaway signing key, made for this build only.
export GNUPGHOME=$work/gnupg
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --pinentry-mode loopback \
  --quick-gen-key "kube-gpu-nodes lab STAND-IN NVIDIA repository key <stand-in@kgn-lab.invalid>" rsa3072 sign never
fpr=$(gpg --batch --with-colons --list-keys | awk -F: '/^fpr:/ {print $10; exit}')
gpg --batch --armor --export "$fpr" >"$work/out/libnvidia-container/gpgkey"
echo "$fpr" >"$work/out/fingerprint"

(
  cd "$repo"
  apt-ftparchive packages . >Packages
  gzip -9kn Packages
  apt-ftparchive -o APT::FTPArchive::Release::Origin="kube-gpu-nodes lab STAND-IN" \
    -o APT::FTPArchive::Release::Label="STAND-IN nvidia-container-toolkit" release . >Release
  gpg --batch --quiet --yes --default-key "$fpr" --clearsign -o InRelease Release
  gpg --batch --quiet --yes --default-key "$fpr" -abs -o Release.gpg Release
)
echo "$want" >"$work/out/.sources.sha"

# Replace the contents, not the directory: running nodes bind-mount it.
mkdir -p "$out"
find "$out" -mindepth 1 -delete
cp -a "$work/out/." "$out/"
echo "nvidia-repo: built the stand-in repository in $out ($(ls "$repo"/*.deb | wc -l) packages, key $fpr)"
