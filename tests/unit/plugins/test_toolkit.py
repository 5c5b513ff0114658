"""toolkit_plan (the nvidia_container_toolkit section of the host plan), its parsers, and the module's apt and rpm
command sequences against a fake AnsibleModule and a fake node."""

from __future__ import annotations

import configparser
import io
import json
import os
from pathlib import Path

import pytest
from ansible.module_utils import urls
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import pkghealth
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import SECTIONS, host_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import toolkit
from ansible_collections.kgn.gpu_nodes.plugins.modules import nvidia_container_toolkit as module_under_test

NV = "https://nvidia.github.io"
KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
KEY = "/usr/share/keyrings/nvidia-container-toolkit-keyring.asc"
LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
REPO = "/etc/yum.repos.d/nvidia-container-toolkit.repo"
FPR = "0123456789ABCDEF0123456789ABCDEF01234567"
AT_PIN = (("nvidia-container-toolkit", "1.17.8-1"), ("nvidia-container-toolkit-base", "1.17.8-1"))


def plan(observed: dict | None = None, **inputs) -> dict:
    return host_plan({"nvidia_container_toolkit": {"version": "1.17.8", **inputs}},
                     {"nvidia_container_toolkit": observed or {}})["nvidia_container_toolkit"]


def installed(*pairs: tuple, held: bool = False) -> dict:
    return {name: {"version": version, "held": held} for name, version in pairs}


def repo_sections(text: str) -> dict:
    parser = configparser.RawConfigParser()
    parser.read_string(text)
    return {section: dict(parser[section]) for section in parser.sections()}


# --- registration and family -----------------------------------------------------------------------


def test_registered_as_a_section_of_the_host_plan():
    assert SECTIONS["nvidia_container_toolkit"] is toolkit.toolkit_plan


@pytest.mark.parametrize(("observed", "family"), [
    ({"pkg_mgr": "apt"}, "deb"), ({"pkg_mgr": "dnf"}, "rpm"), ({"pkg_mgr": "dnf5"}, "rpm"),
    ({"pkg_mgr": "yum"}, "rpm"), ({"os_family": "Debian"}, "deb"), ({"os_family": "RedHat"}, "rpm"),
])
def test_family_comes_from_the_observation(observed, family):
    assert plan(observed)["family"] == family


def test_no_family_is_a_clear_error_never_a_debian_guess():
    with pytest.raises(KgnError, match="no package family is known for this host") as err:
        plan({"docker_version": "20.10.24"})
    assert "kgn_observed_nvidia_container_toolkit: {pkg_mgr: apt}" in str(err.value)


@pytest.mark.parametrize("observed", [{"pkg_mgr": "zypper"}, {"os_family": "Suse"}])
def test_other_package_managers_are_refused_with_todays_message(observed):
    with pytest.raises(KgnError, match=r"installs with apt .* or dnf/yum") as err:
        plan(observed)
    assert "Nothing was changed: install the toolkit with its package manager yourself" in str(err.value)


# --- repository layout per era ---------------------------------------------------------------------


@pytest.mark.parametrize(("version", "suites"), [
    ("1.17.8", [f"{NV}/libnvidia-container/stable/deb/$(ARCH) /"]),
    ("1.14.0", [f"{NV}/libnvidia-container/stable/deb/$(ARCH) /"]),
    ("1.13.5", [f"{NV}/libnvidia-container/ubuntu18.04/$(ARCH) /"]),
    ("1.6.0", [f"{NV}/libnvidia-container/ubuntu18.04/$(ARCH) /"]),
    ("1.5.1", [f"{NV}/{repo}/ubuntu18.04/$(ARCH) /"
               for repo in ("libnvidia-container", "nvidia-container-runtime", "nvidia-docker")]),
])
def test_apt_source_per_era_uses_signed_by(version, suites):
    result = plan({"pkg_mgr": "apt"}, version=version, repo_distribution="ubuntu18.04")
    (source,) = result["files"]
    assert source["path"] == LIST and source["mode"] == "0644"
    lines = source["content"].splitlines()
    assert lines[0] == toolkit.HEADER.strip()
    assert [line for line in lines if not line.startswith("#")] == [f"deb [signed-by={KEYRING}] {s}" for s in suites]
    key = "nvidia-docker/gpgkey" if version == "1.5.1" else "libnvidia-container/gpgkey"
    assert result["repository"]["key"]["url"] == f"{NV}/{key}"


@pytest.mark.parametrize(("version", "repos"), [
    ("1.17.8", {"nvidia-container-toolkit": "libnvidia-container/stable/rpm"}),
    ("1.13.5", {"libnvidia-container": "libnvidia-container/centos7"}),
    ("1.5.1", {repo: f"{repo}/centos7" for repo in ("libnvidia-container", "nvidia-container-runtime",
                                                    "nvidia-docker")}),
])
def test_repo_file_per_era_has_nvidias_sections(version, repos):
    result = plan({"pkg_mgr": "dnf"}, version=version, repo_distribution="centos7")
    (repo,) = result["files"]
    assert repo["path"] == REPO
    assert repo_sections(repo["content"]) == {
        section: {"name": section, "baseurl": f"{NV}/{path}/$basearch", "repo_gpgcheck": "1", "gpgcheck": "0",
                  "enabled": "1", "gpgkey": f"{NV}/{path.split('/')[0]}/gpgkey"}
        for section, path in repos.items()
    }
    assert "repository" in result and "keyring" not in result["repository"]


def test_below_1_14_needs_the_distribution():
    with pytest.raises(KgnError, match="give the distribution as NVIDIA names it"):
        plan({"pkg_mgr": "apt"}, version="1.13.5")


def test_a_mirror_replaces_nvidia_github_io_everywhere():
    result = plan({"pkg_mgr": "yum"}, repo_base_url="file:///srv/kgn-nvidia-repo/", gpg_key_fingerprint=FPR)
    assert NV not in result["files"][0]["content"]
    assert result["repository"]["keys"][0]["url"] == "file:///srv/kgn-nvidia-repo/libnvidia-container/gpgkey"


# --- package choice and pinned specs ---------------------------------------------------------------


