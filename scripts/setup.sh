#!/usr/bin/env bash
# Set up the control machine: a Python venv with the pinned requirements and the Ansible
# collections the project uses, taken offline from the `ansible` wheel on PyPI (Galaxy is not
# reachable here). Idempotent: re-running only fixes what is missing or out of date.
#   scripts/setup.sh [--core 2.19|2.16]   (or KGN_CORE=2.16)
# 2.19 (the default) is the project's pin: .venv, requirements.txt, collections/. 2.16 is for fleets whose nodes
# have Python 3.6 at most (CentOS 7, Oracle Linux 7), which ansible-core 2.17 and later no longer manage: a
# separate .venv-2.16 from requirements-2.16.txt, with the collections of the ansible 9.x bundle in
# .venv-2.16/collections (point ANSIBLE_COLLECTIONS_PATH there); the 2.19 set-up is left as it is.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
core=${KGN_CORE:-2.19}
while [ $# -gt 0 ]; do
  case $1 in
    --core) core=${2:?--core needs a version}; shift 2 ;;
    --core=*) core=${1#--core=}; shift ;;
    *) echo "usage: $0 [--core 2.19|2.16]" >&2; exit 2 ;;
  esac
done
case $core in
  2.19)
    venv=${KGN_VENV:-$top/.venv} requirements=$top/requirements.txt
    ansible_wheel_version=${KGN_ANSIBLE_WHEEL:-12.3.0}   # the ansible 12.x bundle matches ansible-core 2.19
    dest=$top/collections/ansible_collections ;;
  2.16)
    venv=${KGN_VENV:-$top/.venv-2.16} requirements=$top/requirements-2.16.txt
    ansible_wheel_version=${KGN_ANSIBLE_WHEEL:-9.13.0}   # the ansible 9.x bundle matches ansible-core 2.16
    dest=$venv/collections/ansible_collections ;;
  *) echo "setup: ansible-core $core is not supported: 2.19 (the default) or 2.16" >&2; exit 2 ;;
esac
python=${KGN_PYTHON:-python3}
collections=(community/docker community/library_inventory_filtering_v1 ansible/posix community/general)

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  "$python" -m venv "$venv"
fi
stamp=$venv/.requirements.sha
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python requirements"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  echo "$want" >"$stamp"
fi

if [ "$(cat "$dest/.bundle" 2>/dev/null)" != "$ansible_wheel_version" ]; then
  echo "setup: unpacking collections from ansible==$ansible_wheel_version"
  # the bundle is some 50 MB: keep it, so that unpacking it again needs no download
  wheels=$top/.cache/wheels
  wheel=$wheels/ansible-$ansible_wheel_version-py3-none-any.whl
  if [ ! -s "$wheel" ]; then
    "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      "ansible==$ansible_wheel_version" -d "$wheels"
  fi
  rm -rf "$dest" && mkdir -p "$dest"
  "$venv/bin/python" - "$wheel" "$dest" "${collections[@]}" <<'PY'
import sys, zipfile
wheel, dest, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
prefixes = tuple(f"ansible_collections/{c}/" for c in wanted)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefixes):
            z.extract(name, dest.rsplit("/ansible_collections", 1)[0])
PY
  echo "$ansible_wheel_version" >"$dest/.bundle"
fi
# A plain checkout is the collection kgn.gpu_nodes: link it where Ansible and Python look for it, and drop a
# copy of it that a tool installed into the user's collections folder (it would shadow the checkout).
rm -rf "${HOME:-/root}/.ansible/collections/ansible_collections/kgn/gpu_nodes"
mkdir -p "$dest/kgn"
if [ "$(readlink "$dest/kgn/gpu_nodes" 2>/dev/null)" != "$top" ]; then
  ln -sfn "$top" "$dest/kgn/gpu_nodes"
fi
version=$("$venv/bin/ansible" --version)
echo "setup: ready (${version%%$'\n'*})"
[ "$core" = 2.19 ] || echo "setup: use it with: source $venv/bin/activate && export ANSIBLE_COLLECTIONS_PATH=${dest%/*}"
