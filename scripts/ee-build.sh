#!/usr/bin/env bash
# The execution environment (docs/fleet.md): the collection's archive, then ansible-builder's build context.
#   scripts/ee-build.sh            create the context in ee/context/ (no container engine needed)
#   scripts/ee-build.sh build TAG  also build the image (podman or docker, and the base image, must be at hand)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck disable=SC1091
[ -n "${VIRTUAL_ENV:-}" ] || source .venv/bin/activate
rm -rf ee/collections ee/context
mkdir -p ee/collections
ansible-galaxy collection build --force --output-path ee/collections . >/dev/null
version=$(python3 -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
archive=ee/collections/kgn-gpu_nodes-$version.tar.gz
[ -f "$archive" ] || { echo "ee-build: $archive was not built" >&2; exit 1; }
grep -q "collections/kgn-gpu_nodes-$version.tar.gz" ee/requirements.yml \
  || { echo "ee-build: ee/requirements.yml does not name kgn-gpu_nodes-$version.tar.gz (galaxy.yml's version)" >&2; exit 1; }
ansible-builder create --file execution-environment.yml --context ee/context
if [ "${1:-}" = build ]; then
  ansible-builder build --file execution-environment.yml --context ee/context --tag "${2:-kgn-gpu-nodes-ee:$version}"
fi
