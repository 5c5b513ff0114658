#!/usr/bin/env python3
"""How often a short command costs a second more through ansible-core's run_command than through host.NodeModule's
(bench/README.md, "The lost second"). Not a test: it needs a lab node and prints what it measured.

  bench/run_command_probe.py [--host kgn-gpu-containerd] [--rounds 100] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="kgn-gpu-containerd", help="a node of the lab inventory (lab.sh up)")
    parser.add_argument("--rounds", type=int, default=100, help="rounds of three commands per run")
    parser.add_argument("--repeat", type=int, default=2, help="module runs")
    args = parser.parse_args()
    env = dict(os.environ, ANSIBLE_LIBRARY=str(TOP / "bench" / "library"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    totals = {"ansible_core": [0, 0], "node_module": [0, 0]}
    for _ in range(args.repeat):
        out = subprocess.run(["ansible", args.host, "-m", "run_command_probe", "-a", f"rounds={args.rounds}"],
                             cwd=TOP, env=env, capture_output=True, text=True, check=True).stdout
        result = json.loads(out)["plays"][0]["tasks"][0]["hosts"][args.host]
        for key, total in totals.items():
            total[0] += result[key]["calls"]
            total[1] += len(result[key]["over_half_a_second"])
            print(f"{key:13s} {result[key]['calls']} calls, over 0.5 s: {result[key]['over_half_a_second']}")
    for key, (calls, slow) in totals.items():
        print(f"total {key:13s} {slow} of {calls} calls took over 0.5 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
