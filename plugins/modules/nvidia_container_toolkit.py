#!/usr/bin/python
"""Install the NVIDIA container toolkit from NVIDIA's repository (or a mirror): pinned, held, verified, live."""

DOCUMENTATION = r"""
---
module: nvidia_container_toolkit
short_description: Install the NVIDIA container toolkit (or nvidia-docker2) pinned and held, and keep it whole
description:
  - Reads the node in one pass (package manager, C(dockerd --version), the toolkit packages dpkg or rpm has and
    their holds or version locks, the signing key, keyring and repository file, C(dpkg --verify) or C(rpm -V) of
    the installed toolkit packages), plans with the same code as the render (the nvidia_container_toolkit
    section of the host plan), and does only what the plan says is missing.
  - "apt: downloads the key when missing or wrong (checked against O(gpg_key_fingerprint) when set), writes the
    binary keyring apt's C(signed-by) points at, writes the apt source, refreshes the lists only when one of them
    changed or a package to install is not offered, installs the unmet pinned packages
    (C(apt-get install name=version*), waiting while another apt holds the lock) and holds them (C(apt-mark hold))."
  - "dnf/yum: writes NVIDIA's .repo file, checks the keys its gpgkey URLs serve against a pinned fingerprint,
    installs the versionlock plugin when missing, releases the lock of packages that move to a new pin,
    installs and locks them."
  - Live, every run, the installed toolkit packages are verified; a package whose files are missing or altered
    (for example C(/usr/bin/nvidia-container-runtime) deleted by hand) is reinstalled at its pinned version and
    reported in RV(repaired). At the end C(nvidia-container-runtime --version) must execute.
  - With O(render_dir) it contacts no node; it plans from O(observed) (which must give C(pkg_mgr) or
    C(os_family)) and writes the apt source or the .repo file under C(<render_dir>/<render_host>/<path>), with
    the plan (package choice, pinned specs, what is unmet) in C(_plan/nvidia_container_toolkit.json).
extends_documentation_fragment:
  - kgn.gpu_nodes.render
options:
  version:
    description: Toolkit version to install and pin; also selects the repository layout.
    type: str
    required: true
  nvidia_docker2_version:
    description: nvidia-docker2 version, used only when the package is nvidia-docker2.
    type: str
    default: "2.14.0"
  package:
    description:
      - The package; V(auto) picks nvidia-docker2 for Docker older than 19.03 and nvidia-container-toolkit
        otherwise (P(kgn.gpu_nodes.docker_nvidia_package#filter)).
    type: str
    choices: [auto, nvidia-container-toolkit, nvidia-docker2]
    default: auto
  hold:
    description:
      - Hold the pinned packages (apt-mark hold; dnf/yum versionlock). V(false) releases holds and locks this
        module's packages have.
    type: bool
    default: true
  repo_enabled:
    description:
      - Configure NVIDIA's repository. V(false) removes the repository file this module wrote earlier (a file
        without its header is left alone).
    type: bool
    default: true
  repo_base_url:
    description: NVIDIA's site or a mirror keeping its paths (http(s) or file URL).
    type: str
    default: https://nvidia.github.io
  repo_distribution:
    description: NVIDIA's distribution name (ubuntu18.04, centos7), needed below toolkit 1.14.0.
    type: str
    default: ""
  gpg_key_fingerprint:
    description: Full fingerprint the repository key must have; empty skips the check.
    type: str
    default: ""
  pkg_mgr:
    description: The node's package manager (Ansible's pkg_mgr fact); V(auto) looks for apt-get, dnf5, dnf, yum.
    type: str
    default: auto
  lock_timeout:
    description: Seconds to wait for another apt or dpkg that holds the lock.
    type: int
    default: 120
  observed:
    description:
      - What the node shows, for a render (the RV(observed) of an earlier run, or written in the inventory as
        C(kgn_observed_nvidia_container_toolkit)); C(pkg_mgr) (apt, dnf, dnf5, yum) or C(os_family) (Debian,
        RedHat) is required, C(docker_version) decides the package (assumed 19.03 or later when missing).
    type: dict
    default: {}
notes:
  - Check mode and diff mode tell what would change (files, key, packages, holds, repairs); the key is downloaded
    and checked in check mode too, nothing is written.
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Install the NVIDIA container toolkit from the lab's mirror, key pinned
  kgn.gpu_nodes.nvidia_container_toolkit:
    version: "1.20.0"
    repo_base_url: file:///srv/kgn-nvidia-repo
    gpg_key_fingerprint: 0123456789ABCDEF0123456789ABCDEF01234567
    pkg_mgr: "{{ ansible_facts['pkg_mgr'] }}"
"""

