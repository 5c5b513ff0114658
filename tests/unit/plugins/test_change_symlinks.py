"""change.py on symlinked files (a config-management layout: /etc/docker/daemon.json -> /etc/docker-managed/...):
the target is edited, the link kept, the run says so; a link that cannot be written through is refused by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change
from test_change import FakeSelinux, Module
from test_toolkit import KEYRING, LIST, FakeNode, run_module
from test_toolkit import root as root  # the fixture: every path the toolkit module writes, under tmp_path


@pytest.fixture
def linked(tmp_path):
    """/etc/docker/daemon.json (absolute link) -> /etc/docker-managed/daemon.json, under tmp_path."""
    managed = tmp_path / "docker-managed"
    managed.mkdir()
    real = managed / "daemon.json"
    real.write_text("{}\n")
    (tmp_path / "docker").mkdir()
    link = tmp_path / "docker" / "daemon.json"
    link.symlink_to(real)
    return link, real


def test_a_symlinked_file_is_written_through_its_target_and_the_link_kept(linked):
    link, real = linked
    new = '{"default-runtime": "nvidia"}\n'
    todo = change.pending([{"path": str(link), "content": new, "mode": "0644"}])
    assert [c["before"] for c in todo] == ["{}\n"] and todo[0]["link"] == {"target": str(real), "refused": None}
    [entry] = change.diff(todo)
    assert entry["before_header"] == entry["after_header"] == f"{link} (symlink to {real})"
    assert entry["before"] == "{}\n" and entry["after"] == new
    would = f"{link} is a symlink to {real}: the target would be edited, the link kept"
    assert change.links(todo, check_mode=True) == [would]

    undo = change.write(todo, module=Module())
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == new and link.read_text() == new
    assert change.links(todo) == [f"{link} is a symlink to {real}: the target was edited, the link kept"]
    backup = Path(dict(undo)[str(link)])
    assert backup.parent == link.parent and not backup.is_symlink() and backup.read_text() == "{}\n"
    assert not [p for p in real.parent.iterdir() if p != real]  # no temporary file left beside the target
    # the target's mode is compared, not the link's own 0777: nothing left to do
    assert change.pending([{"path": str(link), "content": new, "mode": "0644"}]) == []

    change.restore(undo)
    assert link.is_symlink() and os.readlink(link) == str(real) and real.read_text() == "{}\n"


def test_a_failed_apply_puts_the_targets_old_text_back_and_keeps_the_link(linked):
    link, real = linked
    todo = change.pending([{"path": str(link), "content": "bad\n"}])
    with pytest.raises(change.ChangeFailed, match=r"previous files were restored.*healthy again"):
        change.apply(Module(), todo, lambda: None, lambda: (real.read_text() == "{}\n", "it says bad"), timeout=0)
    assert link.is_symlink() and os.readlink(link) == str(real) and real.read_text() == "{}\n"


def test_a_dangling_link_whose_target_folder_is_missing_is_refused_by_name(tmp_path):
    before = tmp_path / "first.conf"
    before.write_text("old\n")
    link = tmp_path / "config.toml"
    link.symlink_to(tmp_path / "absent" / "config.toml")
    todo = change.pending([{"path": str(before), "content": "new\n"}, {"path": str(link), "content": "x = 1\n"}])
    said = change.links(todo, check_mode=True)
    assert said == [f"{link} is a symlink to {tmp_path}/absent/config.toml, whose folder {tmp_path}/absent does "
                    "not exist: a run would refuse to write through it (point the link at a file in an existing "
                    "folder, or replace it with the file itself)"]
    with pytest.raises(change.ChangeFailed, match=rf"^{link} is a symlink to .*absent/config.toml, whose folder "
                                                  r".*absent does not exist: nothing is written through it"):
        change.write(todo, module=Module())
    # the file written before it is put back; the link is left as it was, no folder made
    assert before.read_text() == "old\n"
    assert link.is_symlink() and not (tmp_path / "absent").exists()
    with pytest.raises(change.ChangeFailed, match=str(link)):
        change.write_file(str(link), "x = 1\n", "0644")


def test_a_link_loop_is_refused_by_name(tmp_path):
    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    first.symlink_to(second)
    second.symlink_to(first)
    todo = change.pending([{"path": str(first), "content": "x = 1\n"}])  # not read: a loop cannot be
    assert todo[0]["before"] is None and todo[0]["link"]["refused"]
    with pytest.raises(change.ChangeFailed, match=rf"^{first} is a symlink that loops"):
        change.write(todo)
    assert first.is_symlink() and second.is_symlink()


def test_a_relative_symlink_is_followed_from_its_own_folder(tmp_path, monkeypatch):
    (tmp_path / "managed").mkdir()
    real = tmp_path / "managed" / "config.toml"
    real.write_text("version = 2\n")
    (tmp_path / "containerd").mkdir()
    link = tmp_path / "containerd" / "config.toml"
    link.symlink_to("../managed/config.toml")
    monkeypatch.chdir("/")  # the link is read from its folder, not the process's
    undo = change.write(change.pending([{"path": str(link), "content": "version = 3\n", "mode": "0600"}]))
    assert os.readlink(link) == "../managed/config.toml" and real.read_text() == "version = 3\n"
    assert oct(real.stat().st_mode & 0o777) == "0o600"
    change.restore(undo)
    assert os.readlink(link) == "../managed/config.toml" and real.read_text() == "version = 2\n"


def test_a_dangling_link_in_an_existing_folder_gets_its_target_made(tmp_path):
    (tmp_path / "managed").mkdir()
    link = tmp_path / "99-nvidia.toml"
    link.symlink_to(tmp_path / "managed" / "99-nvidia.toml")
    todo = change.pending([{"path": str(link), "content": "x = 1\n"}])
    assert todo[0]["before"] is None
    assert change.links(todo) == [f"{link} is a symlink to {tmp_path}/managed/99-nvidia.toml: the target was "
                                  "created, the link kept"]
    undo = change.write(todo)
    assert link.is_symlink() and (tmp_path / "managed" / "99-nvidia.toml").read_text() == "x = 1\n"
    change.restore(undo)  # the target this run made goes again; the link stays as it was
    assert link.is_symlink() and not (tmp_path / "managed" / "99-nvidia.toml").exists()


def test_removing_a_symlink_removes_the_link_keeps_its_target_and_restore_brings_it_back(linked):
    link, real = linked
    todo = change.pending([{"path": str(link), "content": None}])
    assert change.diff(todo)[0]["after_header"] == f"{link} (link removed, its target kept)"
    undo = change.write(todo)
    assert not os.path.lexists(link) and real.read_text() == "{}\n"
    assert change.links(todo) == [f"{link} is a symlink to {real}: the link was removed, its target kept"]
    change.restore(undo)
    assert link.is_symlink() and os.readlink(link) == str(real)


def test_a_plain_file_is_planned_written_and_restored_as_before(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text("{}\n")
    inode = path.stat().st_ino
    todo = change.pending([{"path": str(path), "content": "new\n", "mode": "0644"}])
    assert todo == [{"path": str(path), "content": "new\n", "mode": "0644", "before": "{}\n", "mode_only": False}]
    assert change.diff(todo) == [{"before_header": str(path), "after_header": str(path), "before": "{}\n",
                                  "after": "new\n"}]
    assert change.links(todo) == [] and change.links([str(path)]) == []
    undo = change.write(todo)
    assert path.read_text() == "new\n" and path.stat().st_ino != inode  # replaced atomically, a new file
    change.restore(undo)
    assert path.read_text() == "{}\n"
    gone = change.pending([{"path": str(path), "content": None}])
    assert change.diff(gone)[0]["after_header"] == f"{path} (removed)" and "link" not in gone[0]


def test_replace_puts_a_finished_file_through_a_link_with_the_targets_selinux_context(linked, tmp_path, monkeypatch):
    selinux = FakeSelinux(monkeypatch, tmp_path)
    link, real = linked
    selinux.contexts[str(real)] = b"system_u:object_r:container_config_t:s0"
    temp = Path(change.target(str(link)) + ".kgn-new")  # as dearmor makes it: beside the target
    assert temp.parent == real.parent
    temp.write_text("ring\n")
    change.replace(str(temp), str(link))
    assert link.is_symlink() and real.read_text() == "ring\n" and not temp.exists()
    assert selinux.contexts[str(real)] == b"system_u:object_r:container_config_t:s0"
    assert not selinux.log.exists()  # an existing target keeps its context: no restorecon


def test_the_toolkit_module_writes_keyring_and_source_through_links_and_says_so(root, monkeypatch):
    """The module end to end: the keyring (gpg --dearmor, change.replace) and the apt source (change.write)."""
    tmp = root["dir"]
    managed = tmp / "managed"
    managed.mkdir()
    for path in (KEYRING, LIST):
        Path(tmp, path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        Path(tmp, path.lstrip("/")).symlink_to(managed / os.path.basename(path))
    keyring, source = Path(tmp, KEYRING.lstrip("/")), Path(tmp, LIST.lstrip("/"))

    check = run_module(monkeypatch, FakeNode(), check_mode=True)
    said = check["ansible_facts"]["kgn_state_nvidia_container_toolkit"]["changes"]
    assert sorted(said) == sorted(f"{path} is a symlink to {managed}/{path.name}: the target would be created, the "
                                  "link kept" for path in (keyring, source))
    assert not list(managed.iterdir())  # check mode wrote nothing

    result = run_module(monkeypatch, FakeNode())
    assert not result["failed"], result.get("msg")
    assert keyring.is_symlink() and source.is_symlink()
    assert (managed / keyring.name).read_bytes().startswith(b"RING:") and "signed-by=" in source.read_text()
    said = result["ansible_facts"]["kgn_state_nvidia_container_toolkit"]["changes"]
    assert sorted(said) == sorted(f"{path} is a symlink to {managed}/{path.name}: the target was created, the link "
                                  "kept" for path in (keyring, source))
    # the second run: nothing to write, nothing said
    again = run_module(monkeypatch, FakeNode(), check_mode=True)
    assert again["ansible_facts"]["kgn_state_nvidia_container_toolkit"]["changes"] == []


def test_the_toolkit_module_refuses_a_dangling_keyring_link_by_name(root, monkeypatch):
    tmp = root["dir"]
    keyring = Path(tmp, KEYRING.lstrip("/"))
    keyring.parent.mkdir(parents=True)
    keyring.symlink_to(tmp / "absent" / "keyring.gpg")
    result = run_module(monkeypatch, FakeNode())
    assert result["failed"] and f"{keyring} is a symlink to {tmp}/absent/keyring.gpg, whose folder" in result["msg"]
    assert keyring.is_symlink() and not (tmp / "absent").exists()
