"""change.py and host.py on real files: validate before each write, back up, restore on failure, one run at a time."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host


class Module:
    """The part of AnsibleModule change.py uses: run_command and get_bin_path, over the real system."""

    def get_bin_path(self, name):
        import shutil

        return shutil.which(name)

    def run_command(self, argv, data=None, check_rc=False):
        import subprocess

        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr


def test_pending_diff_and_write_with_a_backup(tmp_path):
    old = tmp_path / "daemon.json"
    old.write_text("{}\n")
    new = tmp_path / "sub" / "new.toml"
    todo = change.pending([{"path": str(old), "content": '{"a": 1}\n', "mode": "0644"},
                           {"path": str(new), "content": "x = 1\n", "mode": "0600"}])
    assert [c["before"] for c in todo] == ["{}\n", None]
    assert change.diff(todo)[0]["after"] == '{"a": 1}\n'
    undo = change.write(todo, module=Module())
    assert old.read_text() == '{"a": 1}\n' and new.read_text() == "x = 1\n"
    assert oct(new.stat().st_mode & 0o777) == "0o600"
    backup = dict(undo)[str(old)]
    assert backup.endswith("~") and Path(backup).read_text() == "{}\n"
    assert change.pending([{"path": str(old), "content": '{"a": 1}\n', "mode": "0644"}]) == []
    change.restore(undo)
    assert old.read_text() == "{}\n" and not new.exists()


def test_a_refusing_validator_changes_nothing_even_after_earlier_writes(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("before\n")
    todo = change.pending([
        {"path": str(first), "content": "after\n", "mode": "0644", "validate": ["true", "%s"]},
        {"path": str(second), "content": "bad\n", "mode": "0644", "validate": ["grep", "-q", "good", "%s"]},
    ])
    with pytest.raises(change.ChangeFailed, match=r"refuses the new .*second, so nothing was changed"):
        change.write(todo, module=Module())
    assert first.read_text() == "before\n" and not second.exists()


def test_a_full_disk_midway_puts_every_file_back(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("before\n")
    second.write_text("old\n")
    real = change._write

    def full(path, content, mode):
        if path == str(second):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        real(path, content, mode)

    monkeypatch.setattr(change, "_write", full)
    todo = change.pending([{"path": str(first), "content": "after\n"}, {"path": str(second), "content": "new\n"}])
    with pytest.raises(change.ChangeFailed, match=r"No space left on device.*put back"):
        change.write(todo)
    assert first.read_text() == "before\n" and second.read_text() == "old\n"


def test_apply_restores_and_says_so_when_the_service_does_not_come_back(tmp_path):
    config = tmp_path / "config"
    config.write_text("good\n")
    restarts = []
    todo = change.pending([{"path": str(config), "content": "bad\n"}])
    restored = r"did not come back healthy.*previous files were restored.*healthy again"
    with pytest.raises(change.ChangeFailed, match=restored):
        change.apply(Module(), todo, lambda: restarts.append(config.read_text()),
                     lambda: (config.read_text() == "good\n", "it says bad"), timeout=0)
    assert config.read_text() == "good\n" and restarts == ["bad\n", "good\n"]


def test_files_changed_after_a_process_started_are_stale(tmp_path):
    import subprocess

    child = subprocess.Popen(["sleep", "5"])
    try:
        started = host.process_started(child.pid)
        assert started is not None and abs(started - time.time()) < 2
    finally:
        child.kill()
    path = tmp_path / "config"
    path.write_text("x")
    assert host.changed_since([str(path)], time.time() - 10) == [str(path)]
    assert host.changed_since([str(path)], time.time() + 5) == []
    assert host.process_started(2 ** 22 + 1) is None


def test_a_second_run_waits_for_the_first(tmp_path):
    lock = str(tmp_path / "lock")
    order = []

    def first():
        with host.NodeLock("first", path=lock):
            order.append("first in")
            time.sleep(0.5)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.1)
    with host.NodeLock("second", timeout=10, path=lock):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]


def test_a_lock_held_too_long_names_its_holder(tmp_path):
    lock = str(tmp_path / "lock")
    held, other = host.NodeLock("container_runtime", path=lock), host.NodeLock("other", timeout=0, path=lock)
    with held, pytest.raises(TimeoutError, match="container_runtime, pid"), other:
        pass


# --- SELinux contexts (EL hosts): no SELinux kernel here, so the kernel's side is stood in for ---------------

class FakeSelinux:
    """The kernel's security.selinux attribute, per path, and a restorecon that records what it labels."""

    def __init__(self, monkeypatch, tmp_path):
        self.contexts, self.restored = {}, []
        enforce = tmp_path / "enforce"
        enforce.write_text("1\n")
        tool = tmp_path / "restorecon"
        tool.write_text(f"#!/bin/sh\necho \"$1\" >> {tmp_path / 'restored'}\n")
        tool.chmod(0o755)
        self.log = tmp_path / "restored"
        monkeypatch.setattr(change, "SELINUX_ENFORCE", str(enforce))
        monkeypatch.setattr(change, "RESTORECON", (str(tool),))
        monkeypatch.setattr(change.os, "getxattr", self.get)
        monkeypatch.setattr(change.os, "setxattr", self.set)
        real_replace = os.replace

        def replace(src, dst):  # a rename carries the inode's attributes along
            real_replace(src, dst)
            if str(src) in self.contexts:
                self.contexts[str(dst)] = self.contexts.pop(str(src))
            else:  # the folder's context, as the kernel gives a file made in it
                self.contexts[str(dst)] = b"system_u:object_r:etc_t:s0"
        monkeypatch.setattr(change.os, "replace", replace)

    def get(self, path, name):
        assert name == "security.selinux"
        if str(path) not in self.contexts:
            raise OSError(61, "No data available")
        return self.contexts[str(path)]

    def set(self, path, name, value):
        assert name == "security.selinux"
        self.contexts[str(path)] = value


def test_a_replaced_file_keeps_its_selinux_context(tmp_path, monkeypatch):
    selinux = FakeSelinux(monkeypatch, tmp_path)
    daemon = tmp_path / "daemon.json"
    daemon.write_text("{}\n")
    selinux.contexts[str(daemon)] = b"system_u:object_r:container_config_t:s0"
    change.write(change.pending([{"path": str(daemon), "content": '{"a": 1}\n'}]))
    assert daemon.read_text() == '{"a": 1}\n'
    assert selinux.contexts[str(daemon)] == b"system_u:object_r:container_config_t:s0"
    assert not selinux.log.exists()  # restorecon is for new files only


def test_a_new_file_gets_the_policy_default_context(tmp_path, monkeypatch):
    selinux = FakeSelinux(monkeypatch, tmp_path)
    repo = tmp_path / "yum.repos.d" / "kgn-cuda.repo"
    change.write_file(str(repo), b"[kgn-cuda]\n", 0o644)
    assert repo.read_bytes() == b"[kgn-cuda]\n"
    assert selinux.log.read_text() == f"{repo}\n"


def test_without_selinux_no_context_is_read_or_set(tmp_path, monkeypatch):
    monkeypatch.setattr(change, "SELINUX_ENFORCE", str(tmp_path / "absent"))

    def refuse(*_args):
        raise AssertionError("no SELinux: the security.selinux attribute must not be touched")
    monkeypatch.setattr(change.os, "getxattr", refuse)
    monkeypatch.setattr(change.os, "setxattr", refuse)
    change.write_file(str(tmp_path / "f"), "x\n", "0600")
    assert (tmp_path / "f").read_text() == "x\n" and oct((tmp_path / "f").stat().st_mode & 0o777) == "0o600"
