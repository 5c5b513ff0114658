#!/usr/bin/env python3
"""How much logic lives in YAML: tasks, set_fact, templated expressions (and the long ones) in the product's
roles and playbooks, for a git revision.

Usage: bench/code_shape.py [REV ...]   (default: HEAD); prints one row per revision.
Counted: every task (an item of a tasks/handlers/pre_tasks/post_tasks list, blocks' own tasks included) in
roles/*/tasks, roles/*/handlers and playbooks/ (site.yml imports only); of them the command/shell/raw tasks and the
tasks that run kubectl; every {{ ... }} expression in those files and in role defaults and vars, and how many are
longer than 300 characters.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys

import yaml

EXPRESSION = re.compile(r"\{\{.*?\}\}", re.S)
TASK_LISTS = ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always")


def files(rev: str) -> list[str]:
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], capture_output=True, text=True,
                         check=True).stdout.split()
    wanted = re.compile(r"^(roles/[^/]+/(tasks|handlers|defaults|vars)/.*\.ya?ml|playbooks/.*\.ya?ml|site\.yml)$")
    return [f for f in out if wanted.match(f)]


def show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout


SHELL_ACTIONS = {f"{prefix}{name}" for prefix in ("", "ansible.builtin.", "ansible.legacy.")
                 for name in ("command", "shell", "raw")}


def tasks_of(node) -> list:
    """The tasks of a task file (a list) or a playbook (plays with task lists); a block is a task too."""
    found = []
    for item in node if isinstance(node, list) else []:
        if isinstance(item, dict):
            is_play = "hosts" in item or "import_playbook" in item or "ansible.builtin.import_playbook" in item
            found += [] if is_play else [item]
            for key in TASK_LISTS:
                if key in item:
                    found += tasks_of(item[key])
    return found


def count_tasks(node) -> int:
    return len(tasks_of(node))


def is_shell(task: dict) -> bool:
    return bool(SHELL_ACTIONS & set(task))


def runs_kubectl(task: dict) -> bool:
    action = next((task[key] for key in SHELL_ACTIONS if key in task), None)
    return action is not None and "kubectl" in yaml.safe_dump(action)


def shape(rev: str) -> dict:
    tasks = set_facts = expressions = long = shell = kubectl = 0
    for path in files(rev):
        text = show(rev, path)
        found = EXPRESSION.findall(text)
        expressions += len(found)
        long += sum(1 for e in found if len(e) > 300)
        if "/defaults/" in path or "/vars/" in path:
            continue
        set_facts += len(re.findall(r"^\s*(ansible\.builtin\.)?set_fact:", text, flags=re.M))
        with contextlib.suppress(yaml.YAMLError):
            found = tasks_of(yaml.safe_load(text))
            tasks += len(found)
            shell += sum(1 for t in found if is_shell(t))
            kubectl += sum(1 for t in found if runs_kubectl(t))
    return {"tasks": tasks, "set_fact": set_facts, "expressions": expressions, "over_300": long, "shell": shell,
            "kubectl": kubectl}


def main() -> int:
    revs = sys.argv[1:] or ["HEAD"]
    print("| revision | tasks | command/shell tasks | of them kubectl | set_fact | templated expressions | "
          "of them over 300 characters |")
    print("|---|---|---|---|---|---|---|")
    for rev in revs:
        s = shape(rev)
        print(f"| {rev} | {s['tasks']} | {s['shell']} | {s['kubectl']} | {s['set_fact']} | {s['expressions']} | "
              f"{s['over_300']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