@pytest.mark.parametrize(("docker", "package"), [
    ("18.09.7", "nvidia-docker2"), ("19.03.0", "nvidia-container-toolkit"),
    ("20.10.24", "nvidia-container-toolkit"), (None, "nvidia-container-toolkit"),
])
def test_package_follows_the_docker_version(docker, package):
    result = plan({"pkg_mgr": "apt", "docker_version": docker})
    assert result["package"] == package
    assert result["assumed"] == []
    assert ("nvidia-docker2=2.14.0*" in result["specs"]) is (package == "nvidia-docker2")


def test_without_a_recorded_docker_version_the_toolkit_is_assumed_and_said():
    result = plan({"pkg_mgr": "apt"})
    assert result["package"] == "nvidia-container-toolkit"
    assert any("no Docker version recorded" in a for a in result["assumed"])


def test_an_explicit_package_wins_over_docker():
    result = plan({"pkg_mgr": "apt", "docker_version": "26.1.5"}, package="nvidia-docker2",
                  nvidia_docker2_version="2.13.0")
    assert result["package"] == "nvidia-docker2"
    assert result["specs"][-1] == "nvidia-docker2=2.13.0*"


@pytest.mark.parametrize(("version", "family", "specs"), [
    ("1.17.8", "apt", ["nvidia-container-toolkit=1.17.8*", "nvidia-container-toolkit-base=1.17.8*"]),
    ("1.11.0", "apt", ["nvidia-container-toolkit=1.11.0*", "nvidia-container-toolkit-base=1.11.0*"]),
    ("1.10.0", "apt", ["nvidia-container-toolkit=1.10.0*"]),
    ("1.17.8", "dnf", ["nvidia-container-toolkit-1.17.8", "nvidia-container-toolkit-base-1.17.8"]),
    ("1.10.0", "yum", ["nvidia-container-toolkit-1.10.0"]),
])
def test_toolkit_base_is_pinned_from_1_11(version, family, specs):
    result = plan({"pkg_mgr": family, "docker_version": None}, version=version, repo_distribution="ubuntu18.04")
    assert result["specs"] == specs


def test_deb_everything_in_place_plans_nothing():
    observed = {
        "pkg_mgr": "apt", "docker_version": "20.10.24",
        "packages": installed(("nvidia-container-toolkit", "1.17.8-1"), ("nvidia-container-toolkit-base", "1.17.8-1"),
                              held=True),
        "files": {LIST: plan({"pkg_mgr": "apt"})["files"][0]["content"]},
        "key": {"exists": True, "mode": "0644", "fingerprints": [FPR]},
        "keyring": {"exists": True, "fingerprints": [FPR]},
        "available": {}, "verify": {"nvidia-container-toolkit": [], "nvidia-container-toolkit-base": []},
    }
    result = plan(observed, gpg_key_fingerprint=FPR.lower())
    assert result["unmet"] == result["install"] == result["hold"] == result["repair"] == []
    assert result["refresh_lists"] is False
    assert not result["repository"]["key"]["fetch"] and not result["repository"]["keyring"]["write"]


def test_deb_unmet_moved_and_holds():
    observed = {"pkg_mgr": "apt", "docker_version": "20.10.24",
                "packages": {"nvidia-container-toolkit": {"version": "1.14.6-1", "held": True},
                             "nvidia-container-toolkit-base": {"version": "1.17.8-1", "held": False}}}
    result = plan(observed)
    assert result["unmet"] == ["nvidia-container-toolkit=1.17.8*"]
    assert result["moved"] == ["nvidia-container-toolkit"]
    assert result["install"] == result["specs"]  # the whole pinned set, so apt resolves it together
    # both: the install names the held one again, which drops its hold
    assert result["hold"] == ["nvidia-container-toolkit", "nvidia-container-toolkit-base"]
    assert plan(observed, hold=False)["unhold"] == ["nvidia-container-toolkit"]


def test_deb_refreshes_the_lists_only_when_they_do_not_offer_the_pin():
    base = {"pkg_mgr": "apt", "docker_version": None,
            "files": {LIST: plan({"pkg_mgr": "apt"})["files"][0]["content"]},
            "key": {"exists": True, "mode": "0644", "fingerprints": [FPR]},
            "keyring": {"exists": True, "fingerprints": [FPR]}}
    offered = {"nvidia-container-toolkit": ["1.17.8-1"], "nvidia-container-toolkit-base": ["1.17.8-1"]}
    assert plan({**base, "available": offered})["refresh_lists"] is False
    stale = plan({**base, "available": {"nvidia-container-toolkit": ["1.14.6-1"]}})
    assert stale["refresh_lists"] is True
    assert "do not offer nvidia-container-toolkit=1.17.8*" in stale["refresh_why"][0]


def test_rpm_unmet_moved_release_lock_and_plugin():
    observed = {"pkg_mgr": "dnf", "docker_version": "18.09.7",
                "packages": installed(*AT_PIN, ("nvidia-docker2", "2.11.0-1")),
                "locked": ["nvidia-container-toolkit", "nvidia-docker2"]}
    result = plan(observed)
    assert result["specs"] == ["nvidia-container-toolkit-1.17.8", "nvidia-container-toolkit-base-1.17.8",
                               "nvidia-docker2-2.14.0"]
    assert result["unmet"] == ["nvidia-docker2-2.14.0"]
    assert result["moved"] == ["nvidia-docker2"]
    assert result["release"] == ["nvidia-docker2"]
    assert result["lock"] == ["nvidia-container-toolkit-base", "nvidia-docker2"]
    assert result["versionlock_plugin"] == "python3-dnf-plugin-versionlock"
    assert plan({**observed, "packages": {**observed["packages"], **installed(
        ("python3-dnf-plugin-versionlock", "4.0.21-3"))}})["versionlock_plugin"] == ""
    assert plan({**observed, "pkg_mgr": "dnf5"})["versionlock_plugin"] == ""
    unlocked = plan(observed, hold=False)
    assert unlocked["unlock"] == ["nvidia-container-toolkit", "nvidia-docker2"] and unlocked["lock"] == []


