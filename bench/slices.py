#!/usr/bin/env python3
"""A sliced run of the bench fleet, merged, against one run over the whole fleet (docs/fleet.md). Not a test.

Starts N GPU node containers beside the lab's kubeadm control plane (as bench.py does), converges them once, then
  1. runs site.yml over the whole inventory (its report: the whole run's),
  2. runs it again as S slices, one after the other, each limited to every S-th host of the inventory (a slice's
     --limit, as a sliced job gives each slice a part of the inventory), each writing its own report,
  3. merges the S reports with playbooks/report_merge.yml,
and compares the merged report with the whole run's, host for host: every column of the table, the verdict and
each check's status. Prints the comparison and the times; writes them to bench/results/<stamp>-slices/.

  bench/run-slices.sh [--nodes 32] [--slices 4] [--keep]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import bench

TOP = bench.TOP
REPORTS = TOP / "reports"


def run(inventory: Path, out: Path, label: str, *extra: str) -> dict:
    """One ansible-playbook run of site.yml (or what ``extra`` names), its wall time and the report it wrote."""
    before = set(REPORTS.iterdir()) if REPORTS.is_dir() else set()
    log = out / f"{label}.log"
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        proc = bench.subprocess.run(["ansible-playbook", "-i", str(inventory), *extra], cwd=TOP, stdout=handle,
                                    stderr=bench.subprocess.STDOUT, check=False)
    wall = round(time.monotonic() - start, 1)
    made = sorted(p for p in set(REPORTS.iterdir()) - before if p.is_dir() and (p / "report.json").is_file())
    return {"label": label, "rc": proc.returncode, "wall_s": wall, "log": str(log.relative_to(TOP)),
            "report": str(made[-1]) if made else ""}


def shape(report: dict) -> dict:
    """What must be equal host for host: the table's cells, the verdict, each check's status."""
    return {row["host"]: {"cells": {k: v for k, v in row.items() if k not in ("checks", "changes")},
                          "checks": [(c.get("id"), c.get("status")) for c in row.get("checks") or []]}
            for row in report["rows"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--keep", action="store_true", help="leave the bench nodes running at the end")
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = TOP / "bench" / "results" / f"{stamp}-slices"
    out.mkdir(parents=True)
    inventory = out / "inventory"
    bench.remove_bench_nodes()
    nodes = bench.write_inventory(inventory, args.nodes)
    for node in nodes:
        bench.sh("bash", "scripts/lab/lab.sh", "node", node, bench.SUITE, bench.ENGINE,
                 stdout=bench.subprocess.DEVNULL, env=dict(bench.os.environ,
                                                           KGN_LAB_ARCHIVE=str(bench.private_archive(node))))
    bench.sh("bash", "scripts/lab/lab.sh", "prepare", "-i", str(inventory), "--limit",
             ",".join(["kgn-cp-kubeadm", *nodes]), stdout=bench.subprocess.DEVNULL)
    bench.register_nodes(nodes)
    runs = [run(inventory, out, "converge", "site.yml")]
    whole = run(inventory, out, "whole", "site.yml")
    runs.append(whole)
    hosts = ["kgn-cp-kubeadm", *nodes]  # the inventory's order
    parts = [hosts[i::args.slices] for i in range(args.slices)]
    sliced = [run(inventory, out, f"slice-{i + 1}", "site.yml", "--limit", ",".join([*part, "localhost"]))
              for i, part in enumerate(parts)]
    runs += sliced
    names = json.dumps({"kgn_reports": [s["report"] for s in sliced]})
    merged = run(inventory, out, "merge", "playbooks/report_merge.yml", "-e", names)
    merged["report"] = str(REPORTS / "latest-fleet")
    runs.append(merged)
    whole_report = json.loads(Path(whole["report"], "report.json").read_text())
    fleet = json.loads(Path(merged["report"], "report.json").read_text())
    a, b = shape(whole_report), shape(fleet)
    differ = sorted(h for h in set(a) | set(b) if a.get(h) != b.get(h))
    result = {"nodes": args.nodes, "slices": [{"hosts": p, **s} for p, s in zip(parts, sliced, strict=True)],
              "runs": runs, "hosts_whole": len(a), "hosts_merged": len(b), "differ": differ,
              "differences": {h: {"whole": a.get(h), "merged": b.get(h)} for h in differ},
              "merged_from": fleet["meta"].get("merged_from"), "summary_whole": whole_report["summary"],
              "summary_merged": fleet["summary"]}
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    for entry in runs:
        print(f"{entry['label']:10} rc={entry['rc']} {entry['wall_s']:7.1f} s  {entry['report']}")
    print(f"whole run: {len(a)} hosts {whole_report['summary']}; merged: {len(b)} hosts {fleet['summary']}")
    print("host for host equal" if not differ else f"DIFFERENT: {', '.join(differ)}")
    if not args.keep:
        bench.remove_bench_nodes()
    return 0 if not differ and len(a) == len(b) == len(hosts) else 1


if __name__ == "__main__":
    sys.exit(main())
