"""file_in_place: a node_state file entry against the text a task would write."""

from __future__ import annotations

import hashlib

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.state import file_in_place

TEXT = "blacklist nouveau\noptions nouveau modeset=0\n"


def entry(text: str = TEXT, **over) -> dict:
    base = {"exists": True, "type": "file", "sha1": hashlib.sha1(text.encode()).hexdigest(), "mode": "0644",
            "owner": "root", "group": "root"}
    return base | over


def test_same_text_mode_and_owner_is_in_place():
    assert file_in_place(entry(), TEXT) is True


@pytest.mark.parametrize(
    "described",
    [
        {"exists": False},
        entry("blacklist nouveau\n"),          # other content
        entry(TEXT.rstrip("\n")),               # only the trailing newline differs
        entry(mode="0600"),
        entry(owner="kgn"),
        entry(group="adm"),
        entry(type="link"),                     # a link is replaced by the file, not followed
    ],
)
def test_any_difference_is_not_in_place(described):
    assert file_in_place(described, TEXT) is False


def test_non_ascii_text_is_hashed_as_utf8():
    text = "# Geändert von kube-gpu-nodes\n"
    assert file_in_place(entry(text), text) is True


def test_other_mode_owner_group_can_be_asked_for():
    assert file_in_place(entry(mode="0600", owner="kgn", group="kgn"), TEXT, "0600", "kgn", "kgn") is True


@pytest.mark.parametrize(
    ("described", "content", "mode", "message"),
    [
        ("not a dict", TEXT, "0644", "node_state's 'files' result"),
        ({"sha1": "x"}, TEXT, "0644", "node_state's 'files' result"),
        (entry(), None, "0644", "wanted text"),
        (entry(), TEXT, "644", "four-digit octal"),
        (entry(), TEXT, 420, "four-digit octal"),
    ],
)
def test_bad_input_says_what_to_fix(described, content, mode, message):
    with pytest.raises(KgnError, match=message):
        file_in_place(described, content, mode)
