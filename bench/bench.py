#!/usr/bin/env python3
"""Fleet-scale benchmark of site.yml on the lab (no-op and converge time; bench/README.md). Not a test.

For each N it starts N GPU node containers beside the lab's control-plane nodes, then measures
  - first converge from fresh nodes (package cache warm; with --cold, the N=1 run empties it first)
  - the no-op re-run (must report changed=0), and a second no-op right after it
each with wall time, CPU time of ansible-playbook and its workers, peak RSS of the largest process,
and the tasks run per host (ok + skipped + failed from the recap). Results go to
bench/results/<stamp>/ (JSON, per-task profile); bench/run.sh then writes bench/README.md's table and plot.

  bench/run.sh --sizes 1,4,16,32 [--cold] [--keep] [--merge bench/results/<stamp>/results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOP / "scripts"))
recap = __import__("check-recap").recap

CACHE = Path(os.environ.get("KGN_LAB_CACHE", "/var/cache/kgn-lab"))
NODE_PREFIX = "kgn-bench-gpu-"
SUITE = "trixie"  # GPU nodes of the kubeadm lab cluster: containerd, Kubernetes 1.30
ENGINE = "engine:/var/lib/containerd"


def sh(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=TOP, check=True, text=True, **kw)


def private_archive(node: str) -> Path:
    """A node's own apt archive: the warm suite archive's packages, hard-linked (no copy, no shared lock).

    Nodes that share one archive folder install one at a time (apt takes its lock, the others wait);
    a fleet's nodes do not share one, so neither do the bench's.
    """
    archive = CACHE / "apt" / "bench" / node
    shutil.rmtree(archive, ignore_errors=True)
    (archive / "partial").mkdir(parents=True)
    for deb in (CACHE / "apt" / SUITE).glob("*.deb"):
        os.link(deb, archive / deb.name)
    return archive


def remove_bench_nodes() -> None:
    ids = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"name={NODE_PREFIX}"], capture_output=True, text=True, check=True
    ).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=True)
    vols = subprocess.run(
        ["docker", "volume", "ls", "-q", "--filter", f"name={NODE_PREFIX}"], capture_output=True, text=True, check=True
    ).stdout.split()
    if vols:
        subprocess.run(["docker", "volume", "rm", "-f", *vols], capture_output=True, check=True)
    shutil.rmtree(CACHE / "apt" / "bench", ignore_errors=True)
    # The facts the last bench recorded for nodes of the same name (ansible.cfg: a two-hour jsonfile cache): a fresh
    # node starts without them, or the lab's gathering is skipped and the converge starts from another node's state.
    for cached in (TOP / ".cache" / "facts").glob(f"*{NODE_PREFIX}*"):
        cached.unlink()


def write_inventory(folder: Path, n: int) -> list[str]:
    """The lab's kubeadm cluster (its group_vars, linked) with N trixie GPU nodes in place of its one."""
    nodes = [f"{NODE_PREFIX}{i:02d}" for i in range(1, n + 1)]
    folder.mkdir(parents=True)
    (folder / "group_vars").symlink_to(TOP / "inventories" / "lab" / "group_vars")
    (folder / "host_vars").mkdir()
    trixie_node_vars = TOP / "inventories" / "lab" / "host_vars" / "kgn-gpu-containerd.yml"
    for node in nodes:
        (folder / "host_vars" / f"{node}.yml").symlink_to(trixie_node_vars)
    gpu_hosts = "".join(f"        {node}:\n          lab_gpu_node_engine: containerd\n" for node in nodes)
    member_hosts = "".join(f"        {node}:\n" for node in nodes)
    (folder / "hosts.yml").write_text(
        "---\n"
        "all:\n"
        "  vars:\n"
        "    ansible_connection: community.docker.docker\n"
        "    ansible_python_interpreter: /usr/bin/python3\n"
        "  children:\n"
        "    kube_control_plane:\n"
        "      hosts:\n"
        "        kgn-cp-kubeadm:\n"
        "          lab_control_plane_style: kubeadm\n"
        "    gpu_nodes:\n"
        "      hosts:\n"
        f"{gpu_hosts}"
        "    lab_kubeadm:\n"
        "      hosts:\n"
        "        kgn-cp-kubeadm:\n"
        f"{member_hosts}"
        # the lab's real control plane (docs/lab.md); the bench's GPU nodes run no kubelet (register_nodes)
        "    lab_real_kubernetes:\n"
        "      hosts:\n"
        "        kgn-cp-kubeadm:\n",
        encoding="utf-8",
    )
    return nodes


def register_nodes(nodes: list[str]) -> None:
    """Register the bench's GPU nodes with the lab's real API server, as their kubelets would (cpu, memory and pods
    capacity, no GPU): 32 real kubelets do not fit a 2-core machine beside the runs they are measured with. Nothing
    updates their status afterwards (the lab's kubeasz cluster does the same: docs/lab.md)."""
    capacity = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    items = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                                                    "kubernetes.io/arch": "amd64"}},
              "status": {"capacity": capacity, "allocatable": capacity}} for node in nodes]
    subprocess.run(["docker", "exec", "-i", "kgn-cp-kubeadm", "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf",
                    "apply", "-f", "-"], input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
                   text=True, capture_output=True, check=True)


