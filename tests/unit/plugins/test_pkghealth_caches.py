"""pkghealth's two caches on a node: dpkg_verify (dpkg --verify's answer from dpkg's own checksum lists, with a stat
cache that never hides a file that was replaced, edited or deleted) and apt_check (a clean apt-get check kept while
dpkg's status file is the same file)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import pkghealth


class Node:
    """The module seen by dpkg_verify: check mode, and dpkg --verify for a package without a checksum list."""

    def __init__(self, check_mode=False):
        self.check_mode = check_mode
        self.calls = []
        self.answers = {"dpkg": (0, "missing     /usr/lib/old/libfoo.so\n", ""),
                        "apt-get": (0, "Reading package lists...\n", "")}

    def get_bin_path(self, name):
        return f"/usr/bin/{name}"

    def run_command(self, argv, data=None, check_rc=False):
        self.calls.append(argv[2:])  # without `timeout N`
        return self.answers[argv[2]]


@pytest.fixture()
def dpkg(tmp_path, monkeypatch):
    """A package with two files under tmp_path (its md5sums list in a dpkg info folder) and where the cache goes."""
    info = tmp_path / "info"
    info.mkdir()
    files = {}
    for rel, text in (("usr/bin/nvidia-ctk", b"ctk 1.20.0\n"), ("usr/bin/nvidia-container-runtime", b"runtime\n")):
        path = tmp_path / "root" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text)
        files[rel] = path
    listed = "".join(f"{hashlib.md5(p.read_bytes()).hexdigest()}  {str(p).lstrip('/')}\n" for p in files.values())
    (info / "nvidia-container-toolkit-base:amd64.md5sums").write_text(listed)
    monkeypatch.setattr(pkghealth, "DPKG_INFO", str(info))
    hashed = []
    real = pkghealth._md5
    monkeypatch.setattr(pkghealth, "_md5", lambda path: hashed.append(path) or real(path))
    return {"files": files, "cache": tmp_path / "kgn" / "dpkg-verify.json", "hashed": hashed}


def verify(dpkg, node=None, names=("nvidia-container-toolkit-base",)):
    return pkghealth.dpkg_verify(node or Node(), list(names), cache_path=str(dpkg["cache"]))


def test_intact_files_are_checksummed_once_then_only_stat(dpkg):
    assert verify(dpkg) == ""
    assert len(dpkg["hashed"]) == 2 and dpkg["cache"].exists()
    dpkg["hashed"].clear()
    assert verify(dpkg) == ""
    assert dpkg["hashed"] == []  # unchanged files: the stat matched the cache, nothing read


def test_a_replaced_binary_is_checksummed_again_and_reported(dpkg):
    verify(dpkg)
    runtime = dpkg["files"]["usr/bin/nvidia-container-runtime"]
    os.rename(runtime, f"{runtime}.orig")
    runtime.write_bytes(b"a runtime that injects nothing\n")  # same length or not: a new inode and ctime
    dpkg["hashed"].clear()
    assert verify(dpkg) == f"??5??????   {runtime}\n"
    assert dpkg["hashed"] == [str(runtime)]
    assert str(runtime) not in json.loads(dpkg["cache"].read_text())  # never cached as good


def test_a_file_edited_in_place_with_its_mtime_put_back_is_still_found(dpkg):
    verify(dpkg)
    ctk = dpkg["files"]["usr/bin/nvidia-ctk"]
    before = os.stat(ctk)
    ctk.write_bytes(b"ctk 9.99.9\n")  # same size
    os.utime(ctk, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime restored; ctime cannot be
    assert verify(dpkg) == f"??5??????   {ctk}\n"


def test_a_deleted_file_is_missing(dpkg):
    verify(dpkg)
    dpkg["files"]["usr/bin/nvidia-ctk"].unlink()
    assert verify(dpkg) == f"missing     {dpkg['files']['usr/bin/nvidia-ctk']}\n"


def test_a_package_without_a_checksum_list_asks_dpkg(dpkg):
    node = Node()
    out = verify(dpkg, node, names=("nvidia-container-toolkit-base", "libfoo1"))
    assert out == "missing     /usr/lib/old/libfoo.so\n"
    assert node.calls == [["dpkg", "--verify", "libfoo1"]]


def test_check_mode_writes_no_cache_and_other_packages_entries_stay(dpkg):
    verify(dpkg, Node(check_mode=True))
    assert not dpkg["cache"].exists()
    dpkg["cache"].parent.mkdir()
    dpkg["cache"].write_text(json.dumps({"/usr/lib/libcuda.so.1": ["0" * 32, [1, 2, 3, 4]]}))
    verify(dpkg)
    cached = json.loads(dpkg["cache"].read_text())
    assert "/usr/lib/libcuda.so.1" in cached and len(cached) == 3  # the driver's entry kept beside the toolkit's


@pytest.fixture()
def status(tmp_path, monkeypatch):
    path = tmp_path / "status"
    path.write_text("Package: nvidia-driver\nStatus: install ok installed\n")
    monkeypatch.setattr(pkghealth, "DPKG_STATUS", str(path))
    return path


def test_a_clean_apt_check_is_kept_until_dpkg_changes_its_status_file(status, tmp_path):
    node, cache = Node(), str(tmp_path / "apt-check.json")
    assert pkghealth.apt_check(node, cache) == [] and pkghealth.apt_check(node, cache) == []
    assert node.calls == [["apt-get", "check", "-q"]]  # the second answer came from the cache
    replaced = tmp_path / "status-new"
    replaced.write_text(status.read_text() + "\n")
    os.replace(replaced, status)  # what dpkg does on every change
    pkghealth.apt_check(node, cache)
    assert len(node.calls) == 2


def test_an_unclean_apt_check_is_never_kept(status, tmp_path):
    node, cache = Node(), str(tmp_path / "apt-check.json")
    node.answers = dict(node.answers, **{"apt-get": (100, "", "E: Unmet dependencies. Try 'apt-get -f install'")})
    assert pkghealth.apt_check(node, cache) == ["Unmet dependencies. Try 'apt-get -f install'"]
    assert pkghealth.apt_check(node, cache) != [] and len(node.calls) == 2
    assert not os.path.exists(cache)
    assert pkghealth.apt_check(Node(check_mode=True), cache) == [] and not os.path.exists(cache)  # check mode


def test_a_conffile_is_the_administrators_only_its_absence_is_said(dpkg, tmp_path):
    env = tmp_path / "root/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"
    env.parent.mkdir(parents=True)
    env.write_text("NVIDIA_CTK_DEBUG=false\n")
    info = tmp_path / "info"
    listed = info / "nvidia-container-toolkit-base:amd64.md5sums"
    # some packages list a conffile among their checksums (nvidia-container-toolkit-base 1.20.0 does)
    listed.write_text(listed.read_text() + f"{'0' * 32}  {str(env).lstrip('/')}\n")
    (info / "nvidia-container-toolkit-base:amd64.conffiles").write_text(f"{env}\n")
    assert verify(dpkg) == ""  # edited by the administrator: not ours to report
    env.unlink()
    assert verify(dpkg) == f"missing   c {env}\n"


def test_checksum_lists_are_found_per_package_with_and_without_architecture(tmp_path, monkeypatch):
    info = tmp_path / "info"
    info.mkdir()
    for name in ("libcuda1:amd64.md5sums", "libcuda1:i386.md5sums", "nvidia-smi.md5sums", "nvidia-smi.list",
                 "nvidia-smi-extra.md5sums", ".hidden.md5sums"):
        (info / name).write_text("")
    monkeypatch.setattr(pkghealth, "DPKG_INFO", str(info))
    assert pkghealth._checksum_lists() == {
        "libcuda1": [f"{info}/libcuda1:amd64.md5sums", f"{info}/libcuda1:i386.md5sums"],
        "nvidia-smi": [f"{info}/nvidia-smi.md5sums"],
        "nvidia-smi-extra": [f"{info}/nvidia-smi-extra.md5sums"],
    }
    monkeypatch.setattr(pkghealth, "DPKG_INFO", str(tmp_path / "none"))
    assert pkghealth._checksum_lists() == {}