RETURN = r"""
plan:
  description: >-
    The nvidia_container_toolkit section of the host plan (family, era, package and why, specs, unmet, moved,
    install, hold, lock, repair, repository key and keyring, files, assumed).
  returned: always
  type: dict
observed:
  description: What the module read on the node before any change (the input of the plan).
  returned: always
  type: dict
live:
  description: >-
    At the end (not in render mode): the packages, their verification, the binary's answer
    (C(nvidia-container-runtime --version)) and the problems left (none after a successful run).
  returned: when not rendering
  type: dict
repaired:
  description: Packages reinstalled in this run because files they own were missing or altered.
  returned: always
  type: list
would:
  description: In check mode, what a run would do.
  returned: check mode
  type: list
"""

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.change import recorded  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import pkghealth  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import toolkit  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.toolkit import toolkit_plan  # noqa: E402

CONCERN = "nvidia_container_toolkit"
APT_LOCKED = re.compile(r"Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock|"
                        r"is another process using it")
APT_NOT_OFFERED = re.compile(r"was not found|Unable to locate package|has no installation candidate")
# keep the node's version of a conffile (nvidia-docker2 ships /etc/docker/daemon.json), as the apt module does
APT_OPTIONS = ["-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
APT_INSTALL = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "--allow-change-held-packages",
               "--allow-downgrades", *APT_OPTIONS]
DETECT = (("apt-get", "apt"), ("dnf5", "dnf5"), ("dnf", "dnf"), ("yum", "yum"), ("zypper", "zypper"),
          ("apk", "apk"), ("pacman", "pacman"))


class Failed(Exception):
    """A step that did not succeed; the message says what and why, ``output`` is the tool's full output."""

    def __init__(self, message, output=""):
        super().__init__(message)
        self.output = output


def _words(out, err, limit=4):
    text = ((err or "") + "\n" + (out or "")).strip()
    found = host.errors_in(text.splitlines(), limit) or text.splitlines()[-limit:]
    return " | ".join(found)[:800]


# --- reading the node ------------------------------------------------------------------------------


class Gpg:
    """gpg with a throwaway home, so reading keys leaves no keybox or trustdb in root's home."""

    def __init__(self, module):
        self.module = module
        self.home = None

    def run(self, args):
        if self.home is None:
            self.home = tempfile.mkdtemp(prefix="kgn-gnupg-")
        return host.run(self.module, ["gpg", "--homedir", self.home, "--batch", *args], timeout=60)

    def fingerprints(self, path):
        """The fingerprints of the key(s) in ``path``; None without gpg; [] when gpg reads no key."""
        rc, out, _ = self.run(["--show-keys", "--with-colons", path])
        if rc is None:
            return None
        return toolkit.parse_fingerprints(out) if rc == 0 else []

    def fingerprints_of(self, data):
        if self.home is None:
            self.home = tempfile.mkdtemp(prefix="kgn-gnupg-")
        path = os.path.join(self.home, "downloaded.key")
        with open(path, "wb") as handle:
            handle.write(data)
        return self.fingerprints(path)

    def cleanup(self):
        if self.home:
            shutil.rmtree(self.home, ignore_errors=True)


