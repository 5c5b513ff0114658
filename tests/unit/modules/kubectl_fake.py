"""A fake kubectl for module tests: canned answers per argument pattern, every call logged.

``install(folder, rules)`` writes an executable ``kubectl`` into the folder. Each rule is
``{"match": [tokens every one of which is in argv], "answers": [{"rc", "stdout", "stderr"}, ...]}``;
the first matching rule answers, consuming its answers in order (the last one repeats). Calls are
logged to ``calls.jsonl`` beside it (argv without --kubeconfig/--request-timeout, and stdin for ``-f -``).
``run_module`` runs a collection module the way Ansible does, through ``ansible localhost -m``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

FAKE = r'''#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
argv, skip = [], False
for arg in sys.argv[1:]:
    if skip:
        skip = False
        continue
    if arg == "--kubeconfig":
        skip = True
        continue
    if arg.startswith("--request-timeout"):
        continue
    argv.append(arg)
stdin = sys.stdin.read() if "-" in argv and "-f" in argv else ""
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps({{"argv": argv, "stdin": stdin}}) + "\n")
with open(os.path.join(here, "rules.json")) as handle:
    rules = json.load(handle)
for rule in rules:
    if all(token in argv for token in rule["match"]):
        answer = rule["answers"][0]
        if len(rule["answers"]) > 1:
            rule["answers"].pop(0)
            with open(os.path.join(here, "rules.json"), "w") as handle:
                json.dump(rules, handle)
        sys.stdout.write(answer.get("stdout", ""))
        sys.stderr.write(answer.get("stderr", ""))
        sys.exit(answer.get("rc", 0))
sys.stderr.write("fake kubectl: no answer for " + " ".join(argv) + "\n")
sys.exit(1)
'''


def install(folder: Path, rules: list) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kubectl"
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(0o755)
    (folder / "rules.json").write_text(json.dumps(rules))
    return path


def calls(folder: Path) -> list:
    log = folder / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def answer(stdout: str = "", rc: int = 0, stderr: str = "") -> dict:
    return {"rc": rc, "stdout": stdout, "stderr": stderr}


def items(*objects: dict) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})


def run_module(module: str, args: dict, check: bool = False) -> dict:
    """``{"status": SUCCESS|CHANGED|FAILED!, **result}`` of one module call on localhost."""
    cmd = ["ansible", "localhost", "-m", f"kgn.gpu_nodes.{module}", "-a", json.dumps(args), "-o"]
    cmd += ["--check"] if check else []
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env=dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="0",
                                   ANSIBLE_PYTHON_INTERPRETER=sys.executable))
    line = next((x for x in proc.stdout.splitlines() if x.startswith("localhost | ")), "")
    assert line, proc.stdout + proc.stderr
    return {"status": line.split(" | ")[1].split(" ")[0], **json.loads(line.split(" => ", 1)[1])}