def test_rpm_keys_are_checked_only_with_a_pinned_fingerprint():
    assert plan({"pkg_mgr": "yum"})["repository"]["keys"] == []
    keys = plan({"pkg_mgr": "yum", "rpm_keys": {"/etc/pki/rpm-gpg/kgn-nvidia-container-toolkit.asc": {
        "exists": True, "fingerprints": [FPR]}}}, gpg_key_fingerprint=FPR)["repository"]["keys"]
    assert keys == [{"id": "nvidia-container-toolkit", "url": f"{NV}/libnvidia-container/gpgkey",
                     "path": "/etc/pki/rpm-gpg/kgn-nvidia-container-toolkit.asc", "fingerprint": FPR,
                     "fetch": False, "why": ""}]


@pytest.mark.parametrize(("key", "why"), [
    ({}, "missing"),
    ({"exists": True, "mode": "0600", "fingerprints": [FPR]}, "mode 0600, not 0644"),
    ({"exists": True, "mode": "0644", "fingerprints": []}, "not a key gpg can read"),
    ({"exists": True, "mode": "0644", "fingerprints": ["AAAA"]}, f"its fingerprint(s) AAAA are not the pinned {FPR}"),
    ({"exists": True, "mode": "0644", "fingerprints": None}, ""),  # no gpg: nothing to say
])
def test_key_download_reasons(key, why):
    result = plan({"pkg_mgr": "apt", "key": key, "keyring": {"exists": True}}, gpg_key_fingerprint=FPR)
    assert result["repository"]["key"]["why"] == why
    assert result["repository"]["key"]["fetch"] is bool(why)


def test_keyring_is_written_when_missing_or_holding_another_key():
    key = {"exists": True, "mode": "0644", "fingerprints": [FPR]}
    assert plan({"pkg_mgr": "apt", "key": key})["repository"]["keyring"]["why"] == "missing"
    other = plan({"pkg_mgr": "apt", "key": key, "keyring": {"exists": True, "fingerprints": ["AAAA"]}})
    assert other["repository"]["keyring"]["write"] is True


def test_repair_reinstalls_only_packages_at_their_pin():
    problems = ["/usr/bin/nvidia-container-runtime is missing"]
    observed = {"pkg_mgr": "apt", "docker_version": None,
                "packages": installed(*AT_PIN),
                "verify": {"nvidia-container-toolkit-base": problems}}
    assert plan(observed)["repair"] == [{"name": "nvidia-container-toolkit-base", "version": "1.17.8-1",
                                         "spec": "nvidia-container-toolkit-base=1.17.8-1", "problems": problems}]
    # at another version it is installed at the pin anyway
    assert plan(observed, version="1.18.0")["repair"] == []
    rpm = plan({**observed, "pkg_mgr": "dnf"})["repair"]
    assert rpm[0]["spec"] == "nvidia-container-toolkit-base-1.17.8-1"


def test_repo_disabled_writes_nothing_and_removes_only_its_own_file():
    own = plan({"pkg_mgr": "apt"})["files"][0]["content"]
    assert plan({"pkg_mgr": "apt", "files": {LIST: own}}, repo_enabled=False)["remove"] == [
        {"path": LIST, "content": None}]
    theirs = plan({"pkg_mgr": "apt", "files": {LIST: "deb http://mirror/ /\n"}}, repo_enabled=False)
    assert theirs["files"] == theirs["remove"] == []


# --- parsers ---------------------------------------------------------------------------------------


def test_parse_dpkg_query_keeps_installed_and_holds():
    text = ("ii |nvidia-container-toolkit|1.17.8-1\nhi |nvidia-container-toolkit-base|1.17.8-1\n"
            "rc |nvidia-docker2|2.14.0-1\niU |libfoo|1\n")
    assert toolkit.parse_dpkg_query(text) == {
        "nvidia-container-toolkit": {"version": "1.17.8-1", "held": False},
        "nvidia-container-toolkit-base": {"version": "1.17.8-1", "held": True},
    }


def test_parse_rpm_query_skips_not_installed():
    text = "nvidia-container-toolkit=1.17.8-1\npackage nvidia-docker2 is not installed\n"
    assert toolkit.parse_rpm_query(text) == {"nvidia-container-toolkit": {"version": "1.17.8-1", "held": False}}


def test_parse_fingerprints_and_madison():
    colons = f"pub:-:3072:1:293977AAA531320C:1:::-:::scESC::::::23::0:\nfpr:::::::::{FPR}:\nuid:::\nfpr:::::::::BBBB:\n"
    assert toolkit.parse_fingerprints(colons) == [FPR, "BBBB"]
    madison = (" nvidia-container-toolkit |   1.17.8-1 | file:/srv/r/libnvidia-container/stable/deb/amd64  Packages\n"
               " nvidia-container-toolkit |   1.14.6-1 | file:/srv/r/libnvidia-container/stable/deb/amd64  Packages\n")
    assert toolkit.parse_madison(madison) == {"nvidia-container-toolkit": ["1.17.8-1", "1.14.6-1"]}


def test_verify_problems_leave_conffiles_to_the_administrator():
    text = ("missing     /usr/bin/nvidia-container-runtime\n??5??????   /usr/bin/nvidia-ctk\n"
            "??5?????? c /etc/nvidia-container-runtime/config.toml\nmissing   c /etc/docker/daemon.json\n"
            ".M.......   /usr/bin/nvidia-container-cli\n")
    assert toolkit.verify_problems(text) == ["/usr/bin/nvidia-container-runtime is missing",
                                             "/usr/bin/nvidia-ctk differs from the package (checksum)"]


@pytest.mark.parametrize("text", [
    "0:nvidia-container-toolkit-1.17.8-1.*\n",  # yum
    "Last metadata expiration check: 0:01:02 ago.\nnvidia-container-toolkit-0:1.17.8-1.*\n",  # dnf
    "# Added by 'versionlock add' command on 2025-01-01 00:00:00\nPackage name: nvidia-container-toolkit\n",  # dnf5
])
def test_versionlock_names_in_every_format(text):
    assert toolkit.versionlock_names(text) == ["nvidia-container-toolkit"]  # not -base, not nvidia-docker2


# --- the module against a fake node ----------------------------------------------------------------