def detect_pkg_mgr(module, given):
    if given and given != "auto":
        return given
    for tool, name in DETECT:
        if module.get_bin_path(tool):
            return name
    return "unknown"


def key_state(gpg, path, mode_matters=True):
    info = host.stat(os.path.realpath(path))  # a symlinked key: its target's mode (a link's own is 0777)
    if info is None or info["type"] != "file":
        return {"exists": False}
    state = {"exists": True, "fingerprints": gpg.fingerprints(path)}
    if mode_matters:
        state["mode"] = info["mode"]
    return state


def packages_on(module, family, pkg_mgr):
    if family == "deb":
        fmt = "${db:Status-Abbrev}|${Package}|${Version}\n"
        _, out, _ = host.run(module, ["dpkg-query", "-W", "-f", fmt, *toolkit.PACKAGES])
        return toolkit.parse_dpkg_query(out)
    plugin = toolkit.VERSIONLOCK_PLUGINS.get(pkg_mgr, "")
    names = [*toolkit.PACKAGES, plugin] if plugin else list(toolkit.PACKAGES)
    _, out, _ = host.run(module, ["rpm", "-q", "--qf", "%{NAME}=%{VERSION}-%{RELEASE}\n", *names])
    return toolkit.parse_rpm_query(out)


def locked_on(module, pkg_mgr, packages):
    plugin = toolkit.VERSIONLOCK_PLUGINS.get(pkg_mgr, "")
    if pkg_mgr != "dnf5" and plugin not in packages:
        return []
    rc, out, _ = host.run(module, [pkg_mgr, "-q", "versionlock", "list"], timeout=120)
    return toolkit.versionlock_names(out) if rc == 0 else []


def verify_on(module, family, packages):
    verify = {}
    for name in toolkit.PACKAGES:
        if name in packages:
            if family == "deb":
                out = pkghealth.dpkg_verify(module, [name])
            else:
                _, out, _ = host.run(module, ["rpm", "-V", name])
            verify[name] = toolkit.verify_problems(out)
    return verify


def observe(module, inputs, pkg_mgr, gpg):
    """What the plan reads, in one pass over the node."""
    family = toolkit.FAMILIES.get(pkg_mgr)
    observed = {"pkg_mgr": pkg_mgr}
    if family is None:
        return observed  # the plan refuses it, with today's message
    paths = toolkit.watched_paths(inputs, family)
    rc, out, err = host.run(module, ["dockerd", "--version"], timeout=20)
    observed["docker_version"] = host.version_of(out + err) if rc == 0 else None
    observed["files"] = {paths["source"]: host.read(paths["source"])}
    observed["packages"] = packages_on(module, family, pkg_mgr)
    if family == "deb":
        observed["key"] = key_state(gpg, paths["key"])
        observed["keyring"] = key_state(gpg, paths["keyring"])
        _, out, _ = host.run(module, ["apt-cache", "madison", *toolkit.PACKAGES])
        observed["available"] = toolkit.parse_madison(out)
    else:
        observed["locked"] = locked_on(module, pkg_mgr, observed["packages"])
        observed["rpm_keys"] = {path: key_state(gpg, path, mode_matters=False) for path in paths["rpm_keys"]}
    observed["verify"] = verify_on(module, family, observed["packages"])
    return observed


def binary_state(module):
    path = module.get_bin_path(toolkit.BINARY)
    if not path:
        return {"path": toolkit.BINARY, "exists": False, "executes": False, "version": "",
                "error": "not found in PATH"}
    rc, out, err = host.run(module, [toolkit.BINARY, "--version"], timeout=20)
    return {"path": path, "exists": True, "executes": rc == 0, "version": ((out or "").strip().splitlines() or [""])[0],
            "error": "" if rc == 0 else _words(out, err)}