def timed_playbook(inventory: Path, out_dir: Path, label: str) -> dict:
    """Run site.yml under GNU time; return wall/CPU/RSS and per-host recap counts."""
    log = out_dir / f"{label}.log"
    timing = out_dir / f"{label}.time"
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks")
    env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "25"
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.run(
            ["/usr/bin/time", "-v", "-o", str(timing), "ansible-playbook", "-i", str(inventory), "site.yml"],
            cwd=TOP, stdout=handle, stderr=subprocess.STDOUT, env=env, check=False,
        )
    wall = time.monotonic() - start
    stats = timing.read_text(encoding="utf-8")
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", stats)[1])
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", stats)[1])
    rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", stats)[1])
    hosts = recap(log.read_text(encoding="utf-8"))
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(user + system, 1),
        "peak_rss_mib": round(rss_kib / 1024, 1),
        "changed_total": sum(h.get("changed", 0) for h in hosts.values()),
        "tasks_per_host": {h: c.get("ok", 0) + c.get("skipped", 0) + c.get("failed", 0) for h, c in hosts.items()},
        "recap": hosts,
        "log": str(log.relative_to(TOP)),
    }


def bench_size(n: int, out_dir: Path, cold: bool) -> dict:
    remove_bench_nodes()
    inventory = out_dir / f"inventory-{n}{'-cold' if cold else ''}"
    nodes = write_inventory(inventory, n)
    if cold:
        for deb in (CACHE / "apt" / SUITE).glob("*.deb"):  # the nodes' shared archive folder (scripts/lab)
            deb.unlink()
    for node in nodes:
        # Cold: the shared suite archive, emptied above, so that the downloads land in the cache.
        env = os.environ if cold else dict(os.environ, KGN_LAB_ARCHIVE=str(private_archive(node)))
        sh("bash", "scripts/lab/lab.sh", "node", node, SUITE, ENGINE, stdout=subprocess.DEVNULL, env=env)
    # The control plane is in the limit (the lab lays it out first); register_nodes then registers the new nodes.
    sh("bash", "scripts/lab/lab.sh", "prepare", "-i", str(inventory), "--limit", ",".join(["kgn-cp-kubeadm", *nodes]),
       stdout=subprocess.DEVNULL)
    register_nodes(nodes)
    label = f"n{n}{'-cold' if cold else ''}"
    first = timed_playbook(inventory, out_dir, f"{label}-converge")
    # The no-op is timed on settled nodes: not while the converge's gigabytes are still being written back.
    subprocess.run(["sync"], check=True)
    noop = timed_playbook(inventory, out_dir, f"{label}-noop")
    # and once more: the first no-op after an install has measured slower than later ones on the same nodes
    again = timed_playbook(inventory, out_dir, f"{label}-noop-again")
    return {"n": n, "cold": cold, "converge": first, "noop": noop, "noop_again": again}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,4,16,32")
    parser.add_argument("--cold", action="store_true", help="also run N=1 with an empty package cache first")
    parser.add_argument("--keep", action="store_true", help="leave the bench nodes running at the end")
    parser.add_argument("--merge", type=Path, metavar="RESULTS_JSON",
                        help="add the runs of an earlier results.json (same machine) whose N this run does not measure")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]  # "" with --cold: only the cold N = 1
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = TOP / "bench" / "results" / stamp
    out_dir.mkdir(parents=True)
    sh("bash", "scripts/lab/lab.sh", "up", stdout=subprocess.DEVNULL)
    runs = []
    for n, cold in ([(1, True)] if args.cold else []) + [(n, False) for n in sizes]:
        runs.append(bench_size(n, out_dir, cold=cold))
        print(json.dumps(runs[-1]), flush=True)
        write_results(out_dir, runs)  # what is measured survives a later size that fails
    if not args.keep:
        remove_bench_nodes()
    if args.merge:
        measured = {(r["n"], r["cold"]) for r in runs}
        earlier = json.loads(args.merge.read_text(encoding="utf-8"))["runs"]
        runs = sorted(runs + [r for r in earlier if (r["n"], r["cold"]) not in measured],
                      key=lambda r: (not r["cold"], r["n"]))
    write_results(out_dir, runs)
    shutil.copy(out_dir / "results.json", TOP / "bench" / "results" / "latest.json")
    print(f"bench: results in {out_dir.relative_to(TOP)}/results.json")
    return 0


def write_results(out_dir: Path, runs: list) -> None:
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "kernel": platform.release(),
            "python": platform.python_version(),
            "ansible": subprocess.run(["ansible", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
        },
        "runs": runs,
    }
    (out_dir / "results.json").write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
