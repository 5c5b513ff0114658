"""Filters that compare a node's state, as the node_state module reads it, with the wanted state."""

from __future__ import annotations

import hashlib

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError


def file_in_place(entry: object, content: object, mode: str = "0644", owner: str = "root",
                      group: str = "root") -> bool:
    """True when the file node_state described has exactly this content, mode, owner and group."""
    name = "file_in_place"
    if not isinstance(entry, dict) or "exists" not in entry:
        raise KgnError(
            f"{name}: input {entry!r} must be one entry of node_state's 'files' result (a dict with 'exists')"
        )
    if not isinstance(content, str):
        raise KgnError(f"{name}: content must be the file's wanted text, not {type(content).__name__}")
    if not isinstance(mode, str) or len(mode) != 4 or not all(c in "01234567" for c in mode):
        raise KgnError(f"{name}: mode {mode!r} must be a quoted four-digit octal string such as '0644'")
    wanted = hashlib.sha1(content.encode("utf-8")).hexdigest()  # Ansible's own file digest
    return (
        bool(entry["exists"])
        and entry.get("type") == "file"
        and entry.get("sha1") == wanted
        and entry.get("mode") == mode
        and entry.get("owner") == owner
        and entry.get("group") == group
    )

