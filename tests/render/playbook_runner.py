"""What every render test shares: running ansible-playbook the way a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def run_playbook(*args: str, env: dict | None = None, timeout: int = 1200) -> subprocess.CompletedProcess:
    """ansible-playbook ARGS from the project root, so ansible.cfg supplies roles, filters and collections.

    Render plays run locally; the test's own Python runs their modules.
    """
    return subprocess.run(
        [ANSIBLE_PLAYBOOK, *args],
        cwd=TOP,
        env={**os.environ, "ANSIBLE_PYTHON_INTERPRETER": sys.executable, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def says(output: str, text: str) -> bool:
    """Whether ansible-playbook's OUTPUT says TEXT, however the callback wrapped and quoted it: ansible-core 2.16's
    YAML result format folds long messages at 80 columns and doubles the quotes inside single-quoted ones."""
    return " ".join(text.split()) in " ".join(output.replace("''", "'").split())


def render_ok(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """run_playbook, failing the test with the end of the output when the run fails."""
    result = run_playbook(*args, **kwargs)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return result


PLAY = """
- name: Render {{role}}
  hosts: all
  gather_facts: false
  tasks:
    - name: Render the role
      ansible.builtin.include_role:
        name: {{role}}
{how}
"""
RENDER_PLAY = PLAY.format(how='      vars:\n        {role}_render_dir: "{{{{ render_dir }}}}"')
# roles that still have a separate render entry point
OLD_RENDER_PLAY = PLAY.format(how="        tasks_from: render")


def render_role(work: Path, role: str, inventory: dict | str) -> Path:
    """Render ROLE for every host of INVENTORY (a dict or YAML text), as playbooks/render.yml does; return
    the render_dir."""
    (work / "hosts.yml").write_text(inventory if isinstance(inventory, str) else json.dumps(inventory))
    old = (TOP / "roles" / role / "tasks" / "render.yml").is_file()
    (work / "play.yml").write_text((OLD_RENDER_PLAY if old else RENDER_PLAY).format(role=role))
    out = work / "out"
    render_ok("-i", str(work / "hosts.yml"), str(work / "play.yml"), "-e", f"render_dir={out}")
    return out