class Exit(Exception):
    def __init__(self, result):
        super().__init__(result.get("msg", ""))
        self.result = result


class FakeNode:
    """A node answering the commands the module runs; packages, holds, locks and verify problems in memory."""

    def __init__(self, pkg_mgr="apt", docker="Docker version 20.10.24+dfsg1, build 297e128", offered=None):
        self.pkg_mgr = pkg_mgr
        self.docker = docker
        self.packages = {}  # name -> [version, held]
        self.locked = set()
        self.broken = {}  # name -> verify output
        self.offered = offered if offered is not None else {"nvidia-container-toolkit": ["1.17.8-1", "1.14.6-1"],
                                                              "nvidia-container-toolkit-base": ["1.17.8-1", "1.14.6-1"],
                                                              "nvidia-docker2": ["2.14.0-1"]}
        self.lists = {}  # what apt-cache offers before apt-get update
        self.lock_busy = 0  # how many apt-get calls fail with a lock message first
        self.calls = []
        self.status = {}  # name -> dpkg's db:Status-Abbrev of a package left inconsistent (iFR, iU)
        self.configure_fails = False  # dpkg --configure -a fails (a half-installed package needs its archive)
        self.dpkg_i_fails = False

    def has(self, tool):
        if tool == "nvidia-container-runtime":
            owner = "nvidia-container-toolkit-base" if "nvidia-container-toolkit-base" in self.packages else \
                "nvidia-container-toolkit"
            return owner in self.packages and owner not in self.broken
        if tool == "dockerd":
            return bool(self.docker)
        deb = {"apt-get", "apt-cache", "apt-mark", "dpkg", "dpkg-query", "sh"}
        rpm = {"rpm", self.pkg_mgr}
        return tool in {"gpg", "timeout", "nvidia-ctk"} | (deb if self.pkg_mgr == "apt" else rpm)

    def install(self, spec, sep):
        if sep == "=":
            name, version = spec.split("=", 1)
        else:  # name-version or name-version-release, or a bare name
            name = max((n for n in self.offered if spec == n or spec.startswith(n + "-")), key=len)
            version = spec[len(name) + 1:]
        candidates = self.offered.get(name, ["1.0-1"])
        chosen = next(v for v in candidates if v.startswith(version.rstrip("*")))
        self.packages[name] = [chosen, (self.packages.get(name) or [None, False])[1]]
        self.broken.pop(name, None)

    def __call__(self, argv):
        self.calls.append(argv)
        tool = argv[0]
        if tool == "dockerd":
            return 0, self.docker + "\n", ""
        if tool == "gpg":
            args = argv[argv.index("--batch") + 1:]
            if "--dearmor" in args:
                Path(args[args.index("--output") + 1]).write_bytes(b"RING:" + Path(args[-1]).read_bytes())
                return 0, "", ""
            data = Path(args[-1]).read_bytes()
            fprs = [line.split(b":", 1)[1].decode() for line in data.splitlines() if line.startswith(b"KEY:")]
            return (0 if fprs else 2), "".join(f"fpr:::::::::{f}:\n" for f in fprs), ""
        if tool == "dpkg-query":
            out = "".join(f"{'h' if held else 'i'}i |{name}|{version}\n" for name, (version, held)
                          in self.packages.items() if name in argv and name not in self.status)
            out += "".join(f"{abbrev}|{name}|1.17.8-1\n" for name, abbrev in self.status.items() if name in argv)
            return 0, out, ""
        if argv[:2] == ["dpkg", "--audit"]:
            return 0, "".join(f" {name} STAND-IN\n" for name in self.status), ""
        if argv[:3] == ["dpkg", "--configure", "-a"]:
            if self.configure_fails:
                return 1, "", ("dpkg: error processing package libnvidia-container1 (--configure):\n"
                               " package is in a very bad inconsistent state")
            self.status = {n: a for n, a in self.status.items() if "R" in a}
            return 0, "", ""
        if argv[:2] == ["dpkg", "-i"]:
            if self.dpkg_i_fails:
                return 1, "", "dpkg: error: disk full"
            for deb in argv[2:]:
                name = Path(deb).name.split("_")[0]
                self.status.pop(name, None)
                if name in self.packages:
                    self.packages[name][1] = False  # dpkg -i selects the package for install: its hold is gone
            return 0, "", ""
        if tool == "sh" and "download" in argv[2]:
            folder = argv[4]
            for spec in argv[5:]:
                name, version = spec.split("=")
                Path(folder, f"{name}_{version.rstrip('*')}_amd64.deb").write_text("deb")
            return 0, "", ""
        if tool == "nvidia-ctk" and argv[1:3] == ["config", "default"]:
            return 0, '[nvidia-container-runtime]\nmode = "auto"\n', ""
        if tool == "apt-cache":
            return 0, "".join(f" {name} | {v} | file:/srv/r Packages\n" for name, versions in self.lists.items()
                              for v in versions), ""
        if argv[:2] == ["apt-get", "check"]:
            if self.status:
                return 100, "", "E: dpkg was interrupted, you must manually run 'dpkg --configure -a' to correct it."
            return 0, "Reading package lists...\n", ""
        if tool == "apt-get":
            if self.lock_busy:
                self.lock_busy -= 1
                return 100, "", "E: Could not get lock /var/cache/apt/archives/lock. It is held by process 42"
            if argv[1] == "update":
                self.lists = dict(self.offered)
                return 0, "", ""
            for spec in argv[2:]:
                if "=" in spec and not spec.startswith("Dpkg::"):
                    self.install(spec, "=")
                    self.packages[spec.split("=")[0]][1] = False  # apt drops the hold of what it names
            return 0, "", ""
        if tool == "apt-mark":
            for name in argv[2:]:
                self.packages[name][1] = argv[1] == "hold"
            return 0, "", ""
        if tool in ("dpkg", "rpm") and argv[1] in ("--verify", "-V"):
            return 0, self.broken.get(argv[2], ""), ""
        if tool == "rpm":
            out = "".join(f"{name}={self.packages[name][0]}\n" if name in self.packages
                          else f"package {name} is not installed\n" for name in argv[4:])
            return 0, out, ""
        if tool == self.pkg_mgr:
            args = [a for a in argv[1:] if not a.startswith("-")]
            if args[:2] == ["versionlock", "list"]:
                return 0, "".join(f"{name}-0:{self.packages[name][0]}.*\n" for name in sorted(self.locked)), ""
            if args[:2] == ["versionlock", "add"]:
                self.locked |= set(args[2:])
            elif args[:2] == ["versionlock", "delete"]:
                self.locked -= set(args[2:])
            elif args[0] in ("install", "reinstall"):
                for spec in args[1:]:
                    self.install(spec, "-")
            return 0, "", ""
        if tool == "nvidia-container-runtime":
            return 0, "NVIDIA Container Runtime version 1.17.8\n", ""
        raise AssertionError(f"unexpected command {argv}")


