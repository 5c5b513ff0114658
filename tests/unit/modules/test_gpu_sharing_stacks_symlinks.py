"""gpu_sharing_stacks through `ansible localhost -m` (the module as a node runs it) with symlinked manifest files:
a written file's target is edited and the link kept, a removed file's link goes and its target stays, and the
module's msg and recorded changes say so, in check mode too."""

from __future__ import annotations

import os

from kubectl_fake import answer, items, run_module
from test_gpu_sharing_stacks import DAEMONSET, DS, DS_TEXT, OLD_EXTENDER, _ready
from test_gpu_sharing_stacks import setup as setup  # the fixture: a stacks folder and a fake kubectl


def test_symlinked_manifests_are_written_through_removed_as_links_and_said(setup, tmp_path):
    listed = [answer(items(OLD_EXTENDER)), answer(items(DAEMONSET))]
    args, stacks, _ = setup(_ready(listed, False))
    managed = tmp_path / "managed"
    managed.mkdir()
    old = stacks / "gpushare/extender-deployment.yml"
    (managed / "extender.yml").write_text(old.read_text())
    old.unlink()
    old.symlink_to(managed / "extender.yml")
    written = stacks / DS
    written.parent.mkdir(parents=True)
    written.symlink_to(managed / "ds.yml")
    said = [f"{written} is a symlink to {managed}/ds.yml: the target {{}} created, the link kept",
            f"{old} is a symlink to {managed}/extender.yml: the link {{}} removed, its target kept"]

    check = run_module("gpu_sharing_stacks", args, check=True)
    assert check["status"] == "CHANGED", check
    assert all(f" {words.format('would be')}." in check["msg"] for words in said), check["msg"]
    assert old.is_symlink() and not (managed / "ds.yml").exists()

    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "CHANGED", result
    assert all(f" {words.format('was')}." in result["msg"] for words in said), result["msg"]
    recorded = result["ansible_facts"]["kgn_state_stacks"]["changes"]
    assert [words.format("was") for words in said] == recorded[-2:]
    assert written.is_symlink() and os.readlink(written) == str(managed / "ds.yml")
    assert (managed / "ds.yml").read_text() == DS_TEXT
    assert not os.path.lexists(old) and (managed / "extender.yml").read_text() == "old gpushare manifest\n"
    # the removed link is kept in the backup folder as the link it was
    [copy] = (stacks / ".backup/gpushare").iterdir()
    assert copy.is_symlink() and os.readlink(copy) == str(managed / "extender.yml")