def live_state(module, plan, binary):
    """The problems left: what the plan still wants, and whether the runtime binary executes."""
    problems = [f"{spec} is not installed" for spec in plan["unmet"]]
    problems += [f"{r['name']} {r['version']}: {'; '.join(r['problems'])}" for r in plan["repair"]]
    problems += [f"{name} is not held" for name in plan["hold"]]
    problems += [f"{name} is not version-locked" for name in plan["lock"]]
    if not binary["exists"]:
        problems.append(f"{binary['path']} is not installed (not in PATH)")
    elif not binary["executes"]:
        problems.append(f"{binary['path']} --version fails: {binary['error']}")
    return {"packages": plan["installed"], "binary": binary, "problems": problems}


# --- changing the node -----------------------------------------------------------------------------


def fetch(module, url):
    """The bytes at ``url``, downloaded on the node (file:// URLs too: urllib's file handler)."""
    # imported here: a run that downloads nothing (every run after the first) spares loading it
    from ansible.module_utils.urls import fetch_url

    resp, info = fetch_url(module, url, timeout=30)
    if resp is None or (info.get("status") != 200 and not url.startswith("file:")):
        raise Failed(f"downloading {url} failed: {info.get('msg') or info.get('status')}")
    return resp.read()


def checked_key(module, gpg, url, pin):
    """Download a key and check it against the pinned fingerprint (today's message when it differs)."""
    data = fetch(module, url)
    fprs = gpg.fingerprints_of(data)
    if fprs is None:
        raise Failed("gpg is missing on the node (it reads and dearmors NVIDIA's key): install gnupg")
    if not fprs:
        raise Failed(f"{url} serves no OpenPGP key gpg can read; check the URL or the mirror")
    if pin and pin not in fprs:
        raise Failed(
            f"The key at {url} has fingerprint(s) {', '.join(fprs)}, not the pinned "
            f"nvidia_container_toolkit_gpg_key_fingerprint {pin}. Check the mirror, or update the pin if NVIDIA "
            "rotated its key"
        )
    return data


def write_bytes(path, data, mode=0o644):
    change.write_file(path, data, mode)


def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def dearmor(gpg, key_path, keyring):
    temp = f"{change.target(keyring)}.kgn-new"  # beside a symlink's target, which change.replace replaces
    rc, out, err = gpg.run(["--yes", "--dearmor", "--output", temp, key_path])
    if rc != 0:
        if os.path.exists(temp):
            os.unlink(temp)
        raise Failed(f"gpg --dearmor {key_path} failed: {_words(out, err)}")
    os.chmod(temp, 0o644)
    change.replace(temp, keyring)


def run_ok(module, argv, what, timeout=900):
    rc, out, err = host.run(module, argv, timeout=timeout)
    if rc != 0:
        raise Failed(f"{what} failed ({' '.join(argv)}, rc {rc}): {_words(out, err)}")
    return out


def apt_get(module, argv, what, lock_timeout):
    """apt-get, waiting while another apt or dpkg holds the lock (apt does not wait for a lock held from
    another container sharing the archive cache, nor always for unattended-upgrades)."""
    deadline = time.monotonic() + lock_timeout
    while True:
        rc, out, err = host.run(module, argv, timeout=900)
        if rc == 0:
            return out
        if APT_LOCKED.search((err or "") + (out or "")) and time.monotonic() < deadline:
            time.sleep(6)
            continue
        raise Failed(f"{what} failed ({' '.join(argv)}, rc {rc}): {_words(out, err)}", (err or "") + (out or ""))


def apt_update(module, source, lock_timeout):
    """Refresh the lists of NVIDIA's source only (other lists stay as they are), or all of them without it."""
    argv = ["apt-get", "update", "-q"]
    if source and os.path.exists(source):
        argv += ["-o", f"Dir::Etc::sourcelist={source}", "-o", "Dir::Etc::sourceparts=-",
                 "-o", "APT::Get::List-Cleanup=0"]
    apt_get(module, argv, "refreshing the apt lists", lock_timeout)