class FakeModule:
    def __init__(self, node, params, check_mode=False):
        self.node = node
        self.check_mode = check_mode
        self.params = {"nvidia_docker2_version": "2.14.0", "package": "auto", "hold": True, "repo_enabled": True,
                       "repo_base_url": "file:///srv/kgn-nvidia-repo", "repo_distribution": "",
                       "gpg_key_fingerprint": FPR, "pkg_mgr": node.pkg_mgr, "lock_timeout": 120,
                       "render_dir": None, "render_host": None, "observed": {}, "version": "1.17.8", **params}
        self.run_command_environ_update = {}
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)

    def get_bin_path(self, name):
        return f"/usr/bin/{name}" if self.node.has(name) else None

    def run_command(self, argv, data=None, check_rc=False):
        assert argv[0] == "timeout"
        return self.node(list(argv[2:]))

    def from_json(self, text):
        return json.loads(text)

    def exit_json(self, **result):
        raise Exit({**result, "failed": False})

    def fail_json(self, **result):
        raise Exit({**result, "failed": True})


@pytest.fixture
def root(tmp_path, monkeypatch):
    """Every path the module writes, moved under tmp_path; the key served by the fake download."""
    real_layout = toolkit.nvidia_repo_layout

    def layout(*args, **kwargs):
        result = real_layout(*args, **kwargs)
        for key in ("keyring", "apt_list_file", "yum_repo_file"):
            result[key] = str(tmp_path) + result[key]
        return result

    monkeypatch.setattr(toolkit, "nvidia_repo_layout", layout)
    monkeypatch.setattr(toolkit, "RPM_KEY_DIR", str(tmp_path / "etc/pki/rpm-gpg"))
    monkeypatch.setattr(toolkit, "CONFIG", str(tmp_path / "etc/nvidia-container-runtime/config.toml"))
    monkeypatch.setattr(module_under_test.time, "sleep", lambda seconds: None)
    served = {"key": f"-----BEGIN PGP PUBLIC KEY BLOCK-----\nKEY:{FPR}\n".encode()}
    downloads = []

    def fetch_url(module, url, timeout=30):
        downloads.append(url)
        return io.BytesIO(served["key"]), {"status": None, "msg": "OK"}

    # the module imports fetch_url when it downloads (a run that downloads nothing does not load ansible's urls)
    monkeypatch.setattr(urls, "fetch_url", fetch_url)
    return {"dir": tmp_path, "served": served, "downloads": downloads}


def run_module(monkeypatch, node, check_mode=False, **params) -> dict:
    fake = FakeModule(node, params, check_mode)
    monkeypatch.setattr(module_under_test.host, "NodeModule", lambda **spec: fake)
    with pytest.raises(Exit) as done:
        module_under_test.main()
    return {**done.value.result, "warnings": fake.warnings}


def changing(node) -> list:
    """The commands that change the node, in order (reads left out)."""
    reads = {"dockerd", "gpg", "dpkg-query", "apt-cache", "rpm", "nvidia-container-runtime", "nvidia-ctk"}
    calls = []
    for argv in node.calls:
        if argv[0] in reads and "--dearmor" not in argv:
            continue
        if argv[:2] in (["dpkg", "--verify"], ["dpkg", "--audit"], ["apt-get", "check"]) \
                or (argv[1:3] == ["-q", "versionlock"] and "list" in argv):
            continue
        calls.append(argv)
    return calls


def test_apt_first_run_second_run_and_repair(root, monkeypatch):
    node = FakeNode()
    node.lock_busy = 1
    first = run_module(monkeypatch, node)
    assert not first["failed"] and first["changed"], first.get("msg")
    tmp = root["dir"]
    seq = changing(node)
    assert seq[0][:5] == ["gpg", "--homedir", seq[0][2], "--batch", "--yes"]  # the keyring, dearmored
    assert seq[1][:2] == ["apt-get", "update"] and f"Dir::Etc::sourcelist={tmp}{LIST}" in seq[1]
    # the first apt-get meets another apt's lock: waited for and run again, not failed
    assert [argv[:2] for argv in seq if argv[0] == "apt-get"] == [["apt-get", "update"]] * 2 + [["apt-get", "install"]]
    installs = [argv for argv in seq if argv[:2] == ["apt-get", "install"]]
    assert installs[-1][-2:] == ["nvidia-container-toolkit=1.17.8*", "nvidia-container-toolkit-base=1.17.8*"]
    assert {"--no-install-recommends", "--allow-change-held-packages"} <= set(installs[-1])
    assert seq[-1] == ["apt-mark", "hold", "nvidia-container-toolkit", "nvidia-container-toolkit-base"]
    assert (tmp / KEY.lstrip("/")).read_bytes() == root["served"]["key"]
    assert oct(os.stat(tmp / KEY.lstrip("/")).st_mode & 0o777) == "0o644"
    assert "signed-by=" in (tmp / LIST.lstrip("/")).read_text()
    assert first["live"]["problems"] == [] and first["live"]["binary"]["executes"]
    assert first["ansible_facts"]["kgn_observed_nvidia_container_toolkit"]["pkg_mgr"] == "apt"
    assert first["plan"]["package"] == "nvidia-container-toolkit"

    node.calls.clear()
    root["downloads"].clear()
    second = run_module(monkeypatch, node)
    assert second["changed"] is False and changing(node) == [] and root["downloads"] == []
    assert second["diff"] == [] and second["repaired"] == []

    # /usr/bin/nvidia-container-runtime deleted by hand: found by dpkg --verify, reinstalled at its pin
    node.broken["nvidia-container-toolkit-base"] = "missing     /usr/bin/nvidia-container-runtime\n"
    node.calls.clear()
    check = run_module(monkeypatch, node, check_mode=True)
    assert check["changed"] is True and changing(node) == []
    assert check["would_repair"] == ["nvidia-container-toolkit-base=1.17.8-1"]
    # the record the role keeps (it registers nothing): check mode's would-repairs, as the driver's
    recorded = check["ansible_facts"]["kgn_state_nvidia_container_toolkit"]
    assert recorded["check_mode"] is True and recorded["repaired"] == check["would_repair"]
    assert check["live"]["binary"]["exists"] is False
    repaired = run_module(monkeypatch, node)
    assert repaired["changed"] is True
    assert repaired["repaired"] == [
        "nvidia-container-toolkit-base 1.17.8-1 reinstalled: /usr/bin/nvidia-container-runtime is missing"]
    assert repaired["warnings"] == ["repaired: " + repaired["repaired"][0]]  # what the run shows the user
    reinstall, hold = changing(node)[-2:]
    assert reinstall[:2] == ["apt-get", "install"] and "--reinstall" in reinstall
    assert reinstall[-1] == "nvidia-container-toolkit-base=1.17.8-1"
    assert hold == ["apt-mark", "hold", "nvidia-container-toolkit-base"]  # the reinstall dropped it
    assert node.packages["nvidia-container-toolkit-base"] == ["1.17.8-1", True]
    assert repaired["live"]["binary"]["executes"] is True and repaired["live"]["problems"] == []


