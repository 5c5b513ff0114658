#!/usr/bin/env bash
# A sliced run of the bench fleet merged into one fleet report, against one run over the whole fleet (docs/fleet.md):
#   bench/run-slices.sh [--nodes 32] [--slices 4] [--keep]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate
bash scripts/lab/ensure-docker.sh
bash scripts/lab/build-images.sh
python bench/slices.py "$@"