class Run:
    """One apply (or check) of the plan; ``done`` says what was changed, in order."""

    def __init__(self, module, plan, observed, gpg):
        self.module = module
        self.plan = plan
        self.observed = observed
        self.gpg = gpg
        self.check = module.check_mode
        self.done = []
        self.repaired = []
        self.lists_refreshed = False
        self.linked = []  # words for files written through a symlink (change.links): the state's changes

    def act(self, what, action=None, path=None):
        # said before it runs: a step that fails midway may already have changed the node
        self.done.append(what)
        if path:  # a file written outside change.write
            self.linked += change.links([path], self.check)
        if not self.check and action is not None:
            try:
                action()
            except Failed:
                self.done[-1] = f"{what} (failed)"
                raise
            except change.ChangeFailed as err:  # a symlink that cannot be written through (change.target)
                self.done[-1] = f"{what} (failed)"
                raise Failed(str(err)) from None

    # deb
    def deb_key(self):
        """Download and check the key when planned; returns whether the key file's bytes change."""
        key = self.plan["repository"].get("key")
        if not key or not key["fetch"]:
            return False
        data = checked_key(self.module, self.gpg, key["url"], key["fingerprint"])
        if data == read_bytes(key["path"]) and (host.stat(os.path.realpath(key["path"])) or {}).get("mode") == "0644":
            return False
        self.act(f"write the key {key['path']} from {key['url']} ({key['why']})",
                 lambda: write_bytes(key["path"], data), key["path"])
        return True

    def deb_keyring(self, key_changed):
        repo = self.plan["repository"]
        ring = repo.get("keyring")
        if not ring or not (ring["write"] or key_changed):
            return False
        why = ring["why"] or "the key changed"
        self.act(f"write the keyring {ring['path']} (gpg --dearmor; {why})",
                 lambda: dearmor(self.gpg, repo["key"]["path"], ring["path"]), ring["path"])
        return True

    def files(self, todo):
        self.linked += change.links(todo, self.check)
        for item in todo:
            verb = "remove" if item.get("content") is None else "write"
            self.act(f"{verb} {item['path']}")
        if todo and not self.check:
            try:
                change.write(todo)
            except change.ChangeFailed as err:
                raise Failed(str(err)) from None

    def apt_refresh(self, why):
        self.act(f"refresh the apt lists ({why})",
                 lambda: apt_update(self.module, self._source(), self.module.params["lock_timeout"]))
        self.lists_refreshed = True

    def _source(self):
        files = self.plan["files"]
        return files[0]["path"] if files else None

    def apt_install(self, specs, what, reinstall=False):
        argv = APT_INSTALL + (["--reinstall"] if reinstall else []) + specs
        timeout = self.module.params["lock_timeout"]
        self.done.append(what)
        if self.check:
            return
        try:
            try:
                apt_get(self.module, argv, what, timeout)
            except Failed as err:
                if self.lists_refreshed or not APT_NOT_OFFERED.search(err.output):
                    raise
                # the lists are older than the pin: refresh once and try again
                self.apt_refresh("a package was not offered")
                apt_get(self.module, argv, what, timeout)
        except Failed:
            self.done[self.done.index(what)] = f"{what} (failed)"
            raise

    def deb(self, todo):
        key_changed = self.deb_key()
        ring_written = self.deb_keyring(key_changed)
        self.files(todo)
        plan = self.plan
        why = list(plan["refresh_why"])
        if key_changed:
            why.append("the key changed")
        if ring_written and not plan["repository"]["keyring"]["write"]:
            why.append("the keyring was written again")
        if todo and not any(item["path"] in reason for item in todo for reason in why):
            why.append(f"{', '.join(item['path'] for item in todo)} changed")
        if why:
            self.apt_refresh("; ".join(why))
        if plan["install"]:
            self.apt_install(plan["install"], f"install {', '.join(plan['install'])} ({plan['package_reason']})")
        for item in plan["repair"]:
            self.apt_install([item["spec"]], f"reinstall {item['spec']} ({'; '.join(item['problems'])})",
                             reinstall=True)
            self.repaired.append(f"{item['name']} {item['version']} reinstalled: {'; '.join(item['problems'])}")
        if plan["hold"]:  # after install and reinstall, which drop the holds of the packages they name
            if not plan["install"] and not plan["repair"]:
                why = "after the repair above" if self.repaired else "it had been released"
                self.repaired.append(f"hold of {', '.join(plan['hold'])} re-applied ({why})")
            self.act(f"hold {', '.join(plan['hold'])}",
                     lambda: run_ok(self.module, ["apt-mark", "hold", *plan["hold"]], "holding the packages"))
        if plan["unhold"]:
            self.act(f"release the hold of {', '.join(plan['unhold'])}",
                     lambda: run_ok(self.module, ["apt-mark", "unhold", *plan["unhold"]], "releasing the holds"))

    # rpm
    def rpm(self, todo):
        plan = self.plan
        mgr = plan["pkg_mgr"]
        for key in plan["repository"].get("keys", []):
            if key["fetch"]:
                data = checked_key(self.module, self.gpg, key["url"], key["fingerprint"])
                if data != read_bytes(key["path"]):
                    self.act(f"write the checked key {key['path']} ({key['why']})",
                             lambda key=key, data=data: write_bytes(key["path"], data), key["path"])
        self.files(todo)

        def run(argv, what):
            self.act(what, lambda: run_ok(self.module, argv, what))


        if plan["versionlock_plugin"]:
            run([mgr, "install", "-y", plan["versionlock_plugin"]], f"install {plan['versionlock_plugin']}")
        if plan["release"]:
            run([mgr, "versionlock", "delete", *plan["release"]], f"release the lock of {', '.join(plan['release'])}")
        if plan["install"]:
            what = f"install {', '.join(plan['install'])} ({plan['package_reason']})"
            if mgr == "yum":
                run(["yum", "-y", "clean", "expire-cache"], "expire yum's metadata (the pin may be newer)")
                run(["yum", "install", "-y", *plan["install"]], what)
            else:
                run([mgr, "install", "-y", "--refresh", *plan["install"]], what)
        if plan["lock"]:
            run([mgr, "versionlock", "add", *plan["lock"]], f"lock {', '.join(plan['lock'])}")
        if plan["unlock"]:
            run([mgr, "versionlock", "delete", *plan["unlock"]], f"release the lock of {', '.join(plan['unlock'])}")
        for item in plan["repair"]:
            run([mgr, "reinstall", "-y", item["spec"]], f"reinstall {item['spec']} ({'; '.join(item['problems'])})")
            self.repaired.append(f"{item['name']} {item['version']} reinstalled: {'; '.join(item['problems'])}")


