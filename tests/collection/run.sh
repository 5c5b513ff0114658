#!/usr/bin/env bash
# Build the collection artifact, install it into an empty folder and run a playbook that lives
# outside the repository and calls the collection's role, module and filter by FQCN. Only the
# installed artifact (and its dependency community.general) is on the collections path, never the
# checkout, so a file missing from the artifact fails here.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/kgn-collection.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/artifact" "$work/installed" "$work/deps/ansible_collections" "$work/outside"
(cd "$top" && ansible-galaxy collection build --output-path "$work/artifact")
artifact=$(ls "$work"/artifact/kgn-gpu_nodes-*.tar.gz)
# dependencies only (Galaxy is not reachable): the community collections setup.sh unpacked
for ns in community ansible; do ln -s "$top/collections/ansible_collections/$ns" "$work/deps/ansible_collections/$ns"; done
export ANSIBLE_COLLECTIONS_PATH="$work/installed:$work/deps"
ansible-galaxy collection install --offline --no-deps "$artifact" -p "$work/installed"
ansible-galaxy collection list kgn.gpu_nodes | tee "$work/list.txt"
grep -q "^# $work/installed/ansible_collections" "$work/list.txt"
cp "$top/tests/collection/outside.yml" "$work/outside/"
cd "$work/outside"   # no ansible.cfg here: nothing of the checkout is read
ansible-playbook -i localhost, -c local -e "ansible_python_interpreter=$(command -v python3)" \
  -e "render_dir=$work/outside/render" outside.yml
