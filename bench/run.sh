#!/usr/bin/env bash
# The benchmark's own command (not part of `make test`):
#   bench/run.sh [--sizes 1,4,16,32] [--cold] [--keep] [--merge bench/results/<stamp>/results.json]
# then bench/report.py writes bench/README.md's table and bench/time-vs-nodes.png from the results.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
command -v /usr/bin/time >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq time >/dev/null; }
bash scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate
pip install -q --disable-pip-version-check -r bench/requirements.txt
bash scripts/lab/ensure-docker.sh
bash scripts/lab/build-images.sh
python bench/bench.py "$@"
python bench/report.py bench/results/latest.json bench/before-tuning.json  # the first run, before tuning, for the plot