def package_diff(plan, observed):
    """A --diff entry for the packages: installed and held before, what the plan leaves after."""
    packages = observed.get("packages") or {}
    locked = observed.get("locked") or []
    if not any(plan[key] for key in ("install", "hold", "unhold", "release", "lock", "unlock", "repair")):
        return []

    def held_now(name):
        return name in locked if plan["family"] == "rpm" else (packages.get(name) or {}).get("held")

    repaired = [item["name"] for item in plan["repair"]]
    before = "".join(f"{name} {packages[name]['version']}{' (held)' if held_now(name) else ''}\n"
                     for name in plan["names"] if name in packages)
    after = "".join(f"{spec}{' (held)' if plan['hold_wanted'] else ''}{' (reinstalled)' if name in repaired else ''}\n"
                    for name, spec in zip(plan["names"], plan["specs"]))
    return [{"before_header": "packages", "after_header": "packages", "before": before, "after": after}]


def main():
    module = host.NodeModule(
        argument_spec={
            "version": {"type": "str", "required": True},
            "nvidia_docker2_version": {"type": "str", "default": "2.14.0"},
            "package": {"type": "str", "default": "auto", "choices": list(toolkit.PACKAGE_CHOICES)},
            "hold": {"type": "bool", "default": True},
            "repo_enabled": {"type": "bool", "default": True},
            "repo_base_url": {"type": "str", "default": "https://nvidia.github.io"},
            "repo_distribution": {"type": "str", "default": ""},
            "gpg_key_fingerprint": {"type": "str", "default": "", "no_log": False},
            "pkg_mgr": {"type": "str", "default": "auto"},
            "lock_timeout": {"type": "int", "default": 120},
            "render_dir": {"type": "path"},
            "render_host": {"type": "str"},
            "observed": {"type": "dict", "default": {}},
        },
        required_together=[("render_dir", "render_host")],
        supports_check_mode=True,
    )
    module.run_command_environ_update = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C", "LANG": "C"}
    p = module.params
    inputs = {key: p[key] for key in toolkit.INPUT_KEYS}
    gpg = Gpg(module)
    try:
        execute(module, p, inputs, gpg)
    finally:
        gpg.cleanup()