def test_apt_check_mode_tells_the_truth_and_changes_nothing(root, monkeypatch):
    node = FakeNode()
    result = run_module(monkeypatch, node, check_mode=True)
    assert result["changed"] is True
    assert changing(node) == []
    assert not (root["dir"] / LIST.lstrip("/")).exists()
    assert any(w.startswith("install nvidia-container-toolkit=1.17.8*") for w in result["would"])
    assert any(w.startswith("hold ") for w in result["would"])
    headers = [d["before_header"] for d in result["diff"]]
    assert str(root["dir"]) + LIST in headers and "packages" in headers


def test_a_wrong_key_fails_before_anything_is_written(root, monkeypatch):
    root["served"]["key"] = b"KEY:AAAA\n"
    node = FakeNode()
    result = run_module(monkeypatch, node)
    assert result["failed"]
    assert result["msg"].startswith("The key at file:///srv/kgn-nvidia-repo/libnvidia-container/gpgkey has "
                                    "fingerprint(s) AAAA, not the pinned nvidia_container_toolkit_gpg_key_fingerprint")
    assert "Nothing was changed" in result["msg"]
    assert changing(node) == [] and not (root["dir"] / KEY.lstrip("/")).exists()


def test_apt_refreshes_when_the_lists_lack_the_pin_and_moves_held_packages(root, monkeypatch):
    node = FakeNode()
    run_module(monkeypatch, node)
    node.packages["nvidia-container-toolkit"] = ["1.14.6-1", True]
    node.packages["nvidia-container-toolkit-base"] = ["1.14.6-1", True]
    node.lists = {"nvidia-container-toolkit": ["1.14.6-1"]}  # lists older than the pin
    node.calls.clear()
    result = run_module(monkeypatch, node)
    seq = changing(node)
    assert [argv[:2] for argv in seq] == [["apt-get", "update"], ["apt-get", "install"], ["apt-mark", "hold"]]
    assert result["plan"]["moved"] == ["nvidia-container-toolkit", "nvidia-container-toolkit-base"]
    assert node.packages["nvidia-container-toolkit"] == ["1.17.8-1", True]


def test_unknown_package_manager_is_refused_with_nothing_changed(root, monkeypatch):
    node = FakeNode(pkg_mgr="zypper")
    result = run_module(monkeypatch, node)
    assert result["failed"] and "this host uses zypper. Nothing was changed" in result["msg"]
    assert node.calls == []


def test_rpm_sequence_with_docker_18_locks_and_repair(root, monkeypatch):
    node = FakeNode(pkg_mgr="dnf", docker="Docker version 18.09.7, build 2d0083d")
    node.offered = {"nvidia-container-toolkit": ["1.17.8-1"], "nvidia-container-toolkit-base": ["1.17.8-1"],
                    "nvidia-docker2": ["2.14.0-1"], "python3-dnf-plugin-versionlock": ["4.0.21-3"]}
    first = run_module(monkeypatch, node)
    assert not first["failed"], first.get("msg")
    assert first["plan"]["package"] == "nvidia-docker2"
    assert changing(node) == [
        ["dnf", "install", "-y", "python3-dnf-plugin-versionlock"],
        ["dnf", "install", "-y", "--refresh", "nvidia-container-toolkit-1.17.8", "nvidia-container-toolkit-base-1.17.8",
         "nvidia-docker2-2.14.0"],
        ["dnf", "versionlock", "add", "nvidia-container-toolkit", "nvidia-container-toolkit-base", "nvidia-docker2"],
    ]
    tmp = root["dir"]
    assert "[nvidia-container-toolkit]" in (tmp / REPO.lstrip("/")).read_text()
    assert (tmp / "etc/pki/rpm-gpg/kgn-nvidia-container-toolkit.asc").read_bytes() == root["served"]["key"]
    assert first["live"]["problems"] == []

    node.calls.clear()
    assert run_module(monkeypatch, node)["changed"] is False
    assert changing(node) == []

    # a new pin: the lock of the packages that move is released first, then they are installed and locked again
    node.offered["nvidia-container-toolkit"].insert(0, "1.18.0-1")
    node.offered["nvidia-container-toolkit-base"].insert(0, "1.18.0-1")
    node.broken["nvidia-docker2"] = "missing     /usr/bin/nvidia-docker\n"
    node.calls.clear()
    moved = run_module(monkeypatch, node, version="1.18.0")
    assert changing(node) == [
        ["dnf", "versionlock", "delete", "nvidia-container-toolkit", "nvidia-container-toolkit-base"],
        ["dnf", "install", "-y", "--refresh", "nvidia-container-toolkit-1.18.0", "nvidia-container-toolkit-base-1.18.0",
         "nvidia-docker2-2.14.0"],
        ["dnf", "versionlock", "add", "nvidia-container-toolkit", "nvidia-container-toolkit-base"],
        ["dnf", "reinstall", "-y", "nvidia-docker2-2.14.0-1"],
    ]
    assert moved["repaired"] == ["nvidia-docker2 2.14.0-1 reinstalled: /usr/bin/nvidia-docker is missing"]


