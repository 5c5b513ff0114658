#!/usr/bin/env python3
"""Turn bench results (results.json) into the table in bench/README.md and a PNG plot.

    python bench/report.py bench/results/latest.json [bench/results/<stamp>/results.json of a run to compare]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares seconds per additional node."""
    if len(points) < 2:
        return None
    xs, ys = zip(*points, strict=True)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return round(sum((x - mx) * (y - my) for x, y in points) / den, 1) if den else None


def slopes(result: dict) -> str:
    warm = [r for r in result["runs"] if not r["cold"]]
    wide = [r for r in warm if r["n"] >= 4]
    noop_runs, span = (wide, "N >= 4") if len(wide) >= 2 else (warm, "all warm runs; fewer than two with N >= 4")
    noop = slope([(r["n"], r["noop"]["wall_s"]) for r in noop_runs])
    again = slope([(r["n"], r["noop_again"]["wall_s"]) for r in noop_runs if "noop_again" in r])
    converge = slope([(r["n"], r["converge"]["wall_s"]) for r in warm])
    return (f"No-op slope ({span}): {noop} s per additional GPU node"
            + (f" ({again} s for the second no-op)" if again is not None else "")
            + f"; first-converge slope: {converge} s per additional GPU node.")


def table(result: dict) -> str:
    m = result["machine"]
    rows = [
        f"Machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, kernel {m['kernel']}, "
        f"Python {m['python']}, {m['ansible']}.",
        "",
        "| N GPU nodes | cache | converge wall (s) | converge CPU (s) | converge changed | no-op wall (s) | "
        "no-op CPU (s) | no-op changed | second no-op wall (s) | peak RSS (MiB) | "
        "tasks per GPU node, no-op (run + skipped) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        c, n, again = run["converge"], run["noop"], run.get("noop_again") or {}
        recap = {h: v for h, v in n.get("recap", {}).items() if h.startswith("kgn-bench-gpu-")}
        counts = [f"{recap[h].get('ok', 0)} + {recap[h].get('skipped', 0)}" for h in sorted(recap)]
        # run_once tasks count on the first node only (Ansible runs them there, for all)
        per_node = [counts[0] if len(set(counts)) == 1 else f"{counts[0]} (first), {counts[-1]} (others)"] if counts \
            else [v for h, v in n["tasks_per_host"].items() if h.startswith("kgn-bench-gpu-")]
        rows.append(
            f"| {run['n']} | {'cold' if run['cold'] else 'warm'} | {c['wall_s']} | {c['cpu_s']} | "
            f"{c['changed_total']} | "
            f"{n['wall_s']} | {n['cpu_s']} | {n['changed_total']} | {again.get('wall_s', '-')} | "
            f"{max(c['peak_rss_mib'], n['peak_rss_mib'], again.get('peak_rss_mib', 0))} | "
            f"{max(per_node) if per_node else '-'} |"
        )
    rows += ["", slopes(result)]
    return "\n".join(rows)


def plot(result: dict, path: Path, before: dict | None = None) -> None:
    warm = [r for r in result["runs"] if not r["cold"]]
    ns = [r["n"] for r in warm]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ns, [r["converge"]["wall_s"] for r in warm], "o-", label="first converge (warm cache)")
    ax.plot(ns, [r["noop"]["wall_s"] for r in warm], "s-", label="no-op re-run")
    if before:
        old = [r for r in before["runs"] if not r["cold"]]
        ax.plot([r["n"] for r in old], [r["noop"]["wall_s"] for r in old], "s--", color="grey",
                label="no-op re-run, before tuning")
    ax.set_xlabel("GPU nodes (N)")
    ax.set_ylabel("wall time (s)")
    ax.set_title("site.yml on the lab, 2 cores")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(results_path: str, before_path: str | None = None) -> int:
    result = json.loads(Path(results_path).read_text(encoding="utf-8"))
    before = json.loads(Path(before_path).read_text(encoding="utf-8")) if before_path else None
    readme = HERE / "README.md"
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{table(result)}\n{END}{tail}", encoding="utf-8")
    plot(result, HERE / "time-vs-nodes.png", before)
    print(f"bench: wrote {readme} and {HERE / 'time-vs-nodes.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))  # results.json [results.json of the run before tuning]
