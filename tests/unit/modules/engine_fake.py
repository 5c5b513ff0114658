"""Fake docker, ctr, crictl, containerd and nvidia-smi for the gpu_smoke module tests: a node in a folder.

``install(folder, node)`` writes the fakes into ``folder``. ``node`` says what the node answers: ``smi`` ({rc, out}
of the host's ``nvidia-smi -L``; None: no nvidia-smi), ``images`` (present image names), ``pull`` ({rc, err}),
``run`` ({rc, out, err} of the container), ``containers`` (names that exist, e.g. a leftover), ``runtime`` (what
docker inspect says), ``crictl`` (its ``info`` config) and ``version``. Every call is logged to ``calls.jsonl``;
``state.json`` holds the containers that exist, so the test sees what the module left behind.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FAKE = r'''#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
tool, argv = os.path.basename(sys.argv[0]), sys.argv[1:]
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps([tool] + argv) + "\n")
with open(os.path.join(here, "state.json")) as handle:
    node = json.load(handle)
def save():
    with open(os.path.join(here, "state.json"), "w") as handle:
        json.dump(node, handle)
def answer(out="", err="", rc=0):
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.exit(rc)
name = "kgn-gpu-smoke"
words = [a for a in argv if not a.startswith("--namespace") and a != "k8s.io"]
if tool == "nvidia-smi":
    smi = node["smi"]
    answer(smi["out"], "", smi["rc"])
if tool == "crictl":
    answer(json.dumps({{"config": node.get("crictl") or {{}}}})) if node.get("crictl") else answer("", "no crictl", 1)
if tool == "containerd":
    answer("", "config dump unavailable", 1)
if tool == "docker":
    if argv[:1] == ["version"]:
        answer(node.get("version", "26.1.5") + "\n")
    if argv[:2] == ["image", "inspect"]:
        answer("sha256:abc\n") if argv[-1] in node["images"] else answer("", "Error: No such image: " + argv[-1], 1)
    if argv[:1] == ["pull"]:
        pull = node.get("pull", {{"rc": 1, "err": "pull access denied"}})
        if pull["rc"] == 0:
            node["images"].append(argv[-1])
            save()
        answer("", pull.get("err", ""), pull["rc"])
    if argv[:1] == ["run"]:
        node["containers"].append(name)
        save()
        run = node["run"]
        answer(run.get("out", ""), run.get("err", ""), run.get("rc", 0))
    if argv[:1] == ["inspect"]:
        answer(node.get("runtime", "nvidia") + "\n") if name in node["containers"] else answer("", "no such", 1)
    if argv[:2] == ["rm", "--force"]:
        if name in node["containers"]:
            node["containers"].remove(name)
            save()
            answer(name + "\n")
        answer("", "Error response from daemon: No such container: " + name, 1)
    if argv[:2] == ["container", "inspect"]:
        answer("id\n") if name in node["containers"] else answer("", "Error: No such container: " + name, 1)
if tool == "ctr":
    if "version" in words:
        answer("Client:\n  Version:  1.7.24~ds1\n\nServer:\n  Version:  " + node.get("version", "1.7.24~ds1") + "\n")
    if words[:2] == ["images", "list"]:
        want = words[-1].split("==", 1)[1]
        answer(want + "\n" if want in node["images"] else "")
    if words[:1] == ["run"]:
        node["containers"].append(name)
        save()
        run = node["run"]
        answer(run.get("out", ""), run.get("err", ""), run.get("rc", 0))
    if words[:2] == ["task", "delete"]:
        answer() if name in node["containers"] else answer("", "ctr: task " + name + ": not found", 1)
    if words[:2] == ["containers", "delete"]:
        if name in node["containers"]:
            node["containers"].remove(name)
            save()
            answer()
        answer("", "ctr: container \"" + name + "\" in namespace \"k8s.io\": not found", 1)
    if words[:2] == ["containers", "info"]:
        answer("{{}}\n") if name in node["containers"] else answer("", "ctr: container not found", 1)
answer("", "fake " + tool + ": no answer for " + " ".join(argv), 99)
'''

TOOLS = ("docker", "ctr", "crictl", "containerd", "nvidia-smi")


def install(folder: Path, node: dict, tools=TOOLS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    state = {"images": [], "containers": [], "run": {}, **node}
    (folder / "state.json").write_text(json.dumps(state))
    for tool in tools:
        if tool == "nvidia-smi" and state.get("smi") is None:
            continue
        path = folder / tool
        path.write_text(FAKE.format(python=sys.executable))
        path.chmod(0o755)
    return folder


def calls(folder: Path) -> list:
    log = folder / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def state(folder: Path) -> dict:
    return json.loads((folder / "state.json").read_text())