def test_render_writes_the_planned_file_and_the_plan_without_touching_a_node(tmp_path, monkeypatch):
    node = FakeNode()
    out = tmp_path / "render"
    result = run_module(monkeypatch, node, render_dir=str(out), render_host="gpu1",
                        observed={"pkg_mgr": "yum", "docker_version": "18.09.7"})
    assert node.calls == [] and result["changed"] is True
    assert (out / "gpu1" / REPO.lstrip("/")).is_file()
    rendered = json.loads((out / "gpu1/_plan/nvidia_container_toolkit.json").read_text())
    assert rendered["package"] == "nvidia-docker2"
    failed = run_module(monkeypatch, node, render_dir=str(out), render_host="gpu2", observed={})
    assert failed["failed"] and "no package family is known for this host" in failed["msg"]


# --- package health, holds, the toolkit's config.toml ------------------------------------------------


def converged(monkeypatch, root) -> FakeNode:
    node = FakeNode()
    assert not run_module(monkeypatch, node)["failed"]
    node.calls.clear()
    return node


def test_an_interrupted_dpkg_of_our_packages_is_finished_put_back_and_held(root, monkeypatch):
    node = converged(monkeypatch, root)
    # what killing `apt-get install --reinstall` of the toolkit leaves (dpkg's own status letters)
    node.status = {"libnvidia-container1": "iFR", "libnvidia-container-tools": "iU"}
    node.packages["nvidia-container-toolkit-base"][1] = False  # the reinstall had dropped a hold too
    node.configure_fails = True  # dpkg --configure -a stops at the half-installed package
    result = run_module(monkeypatch, node)
    assert not result["failed"] and result["changed"], result.get("msg")
    seq = [argv[:3] for argv in changing(node)]
    assert seq[0] == ["dpkg", "--configure", "-a"]
    assert seq[1][:2] == ["sh", "-c"] and seq[2][:2] == ["dpkg", "-i"]
    assert ["apt-mark", "hold", "nvidia-container-toolkit-base"] in [argv[:3] for argv in changing(node)]
    assert node.status == {}
    words = " | ".join(result["repaired"])
    assert "reinstalled libnvidia-container-tools=1.17.8-1, libnvidia-container1=1.17.8-1" in words
    assert "hold of nvidia-container-toolkit-base re-applied (after the repair above)" in words
    assert any("dpkg --configure -a" in step for step in result["done"])
    assert result["live"]["health"]["consistent"] and result["live"]["problems"] == []
    node.calls.clear()
    again = run_module(monkeypatch, node)
    assert again["changed"] is False and changing(node) == []


def test_a_foreign_broken_package_is_left_alone_and_named(root, monkeypatch):
    node = converged(monkeypatch, root)
    node.status = {"libnvidia-container1": "iU"}
    monkeypatch.setattr(toolkit, "HEALTH_PACKAGES", (*toolkit.HEALTH_PACKAGES,))
    node_audit = node.__call__

    def with_foreign(argv):
        if argv[:2] == ["dpkg", "--audit"]:
            return 0, " libnvidia-container1 x\n postgresql-15 PostgreSQL\n", ""
        return node_audit(argv)

    monkeypatch.setattr(node, "__call__", with_foreign)
    fake = FakeModule(node, {})
    fake.run_command = lambda argv, data=None, check_rc=False: with_foreign(list(argv[2:]))
    monkeypatch.setattr(module_under_test.host, "NodeModule", lambda **spec: fake)
    with pytest.raises(Exit) as done:
        module_under_test.main()
    result = done.value.result
    assert result["failed"] and "postgresql-15 are not this role's packages" in result["msg"]
    assert result["msg"].endswith("Nothing was changed.") and changing(node) == []


def test_a_hold_released_by_hand_is_re_applied_and_said(root, monkeypatch):
    node = converged(monkeypatch, root)
    node.packages["nvidia-container-toolkit"][1] = False
    result = run_module(monkeypatch, node)
    assert result["changed"] and changing(node) == [["apt-mark", "hold", "nvidia-container-toolkit"]]
    assert result["repaired"] == ["hold of nvidia-container-toolkit re-applied (it had been released)"]


def test_a_deleted_config_toml_is_restored_from_nvidia_ctk_defaults_and_said(root, monkeypatch):
    node = converged(monkeypatch, root)
    config = Path(toolkit.CONFIG)
    assert config.read_text() == '[nvidia-container-runtime]\nmode = "auto"\n'  # the first install wrote it
    config.unlink()
    result = run_module(monkeypatch, node)
    assert result["changed"] and config.read_text() == '[nvidia-container-runtime]\nmode = "auto"\n'
    assert result["repaired"] == [f"{toolkit.CONFIG} was missing: written from `nvidia-ctk config default` "
                                  "(as the package's postinst does)"]
    assert result["live"]["config"]["exists"]
    assert run_module(monkeypatch, node)["changed"] is False


def test_a_failed_repair_says_what_ran_and_holds_again(root, monkeypatch):
    node = converged(monkeypatch, root)
    node.status = {"nvidia-container-toolkit-base": "iFR"}
    node.configure_fails = True
    node.dpkg_i_fails = True
    result = run_module(monkeypatch, node)
    assert result["failed"] and "Nothing was changed" not in result["msg"]
    assert "Done before this failed: dpkg --configure -a" in result["msg"]
    assert "(failed)" not in result["msg"] or "dpkg -i" in result["msg"]


