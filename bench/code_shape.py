#!/usr/bin/env python3
"""How much logic lives in YAML: tasks, set_fact, templated expressions (and the long ones) in the product's
roles and playbooks, for a git revision.

Usage: bench/code_shape.py [REV ...]   (default: HEAD); prints one row per revision.
Counted: every task (an item of a tasks/handlers/pre_tasks/post_tasks list, blocks' own tasks included) in
roles/*/tasks, roles/*/handlers and playbooks/ (site.yml imports only); every {{ ... }} expression in those
files and in role defaults and vars, and how many are longer than 300 characters.
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


def count_tasks(node) -> int:
    """Tasks in a task file (a list) or a playbook (plays with task lists); a block counts as one task too."""
    total = 0
    for item in node if isinstance(node, list) else []:
        if isinstance(item, dict):
            is_play = "hosts" in item or "import_playbook" in item or "ansible.builtin.import_playbook" in item
            total += 0 if is_play else 1
            total += sum(count_tasks(item[key]) for key in TASK_LISTS if key in item)
    return total


def shape(rev: str) -> dict:
    tasks = set_facts = expressions = long = 0
    for path in files(rev):
        text = show(rev, path)
        found = EXPRESSION.findall(text)
        expressions += len(found)
        long += sum(1 for e in found if len(e) > 300)
        if "/defaults/" in path or "/vars/" in path:
            continue
        set_facts += len(re.findall(r"^\s*(ansible\.builtin\.)?set_fact:", text, flags=re.M))
        with contextlib.suppress(yaml.YAMLError):
            tasks += count_tasks(yaml.safe_load(text))
    return {"tasks": tasks, "set_fact": set_facts, "expressions": expressions, "over_300": long}


def main() -> int:
    revs = sys.argv[1:] or ["HEAD"]
    print("| revision | tasks | set_fact | templated expressions | of them over 300 characters |")
    print("|---|---|---|---|---|")
    for rev in revs:
        s = shape(rev)
        print(f"| {rev} | {s['tasks']} | {s['set_fact']} | {s['expressions']} | {s['over_300']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
