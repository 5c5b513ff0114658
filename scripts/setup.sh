#!/usr/bin/env bash
# Set up the control machine: a Python venv with the pinned requirements and the Ansible
# collections the project uses, taken offline from the `ansible` wheel on PyPI (Galaxy is not
# reachable here). Idempotent: re-running only fixes what is missing or out of date.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${KGN_VENV:-$top/.venv}
python=${KGN_PYTHON:-python3}
ansible_wheel_version=${KGN_ANSIBLE_WHEEL:-12.3.0}   # the ansible 12.x bundle matches ansible-core 2.19
collections=(community/docker community/library_inventory_filtering_v1 ansible/posix community/general)

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  "$python" -m venv "$venv"
fi
stamp=$venv/.requirements.sha
want=$(sha256sum "$top/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python requirements"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$top/requirements.txt"
  echo "$want" >"$stamp"
fi

dest=$top/collections/ansible_collections
if [ "$(cat "$dest/.bundle" 2>/dev/null)" != "$ansible_wheel_version" ]; then
  echo "setup: unpacking collections from ansible==$ansible_wheel_version"
  tmp=$(mktemp -d)
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    "ansible==$ansible_wheel_version" -d "$tmp"
  rm -rf "$dest" && mkdir -p "$dest"
  "$venv/bin/python" - "$tmp"/ansible-*.whl "$dest" "${collections[@]}" <<'PY'
import sys, zipfile
wheel, dest, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
prefixes = tuple(f"ansible_collections/{c}/" for c in wanted)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefixes):
            z.extract(name, dest.rsplit("/ansible_collections", 1)[0])
PY
  rm -rf "$tmp"
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