def health_of(module, plan):
    """The package manager's consistency for the toolkit's packages (pkghealth), planned against the pins."""
    state = pkghealth.read(module, plan["family"], list(toolkit.HEALTH_PACKAGES))
    return pkghealth.health_plan(plan["family"], state, toolkit.HEALTH_PACKAGES, toolkit.health_pins(plan))


def rehold(module, work, plan):
    """After a failure: hold again what the plan holds and apt dropped (install and reinstall name the packages
    again, dpkg -i sets them to install). Said in ``done``; a failure here is said, not raised."""
    if plan["family"] != "deb" or not plan["hold_wanted"] or module.check_mode:
        return
    packages = packages_on(module, "deb", plan["pkg_mgr"])
    loose = [name for name in plan["names"] if name in packages and not packages[name]["held"]]
    if loose:
        rc, out, err = host.run(module, ["apt-mark", "hold", *loose])
        work.done.append(f"hold {', '.join(loose)} again after the failure" + ("" if rc == 0 else
                         f" (failed: {_words(out, err)})"))


def _failed(module, work, plan, observed, diff, facts, message):
    rehold(module, work, plan)
    if not work.done:
        message = _nothing_changed(message)
    else:
        message = f"{message.rstrip('.')}. Done before this failed: {'; '.join(work.done)}"
    module.fail_json(msg=message, changed=bool(work.done and not module.check_mode), plan=plan,
                     observed=observed, done=work.done, repaired=work.repaired, diff=diff, ansible_facts=facts)


def restore_config(module, work, installed_before):
    """Write the toolkit's config.toml when the toolkit is installed and the file is missing (config_restore)."""
    text = host.read(toolkit.CONFIG)
    if text is not None:
        return
    packages = packages_on(module, work.plan["family"], work.plan["pkg_mgr"]) if not module.check_mode \
        else work.observed.get("packages") or {}
    rc, default, _ = host.run(module, ["nvidia-ctk", "config", "default"], timeout=30)
    restore = toolkit.config_restore(None, default if rc == 0 else "", packages,
                                     "nvidia-container-toolkit-base" not in installed_before)
    if not restore["write"]:
        if restore["why"]:
            raise Failed(restore["why"])
        return
    work.act(f"write {toolkit.CONFIG} ({restore['why']})",
             lambda: change.write_file(toolkit.CONFIG, restore["content"], 0o644), toolkit.CONFIG)
    if restore["repair"]:
        work.repaired.append(restore["why"])


def _nothing_changed(message):
    return message if "Nothing was changed" in message else f"{message.rstrip('.')}. Nothing was changed."


