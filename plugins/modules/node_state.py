#!/usr/bin/python
"""One round trip for everything a role reads before deciding what to change."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_state
short_description: Read files, their digests and read-only commands' output in one call (read-only)
description:
  - A role's no-op run costs one round trip per remote task. This module answers, in one call, what a
    role otherwise asks with a C(stat), C(slurp) or C(command) task each, so that the role can skip
    every write whose result is already in place (compare with the C(kgn_file_in_place) filter).
  - Changes nothing; safe in check mode. The commands given must be read-only.
options:
  files:
    description: Paths to describe (existence, SHA-1 of a regular file's content, mode, owner, group).
    type: list
    elements: path
    default: []
  read:
    description: >-
      Paths or glob patterns whose regular files are returned as text (invalid UTF-8 replaced).
      A pattern that matches nothing returns nothing.
    type: list
    elements: str
    default: []
  commands:
    description: >-
      Read-only commands by name. A list is run as argv; a string is run by C(/bin/bash -o pipefail -c).
      A command that is not installed gives rc 127, not a failure.
    type: dict
    default: {}
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Read the node's state in one call
  node_state:
    files: [/etc/modprobe.d/kgn-blacklist-nouveau.conf]
    read: [/etc/apt/sources.list, /etc/apt/sources.list.d/*.sources]
    commands:
      initramfs: command -v update-initramfs dracut
      containerd_version: [containerd, --version]
  register: __role_state
"""

RETURN = r"""
files:
  description: For each path in O(files), C(exists) and, when it exists, C(sha1) (regular files), C(mode)
    (octal string such as C(0644)), C(owner), C(group) and C(type) (C(file), C(directory), C(link), C(other)).
  returned: always
  type: dict
contents:
  description: Path to text of every regular file O(read) matched, sorted by path.
  returned: always
  type: dict
commands:
  description: Name to C(rc), C(stdout) and C(stderr) of every command.
  returned: always
  type: dict
"""

import glob  # noqa: E402  (Ansible modules keep DOCUMENTATION first)
import grp  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
import pwd  # noqa: E402
import stat  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def describe(path: str) -> dict:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    kind = (
        "link" if stat.S_ISLNK(st.st_mode)
        else "file" if stat.S_ISREG(st.st_mode)
        else "directory" if stat.S_ISDIR(st.st_mode)
        else "other"
    )
    entry = {"exists": True, "type": kind, "mode": f"{stat.S_IMODE(st.st_mode):04o}"}
    try:
        entry["owner"] = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        entry["owner"] = str(st.st_uid)
    try:
        entry["group"] = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        entry["group"] = str(st.st_gid)
    if kind == "file":
        digest = hashlib.sha1()  # the digest Ansible's stat and copy compare with
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(65536), b""):
                digest.update(block)
        entry["sha1"] = digest.hexdigest()
    return entry


def read_texts(patterns: list) -> dict:
    paths = sorted({p for pattern in patterns for p in (glob.glob(pattern) if glob.has_magic(pattern) else [pattern])})
    texts = {}
    for path in paths:
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as handle:
                texts[path] = handle.read()
    return texts


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "path", "default": []},
            "read": {"type": "list", "elements": "str", "default": []},
            "commands": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    commands = {}
    for name, command in module.params["commands"].items():
        if isinstance(command, str):
            argv = ["/bin/bash", "-o", "pipefail", "-c", command]
        elif isinstance(command, list) and command and all(isinstance(a, str) for a in command):
            argv = command
        else:
            module.fail_json(msg=f"commands.{name} must be a non-empty string (bash) or list of strings (argv), "
                                 f"not {command!r}")
        try:
            rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"}, errors="surrogate_or_replace",
                                              expand_user_and_vars=False,
                                              handle_exceptions=False)
        except OSError as exc:  # not installed
            rc, out, err = 127, "", str(exc)
        commands[name] = {"rc": rc, "stdout": out, "stderr": err}
    module.exit_json(
        changed=False,
        files={path: describe(path) for path in module.params["files"]},
        contents=read_texts(module.params["read"]),
        commands=commands,
    )


if __name__ == "__main__":
    main()