def test_health_parsers_on_dpkg_and_rpm_output():
    status = pkghealth.parse_status("iFR|libnvidia-container1|1.20.0-1\niU |libnvidia-container-tools|1.20.0-1\n"
                                    "hi |nvidia-container-toolkit|1.20.0-1\nun |nvidia-docker2|\n")
    assert status["libnvidia-container1"] == {"abbrev": "iFR", "version": "1.20.0-1", "state": "half-configured",
                                              "reinstall": True}
    assert status["nvidia-container-toolkit"]["state"] == "" and not status["nvidia-docker2"]["state"]
    plan = pkghealth.health_plan("deb", {"status": status, "audit": [], "check": ["dpkg was interrupted"]},
                                 toolkit.HEALTH_PACKAGES, {"libnvidia-container1": "1.20.0"})
    assert not plan["consistent"] and plan["foreign"] == [] and plan["repair"]["configure"]
    assert plan["repair"]["reinstall"] == [{"name": "libnvidia-container-tools", "version": "1.20.0-1"},
                                           {"name": "libnvidia-container1", "version": "1.20.0-1"}]
    assert pkghealth.parse_apt_check(100, "E: Could not get lock /var/lib/dpkg/lock-frontend") == []
    rpm = pkghealth.parse_rpm_versions("nvidia-container-toolkit=1.17.8-1\nnvidia-container-toolkit=1.20.0-1\n")
    plan = pkghealth.health_plan("rpm", {"versions": rpm, "saved_transactions": []}, toolkit.HEALTH_PACKAGES,
                                 {"nvidia-container-toolkit": "1.20.0-1"})
    assert plan["repair"]["reinstall"] == [{"name": "nvidia-container-toolkit", "version": "1.20.0-1"}]
    saved = pkghealth.health_plan("rpm", {"versions": {}, "saved_transactions": ["/var/lib/yum/transaction-all.x"]},
                                  [], {})
    assert "yum-complete-transaction" in saved["refusal"]


def test_health_of_a_real_interrupted_reinstall():
    """The lab's fault, as dpkg and apt printed it (tests/unit/fixtures/dpkg-interrupted)."""
    folder = Path(__file__).parents[1] / "fixtures" / "dpkg-interrupted"
    check = (folder / "apt-get-check.txt").read_text()
    state = {"status": pkghealth.parse_status((folder / "dpkg-query-status.txt").read_text()),
             "audit": pkghealth.parse_audit((folder / "dpkg-audit.txt").read_text()),
             "check": pkghealth.parse_apt_check(int(check.rsplit("rc=", 1)[1]), check)}
    assert state["audit"] == ["libnvidia-container-tools", "nvidia-container-toolkit", "libnvidia-container1"]
    assert state["check"] == ["dpkg was interrupted, you must manually run 'dpkg --configure -a' to correct the "
                              "problem."]
    plan = pkghealth.health_plan("deb", state, toolkit.HEALTH_PACKAGES, {n: "1.20.0" for n in toolkit.HEALTH_PACKAGES})
    assert plan["broken"] == ["libnvidia-container-tools", "libnvidia-container1", "nvidia-container-toolkit"]
    assert "libnvidia-container1 1.20.0-1 is half-configured (iF)" in plan["problems"]
    assert "libnvidia-container-tools 1.20.0-1 is unpacked but not configured (iU)" in plan["problems"]
    assert plan["foreign"] == [] and plan["repair"]["configure"]
    assert [i["version"] for i in plan["repair"]["reinstall"]] == ["1.20.0-1"] * 3


# --- Ubuntu 26.04 and RHEL/Rocky/Alma 10 -------------------------------------------------------------------------


@pytest.mark.parametrize(("observed", "family"), [
    ({"pkg_mgr": "apt", "os": {"id": "ubuntu", "version_id": "26.04"}}, "deb"),
    ({"pkg_mgr": "dnf", "os": {"id": "rocky", "version_id": "10.0"}}, "rpm"),
    ({"pkg_mgr": "dnf5", "os": {"id": "almalinux", "version_id": "10.0"}}, "rpm"),
    ({"os_family": "RedHat"}, "rpm"),
])
def test_toolkit_1_20_on_ubuntu_26_04_and_el10_uses_nvidias_distribution_independent_repository(observed, family):
    result = host_plan({"nvidia_container_toolkit": {"version": "1.20.0"}},
                       {"nvidia_container_toolkit": {**observed, "docker_version": None}})["nvidia_container_toolkit"]
    assert result["family"] == family and result["era"] == "stable"
    if family == "deb":
        assert result["specs"] == ["nvidia-container-toolkit=1.20.0*", "nvidia-container-toolkit-base=1.20.0*"]
        assert result["files"][0]["content"].splitlines()[-1] == (
            "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
            "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /")
        return
    assert result["specs"] == ["nvidia-container-toolkit-1.20.0", "nvidia-container-toolkit-base-1.20.0"]
    # the section we write is NVIDIA's own (the experimental one, disabled there, is left out)
    ours = configparser.ConfigParser(interpolation=None)
    ours.read_string(result["files"][0]["content"])
    nvidia = configparser.ConfigParser(interpolation=None)
    nvidia.read(Path(__file__).parents[1] / "fixtures" / "nvidia-repo" / "nvidia-container-toolkit.repo")
    assert ours.sections() == ["nvidia-container-toolkit"]
    assert dict(ours["nvidia-container-toolkit"]) == dict(nvidia["nvidia-container-toolkit"])
    # dnf5 (Fedora 41+) has versionlock built in; dnf 4 needs its plugin
    assert result["versionlock_plugin"] == ("python3-dnf-plugin-versionlock" if observed.get("pkg_mgr") == "dnf"
                                            else "")


def test_only_other_packages_broken_is_said_and_not_in_the_way():
    status = pkghealth.parse_status("iU |nvidia-smi|550.163.01-2\nii |nvidia-container-toolkit|1.20.0-1\n")
    plan = pkghealth.health_plan("deb", {"status": status, "audit": ["nvidia-smi"], "check": ["dpkg was interrupted"]},
                                 toolkit.HEALTH_PACKAGES, {})
    assert plan["consistent"] and plan["refusal"] == "" and plan["repair"] == {"configure": False, "reinstall": []}
    assert "nvidia-smi" in plan["note"] and "not this role's packages" in plan["note"]