def execute(module, p, inputs, gpg):
    rendering = bool(p["render_dir"])
    try:
        observed = p["observed"] if rendering else observe(module, inputs, detect_pkg_mgr(module, p["pkg_mgr"]), gpg)
        plan = toolkit_plan(inputs, observed or {})
    except KgnError as err:
        module.fail_json(msg=_nothing_changed(str(err)), observed=p["observed"] if rendering else {})
    if rendering:
        written = change.render(p["render_dir"], p["render_host"], plan["files"], plan, CONCERN)
        host.say(module, assumed=plan["assumed"])
        module.exit_json(changed=bool(written), plan=plan, observed=observed, repaired=[], diff=[])

    facts = {f"kgn_observed_{CONCERN}": observed}
    work = Run(module, plan, observed, gpg)
    health = health_of(module, plan)
    if health["refusal"]:
        module.fail_json(msg=_nothing_changed(f"The NVIDIA container toolkit was not touched: {health['refusal']}"),
                         plan=plan, observed=observed, health=health, ansible_facts=facts)
    if health["note"]:
        module.warn(health["note"])
    if not health["consistent"] and not module.check_mode:
        # first: apt-get refuses to install anything while dpkg is interrupted
        try:
            work.repaired += pkghealth.repair(module, plan["family"], health, work.done, plan["pkg_mgr"] or "dnf")
        except RuntimeError as err:
            _failed(module, work, plan, observed, [], facts, f"repairing the package manager's state: {err}")
        observed = observe(module, inputs, plan["pkg_mgr"], gpg)
        plan = toolkit_plan(inputs, observed or {})
        work.plan, work.observed = plan, observed
        left = health_of(module, plan)
        if not left["consistent"]:
            _failed(module, work, plan, observed, [], facts,
                    f"the package manager is still not consistent after the repair: {'; '.join(left['problems'])}")
    todo = change.pending(plan["files"] + plan["remove"])
    diff = change.diff(todo) + package_diff(plan, observed)
    installed_before = dict(observed.get("packages") or {})
    try:
        if plan["family"] == "deb":
            work.deb(todo)
        else:
            work.rpm(todo)
        restore_config(module, work, installed_before)
    except Failed as err:
        _failed(module, work, plan, observed, diff, facts, str(err))

    if module.check_mode:
        live = live_state(module, plan, binary_state(module))
        would_repair = [r["spec"] for r in plan["repair"]] + health["problems"]
        module.exit_json(changed=bool(work.done), plan=plan, observed=observed, live=live, repaired=[],
                         would=work.done, would_repair=would_repair, diff=diff, health=health,
                         ansible_facts=recorded(CONCERN, observed, plan, live, bool(work.done), True, would_repair,
                                                work.linked))

    # what the node shows now, through the same plan: nothing may be left to do
    after = toolkit_plan(inputs, observe(module, inputs, plan["pkg_mgr"], gpg)) if work.done else plan
    live = live_state(module, after, binary_state(module))
    live["health"] = health_of(module, after) if work.done else health  # nothing ran since it was read
    live["config"] = {"path": toolkit.CONFIG, "exists": host.read(toolkit.CONFIG) is not None}
    if not live["health"]["consistent"]:
        live["problems"] += live["health"]["problems"]
    if live["problems"]:
        module.fail_json(
            msg=f"The NVIDIA container toolkit is not whole after this run: {'; '.join(live['problems'])}. "
                f"Done: {'; '.join(work.done) or 'nothing'}. Reinstall the package that ships "
                f"{toolkit.BINARY} ({', '.join(plan['names'])}) and look at the package manager's log.",
            changed=bool(work.done), plan=plan, observed=observed, live=live, repaired=work.repaired, diff=diff,
            ansible_facts=facts)
    host.say(module, repaired=work.repaired, linked=work.linked)
    module.exit_json(changed=bool(work.done), plan=plan, observed=observed, live=live, repaired=work.repaired,
                     done=work.done, diff=diff,
                     ansible_facts=recorded(CONCERN, observed, after, live, bool(work.done), False, work.repaired,
                                            work.linked))


if __name__ == "__main__":
    main()
