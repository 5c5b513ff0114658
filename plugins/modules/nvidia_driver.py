#!/usr/bin/python
"""Install, pin, hold and check the NVIDIA driver in one call per node."""

DOCUMENTATION = r"""
---
module: nvidia_driver
short_description: Install, pin, hold, verify and repair the NVIDIA driver on a GPU node
description:
  - Reads the node once (os-release, architecture, the installed kernels with their headers and NVIDIA modules,
    DKMS's status, the driver packages dpkg or rpm has and holds, the versions the package lists offer, the apt
    source files, its own files, Secure Boot, the initramfs tools, nvidia-persistenced, the loaded kernel module
    and its flavour, and the GPUs), plans with the same code as the render (the nvidia_driver section of the host
    plan), and applies the plan; check mode reports what would change.
  - Warns (and records in RV(plan.warnings)) when the OS is past its vendor's end of life (with the date, the
    source and the current releases), when the branch is past NVIDIA's end of life, and when a kernel the next
    boot may use has no module of the driver that the run could not build.
  - Package sources (V(distro), V(cuda_repo)) with apt; adds only the apt components that no source of the node
    enables yet, refreshes the lists only when a source changed or something must be installed, installs the
    pinned packages, records every install in C(/var/log/kgn/nvidia_driver.log), pins the version for apt and
    holds the whole driver stack with one C(apt-mark) call. With dnf, NVIDIA's CUDA repository, the
    C(nvidia-driver) module stream and C(dnf versionlock).
  - The V(runfile) source runs the installer the role brought to C(/var/tmp) silently, once per version
    (stamp C(/var/lib/kgn/nvidia_driver_runfile.version)).
  - Live, every run, changed or not, the installed driver packages verify (C(dpkg --verify) / C(rpm -V)) and
    C(nvidia-smi) exists; a held package whose files are missing is reinstalled at its installed version and the
    run says so in RV(repaired). A loaded kernel module older than the installed driver asks for a reboot.
  - Refuses, before any change, a platform it does not know, a source or branch the platform does not have, a
    branch that cannot drive a GPU of the node, Secure Boot (unless the policy is V(continue)), a held driver
    that would move outside a planned upgrade, and (with O(existing=install)) package installs over a driver no
    package owns.
  - A driver no package of ours owns (a runfile, a vendor image, another tool) is adopted by default and kept
    as it is (nothing installed, moved or held), the module's package sources are removed, and the packages that
    would replace it are blocked (apt pin priority -1 in C(/etc/apt/preferences.d/kgn-nvidia-driver.pref);
    C(exclude=) in the [main] section of C(/etc/dnf/dnf.conf), or C(/etc/yum.conf) on EL 7). RV(plan.adopted)
    names it; the first run that adopts it says so as a warning.
  - With O(render_dir) it contacts no node; it plans from O(observed), which must name the node's OS, and writes
    the files under C(<render_dir>/<render_host>/<path>), with the plan in C(_plan/nvidia_driver.json).
extends_documentation_fragment:
  - kgn.gpu_nodes.render
options:
  source:
    description:
      - Where the driver comes from.
      - V(auto) decides from the node's OS and says which and why in RV(plan.source_choice) - the distribution's
        own packages (V(distro)) where the OS ships the driver (Debian, Ubuntu), NVIDIA's CUDA repository
        (V(cuda_repo)) where it ships none (RHEL, Rocky Linux, AlmaLinux, Oracle Linux, CentOS 7), as NVIDIA's
        driver installation guide documents. An explicit source is used as asked.
    type: str
    choices: [auto, distro, cuda_repo, runfile]
    default: auto
  branch:
    description:
      - Driver branch, for example V(580), or V(auto) for the newest branch NVIDIA still supports that the source
        offers and that drives every GPU of the node (the installed branch is kept when it drives them).
      - An explicit branch that cannot drive one of the node's GPUs is refused, naming the GPU and the first (or
        last) branch that drives it.
    type: str
    default: auto
  version:
    description: Exact upstream version to pin; empty keeps the installed version of the branch or takes the newest.
    type: str
    default: ''
  existing:
    description:
      - A driver already on the node. V(auto) adopts one that no package of ours owns and installs the packages
        otherwise; V(adopt) keeps whatever driver is there (and fails when there is none); V(install) manages
        the packages and refuses a driver no package owns.
    type: str
    choices: [auto, adopt, install]
    default: auto
  kernel_module:
    description:
      - Kernel module flavour. V(auto) takes the open modules for Turing and newer GPUs when the branch makes them
        NVIDIA's default (R560 and later) and whenever a GPU needs them (Blackwell, Grace Hopper), the proprietary
        modules for GPUs before Turing. An explicit flavour one of the node's GPUs cannot run with is refused.
    type: str
    choices: [proprietary, open, auto]
    default: auto
  hold:
    description: Hold (apt-mark hold / dnf versionlock) the driver stack and pin its version for apt.
    type: bool
    default: true
  allow_upgrade:
    description: Planned upgrade; release the holds, move the stack to the new version (downgrades allowed), hold again.
    type: bool
    default: false
  install_recommends:
    description: Install recommended (weak) dependencies.
    type: bool
    default: false
  debian_mirror:
    description: Debian mirror.
    type: str
    default: http://deb.debian.org/debian
  debian_security_mirror:
    description: Debian security mirror.
    type: str
    default: http://deb.debian.org/debian-security
  ubuntu_mirror:
    description: Ubuntu mirror.
    type: str
    default: http://archive.ubuntu.com/ubuntu
  ubuntu_security_mirror:
    description: Ubuntu security mirror.
    type: str
    default: http://security.ubuntu.com/ubuntu
  cuda_repo_base_url:
    description: Base URL of NVIDIA's CUDA repository (C(<base>/<distro>/<arch>/)) or its mirror.
    type: str
    default: https://developer.download.nvidia.com/compute/cuda/repos
  cuda_repo_key:
    description: Signing key file of the apt repository; empty takes the platform's (V(3bf863cc.pub)).
    type: str
    default: ''
  cuda_repo_key_rpm:
    description:
      - Signing key file of the rpm repository; empty takes the platform's (V(D42D0685.pub) on EL 7 to 9,
        V(CDF6BA43.pub) on EL 10).
    type: str
    default: ''
  runfile_url:
    description: http(s) URL of the .run installer (the role downloads it to C(/var/tmp)).
    type: str
    default: ''
  runfile_path:
    description: Path of the .run installer on the control host (the role copies it to C(/var/tmp)).
    type: str
    default: ''
  runfile_extra_args:
    description: Extra installer flags.
    type: list
    elements: str
    default: []
  kernel_headers:
    description:
      - Install the headers of every kernel the next boot may use (the running one when its modules are installed,
        and every other installed kernel with a boot image), so that DKMS builds the module for each; a kernel left
        without the module is built for (C(dkms autoinstall -k)) or reported with the exact commands.
    type: bool
    default: true
  blacklist_nouveau:
    description: Blacklist nouveau (the file is removed again when this is false).
    type: bool
    default: true
  initramfs_rebuild:
    description: Rebuild the initramfs when the blacklist changed.
    type: bool
    default: true
  persistenced_start:
    description: Start nvidia-persistenced (it is always enabled); never before the reboot a module change needs.
    type: bool
    default: true
  secure_boot_policy:
    description: What to do when Secure Boot is enabled.
    type: str
    choices: [fail, continue]
    default: fail
  gpu_facts:
    description: A gpu_facts result that replaces the GPUs the module would read (tests inject a Kepler GPU).
    type: dict
    default: {}
  observe_only:
    description: Only read the node (driver, ownership, packages, GPUs) and plan nothing; never changes anything.
    type: bool
    default: false
  observed:
    description:
      - What the node shows, for a render (the RV(observed) of an earlier run, or written in the inventory as
        C(kgn_observed_nvidia_driver)); C(os.id) and C(os.version_id) are required, what else is missing is
        assumed and the assumptions are returned in the plan.
    type: dict
    default: {}
notes:
  - Check mode and diff mode tell what would change; files, packages with their versions, holds, repairs and
    whether the kernel module would change (a reboot).
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Install, pin and hold the R535 driver from the distribution
  kgn.gpu_nodes.nvidia_driver:
    source: distro
    branch: "535"
  register: driver

- name: Read which driver the node has and who owns it
  kgn.gpu_nodes.nvidia_driver:
    observe_only: true
  register: driver_now
"""

RETURN = r"""
actions:
  description: What the run changed (or, in check mode, would change), in order.
  returned: when not rendering
  type: list
  elements: str
would_repair:
  description: In check mode, what a run would repair.
  returned: when not rendering
  type: list
  elements: str
disk:
  description: apt's "After this operation ..." line of the dry run.
  returned: when not rendering
  type: str
installs:
  description: The packages apt's dry run would install, upgrade or downgrade (dependencies included).
  returned: when not rendering
  type: list
  elements: str
plan:
  description: The nvidia_driver section of the host plan (platform, packages, target version, pinned specs, files,
    holds, refusals already applied, assumed).
  returned: unless observe_only
  type: dict
observed:
  description: What the module read on the node before any change (the input of the plan).
  returned: always
  type: dict
live:
  description:
    - What the node shows at the end; driver_loaded, kernel_module_version (/proc/driver/nvidia/version),
      nvidia_smi (path, answered, reason), packages (driver-stack package versions), holds, persistenced,
      verify (missing files per package), problems.
  returned: when not rendering
  type: dict
owned:
  description: False when a driver is on the node (loaded module or nvidia-smi) that no package owns (a runfile or
    a manual install); true otherwise.
  returned: always
  type: bool
repaired:
  description: What the run found broken and repaired (for example a reinstalled package whose files were missing).
  returned: always
  type: list
  elements: str
download:
  description: apt's "Need to get ..." line for the packages installed (or that would be), "" when nothing is.
  returned: always
  type: str
reboot_required:
  description: The kernel module changed (or the loaded module is older than the installed driver); reboot to load it.
  returned: always
  type: bool
gpu:
  description: GPU facts (the gpu_facts module's answer, or the injected O(gpu_facts)).
  returned: always
  type: dict
ansible_facts:
  description:
    - C(kgn_observed_nvidia_driver) (RV(observed)) and C(kgn_state_nvidia_driver) (RV(plan); RV(live) with C(gpu)
      and C(reboot_required); C(changed), C(check_mode), C(repaired); C(changes), what the run installed or would,
      with apt's download and disk numbers).
  returned: when not rendering and not observe_only
  type: dict
"""

import glob  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu as gpu_smi  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.change import recorded  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import driver_state as state  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import pkghealth  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver.driver import (  # noqa: E402
    EXISTING,
    FILES,
    INITRAMFS_PATHS,
    KERNEL_MODULES,
    NVIDIA_SMI,
    PIN_GLOBS,
    SOURCE_CHOICES,
    driver_packages,
    driver_plan,
    hold_changes,
    is_stack_package,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.gpu import gather as gather_gpus  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.nvidia import nvidia_upstream_version  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import devices  # noqa: E402

INPUTS = ("source", "existing", "branch", "version", "kernel_module", "hold", "allow_upgrade", "install_recommends",
          "debian_mirror", "debian_security_mirror", "ubuntu_mirror", "ubuntu_security_mirror", "cuda_repo_base_url",
          "cuda_repo_key", "cuda_repo_key_rpm", "runfile_url", "runfile_path", "runfile_extra_args", "kernel_headers",
          "blacklist_nouveau", "initramfs_rebuild", "persistenced_start", "secure_boot_policy")
EFI_SECURE_BOOT = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
APT_LISTS = ("/var/lib/apt/periodic/update-success-stamp", "/var/lib/apt/lists")
APT_LIST_MAX_AGE = 3600
# Hosts that share one archive folder (the lab) take turns on its lock: retry, do not fail.
LOCK_RETRIES = 60
LOCK_DELAY = 10
LOCKED = re.compile(r"Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock")
APT_OPTIONS = ["-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
               "-o", "DPkg::Lock::Timeout=60"]
OWN_FILES = ("distro_sources", "cuda_sources", "apt_pin", "blacklist", "cuda_yum_repo", "dnf_conf", "yum_conf")


class Failed(Exception):
    """A step that did not work; the message says what happened (the module fails with it)."""


# --- observe -----------------------------------------------------------------------------------------


def _secure_boot(module):
    rc, out, err = host.run(module, ["mokutil", "--sb-state"], timeout=20)
    if rc is not None and "SecureBoot" in (out + err):
        return "SecureBoot enabled" in (out + err)
    try:
        with open(EFI_SECURE_BOOT, "rb") as handle:
            data = handle.read()
        return bool(data) and data[-1] == 1
    except OSError:
        return False if not os.path.isdir("/sys/firmware/efi") else None


def _persistenced(module):
    _, out, _ = host.run(module, ["systemctl", "show", "nvidia-persistenced.service",
                                  "--property=LoadState,ActiveState,UnitFileState"], timeout=20)
    props = dict(line.split("=", 1) for line in (out or "").splitlines() if "=" in line)
    return {"loaded": props.get("LoadState") == "loaded", "active": props.get("ActiveState") == "active",
            "enabled": props.get("UnitFileState") in ("enabled", "enabled-runtime", "static", "alias")}


def _persistenced_now(module, observed, stale):
    """The persistenced unit as observed at the start of this call, read again when a step since may have installed
    or replaced it (``stale``) or none was observed."""
    return _persistenced(module) if stale or not observed.get("persistenced") else observed["persistenced"]


def _apt_sources():
    listed = glob.glob("/etc/apt/sources.list.d/*.list") + glob.glob("/etc/apt/sources.list.d/*.sources")
    paths = ["/etc/apt/sources.list", *sorted(listed)]
    return {path: text for path, text in ((p, host.read(p)) for p in paths) if text is not None}


def observe(module, inputs, gpu_facts):
    """Everything the plan needs, read once (a source the platform lacks is left to the plan to refuse)."""
    uname = os.uname()
    observed = {
        "os": state.os_release(host.read("/etc/os-release")),
        "architecture": uname.machine,
        "kernel": uname.release,
        "kernels": state.kernels(module),
        "secure_boot": _secure_boot(module),
        "initramfs_tools": sorted({os.path.basename(p) for p in INITRAMFS_PATHS if os.path.exists(p)}),
        "persistenced": _persistenced(module),
        "files": {FILES[name]: host.read(FILES[name]) for name in OWN_FILES},
        "cuda_keyring": os.path.exists(FILES["cuda_keyring"]),
        "runfile_installed": (host.read(FILES["runfile_stamp"]) or "").strip(),
        "gpu": gpu_facts or gather_gpus(module),
    }
    family = state.family(module)
    if family == "debian":
        observed["apt_sources"] = _apt_sources()
        versions = {n: v for n, v in state.dpkg_rows(module, PIN_GLOBS).items() if is_stack_package(n)}
    else:
        versions = {}
    # the driver on the node first: auto keeps the branch our packages installed
    observed["driver"] = state.driver_state(module, family, sorted(versions), observed["runfile_installed"], versions)
    try:
        basics = driver_packages(inputs, observed)
    except KgnError:
        # the plan raises it again unless it keeps a driver found on the node
        basics = None
    if basics and basics["source"] != "runfile":
        observed["packages"] = (state.apt_state(module, basics) if basics["family"] == "debian"
                                else state.rpm_state(module, basics))
        if basics["family"] == "redhat":
            stack = observed["packages"]["stack"]
            observed["driver"] = state.driver_state(module, family, stack, observed["runfile_installed"],
                                                    observed["packages"]["versions"])
    return observed


# --- commands ------------------------------------------------------------------------------------------


def apt(module, argv, timeout=3600):
    """apt-get/apt-mark, waiting while another apt holds the lock (hosts that share an archive folder)."""
    for _ in range(LOCK_RETRIES):
        rc, out, err = host.run(module, argv, timeout=timeout)
        if rc == 0 or not LOCKED.search((out or "") + (err or "")):
            return rc, out or "", err or ""
        time.sleep(LOCK_DELAY)
    return rc, out or "", err or ""


def _words(out, err, lines=4):
    said = [line for line in (err or out or "").splitlines() if line.startswith(("E:", "W:", "Error", "error"))]
    return " | ".join(said[:lines] or (err or out or "no output").strip().splitlines()[-lines:])


def _must(result, what):
    rc, out, err = result
    if rc != 0:
        raise Failed(f"{what} failed: {_words(out, err)}")
    return out


def log_event(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {text}\n")


def dry_run_report(text):
    """apt's "Need to get ..." and "After this operation ..." lines, and the packages it would install."""
    need = re.search(r"^Need to get [^\n]*", text or "", re.M)
    after = re.search(r"^After this operation[^\n]*", text or "", re.M)
    packages, section = [], False
    for line in (text or "").splitlines():
        if re.match(r"^The following (NEW )?packages will be (installed|upgraded|DOWNGRADED)", line):
            section = True
            continue
        if section and line.startswith("  "):
            packages.extend(line.split())
            continue
        section = False
    return {"download": need.group(0) if need else "", "disk": after.group(0) if after else "",
            "packages": sorted(set(packages))}


def lists_stale(sources):
    """Whether apt's lists are older than an hour, or older than one of the role's source files (written by a
    run that stopped before its refresh)."""
    stamps = [os.stat(p).st_mtime for p in APT_LISTS if os.path.exists(p)]
    if not stamps or time.time() - max(stamps) > APT_LIST_MAX_AGE:
        return True
    return bool(host.changed_since(sources, max(stamps)))


# --- verify and repair -----------------------------------------------------------------------------------


def verify_apt(module, versions):
    """{package: [missing paths]} of the driver stack: dpkg --verify (pkghealth.dpkg_verify, with its stat cache), and
    nvidia-smi where a package provides it."""
    missing = {}
    if not versions:
        return missing
    out = pkghealth.dpkg_verify(module, sorted(versions))
    paths = []
    for line in (out or "").splitlines():
        found = re.match(r"^missing\s+(c\s+)?(/.*)$", line)
        if found and not found.group(1):
            paths.append(found.group(2))
    if paths:
        _, out, _ = host.run(module, ["dpkg-query", "-S", *paths])
        for line in (out or "").splitlines():
            names, _, path = line.partition(": ")
            for name in names.split(","):
                name = name.split(":")[0].strip()
                if name in versions and path.strip() in paths:
                    missing.setdefault(name, []).append(path.strip())
    if not os.path.exists(NVIDIA_SMI):
        _, out, _ = host.run(module, ["dpkg-query", "-S", "*/nvidia-smi"])
        for line in (out or "").splitlines():
            names, _, path = line.partition(": ")
            if path.startswith("/usr/share/"):
                continue
            for name in names.split(","):
                name = name.split(":")[0].strip()
                if name in versions and NVIDIA_SMI not in missing.get(name, []):
                    missing.setdefault(name, []).append(NVIDIA_SMI)
    return missing


def verify_rpm(module, versions):
    missing = {}
    for name in sorted(versions):
        _, out, _ = host.run(module, ["rpm", "-V", name], timeout=120)
        for line in (out or "").splitlines():
            found = re.match(r"^missing\s+(c\s+)?(/.*)$", line)
            if found and not found.group(1):
                missing.setdefault(name, []).append(found.group(2))
    if not os.path.exists(NVIDIA_SMI):
        rc, out, _ = host.run(module, ["rpm", "-q", "--whatprovides", "--qf", "%{NAME}\n", NVIDIA_SMI])
        for name in (out or "").split() if rc == 0 else []:
            if name in versions and NVIDIA_SMI not in missing.get(name, []):
                missing.setdefault(name, []).append(NVIDIA_SMI)
    return missing


# --- the steps ----------------------------------------------------------------------------------------------


class Run:
    """One apply (or check) of the plan on the node: what it did, what it would do."""

    def __init__(self, module, inputs, observed, plan):
        self.module, self.inputs, self.observed, self.plan = module, inputs, observed, plan
        self.check = module.check_mode
        self.actions, self.repaired, self.diff = [], [], []
        self.download, self.disk, self.installs = "", "", []
        self.module_changed = False
        self.linked = []  # words for files written through a symlink (change.links): the state's changes

    @property
    def changed(self):
        return bool(self.actions or self.repaired)

    def did(self, text):
        self.actions.append(text)

    def files(self, paths):
        todo = change.pending([f for f in self.plan["files"] if f["path"] in paths])
        if todo:
            self.diff.extend(change.diff(todo))
            self.linked += change.links(todo, self.check)
            if not self.check:
                try:
                    change.write(todo)
                except change.ChangeFailed as err:
                    raise Failed(str(err)) from None
            found = self.plan.get("cuda_source_found")
            for item in todo:
                why = (f" ({found} already enables the CUDA repository: two entries with different keys would make "
                       "apt refuse every source)" if found and item["path"] == FILES["cuda_sources"] else "")
                self.did(f"{'removed' if item.get('content') is None else 'wrote'} {item['path']}{why}")
        return todo

    def reread_kernels(self):
        """The kernels (and packages) as they are now, after an install or a build: the plan's kernel part is
        planned again from them; the rest of the plan stays what this run did (the result reports it)."""
        observed = dict(self.observed)
        if self.plan["source"] != "runfile":
            read = state.apt_state if self.plan["family"] == "debian" else state.rpm_state
            observed["packages"] = {**read(self.module, self.plan), "refreshed": True}
        observed["kernels"] = self.observed["kernels"] = state.kernels(self.module)
        try:
            now = driver_plan(self.inputs, observed or {})
        except KgnError as err:
            raise Failed(str(err)) from None
        self.plan.update(kernels=now["kernels"], warnings=now["warnings"])

    def replan(self):
        try:
            self.plan = driver_plan(self.inputs, self.observed or {})
        except KgnError as err:
            raise Failed(str(err)) from None

    # common steps
    def dev_char_links(self):
        links = devices.missing_links(devices.nvidia_device_nodes())
        if links:
            if not self.check:
                devices.create_links(links)
            self.did(f"created /dev/char links for {len(links)} NVIDIA device node(s)")

    def keyring(self):
        ring = self.plan["cuda_keyring"]
        if ring["wanted"] and not os.path.exists(ring["path"]):
            self.did(f"fetched {self.plan['cuda_repo_key_url']} into {ring['path']}")
            self.linked += change.links([{"path": ring["path"], "content": "", "before": None}], self.check)
            if self.check:
                return
            # imported here: a run that downloads nothing (every run after the first) spares loading it
            from ansible.module_utils.urls import fetch_url

            resp, info = fetch_url(self.module, self.plan["cuda_repo_key_url"], timeout=60)
            if info.get("status") != 200 or resp is None:
                raise Failed(f"NVIDIA's CUDA repository key {self.plan['cuda_repo_key_url']} answered "
                             f"{info.get('status')} ({info.get('msg', '')}); fix nvidia_driver_cuda_repo_base_url / "
                             "nvidia_driver_cuda_repo_key or the mirror")
            text = resp.read().decode("utf-8", errors="surrogateescape")
            change.write([{"path": ring["path"], "content": text, "mode": "0644", "before": None}])
        elif not ring["wanted"] and os.path.exists(ring["path"]) and self.plan["family"] == "debian":
            if not self.check:
                os.unlink(ring["path"])
            self.did(f"removed {ring['path']}")

    def kernel_side(self):
        written = self.files([self.plan["blacklist"]])
        rebuild = self.plan["initramfs"]
        if written and rebuild["rebuild"] and rebuild["available"]:
            self.did(f"rebuilt the initramfs ({' '.join(rebuild['command'])})")
            if not self.check:
                _must(host.run(self.module, rebuild["command"], timeout=900), " ".join(rebuild["command"]))

    def persistenced(self):
        unit = self.observed["persistenced"] if self.check else _persistenced_now(self.module, self.observed,
                                                                                   self.changed)
        if not unit["loaded"] and not (self.check and self.plan["missing"]):
            return
        if not unit["enabled"]:
            self.did("enabled nvidia-persistenced")
            if not self.check:
                _must(host.run(self.module, ["systemctl", "enable", "nvidia-persistenced.service"]),
                      "systemctl enable nvidia-persistenced")
        # it needs the kernel module: not before the reboot a module change asks for
        if self.plan["persistenced"]["start"] and not unit["active"] and not self.module_changed:
            self.did("started nvidia-persistenced")
            if not self.check:
                _must(host.run(self.module, ["systemctl", "start", "nvidia-persistenced.service"], timeout=120),
                      "systemctl start nvidia-persistenced")

    def kernel_modules(self):
        """The module of the installed driver for every kernel the next boot may use: DKMS builds what is missing
        (read again after the install), and what cannot be built is said with its command, before any reboot."""
        plan = self.plan
        if plan["adopted"]:
            return
        if not self.check and (self.actions or plan["kernels"]["builds"]):
            self.reread_kernels()
        for kernel in plan["kernels"]["builds"]:
            self.did(f"built the NVIDIA module for kernel {kernel} (dkms autoinstall -k {kernel})")
            if not self.check:
                _must(host.run(self.module, ["dkms", "autoinstall", "-k", kernel], timeout=3600),
                      f"dkms autoinstall -k {kernel}")
                log_event(plan["event_log"], f"built the NVIDIA module for kernel {kernel}")
        if plan["kernels"]["builds"] and not self.check:
            self.reread_kernels()
            left = [k for k in self.plan["kernels"]["kernels"] if k["status"] in ("missing", "stale")]
            if left:
                raise Failed("; ".join(f"kernel {k['version']} still has no NVIDIA module of the driver after "
                                       f"the build: run {k['command']} and read its output" for k in left))

    def request_reboot(self):
        if self.module_changed and not self.check:
            log_event(self.plan["event_log"], f"reboot-requested: kernel module changed to {self.plan['target']}")

    # apt
    def apt_refresh(self, sources_changed):
        if sources_changed or lists_stale([FILES["distro_sources"], FILES["cuda_sources"], FILES["apt_pin"]]):
            self.did("refreshed the package lists")
            if self.check:
                return
            _must(apt(self.module, ["apt-get", "update", "-q"], timeout=900), "apt-get update")
        if not self.check:
            self.observed["packages"] = state.apt_state(self.module, self.plan)
            self.observed["packages"]["refreshed"] = True
            self.replan()

    def apt_install_argv(self, specs, extra=()):
        return (["apt-get", "install", "-y", "-q", *APT_OPTIONS]
                + ([] if self.plan["install_recommends"] else ["--no-install-recommends"]) + list(extra) + specs)

    def apt_packages(self):
        plan = self.plan
        headers = plan["kernels"]["headers_to_install"]
        if headers:
            self.did(f"installed {' '.join(headers)} (the headers DKMS builds the module against)")
            if not self.check:
                _must(apt(self.module, ["apt-get", "install", "-y", "-q", *APT_OPTIONS, "--no-install-recommends",
                                        *headers]), f"installing {' '.join(headers)}")
        if not plan["missing"]:
            return
        if plan["release"]:
            self.did(f"released the holds of {' '.join(plan['release'])} for the planned upgrade")
            if not self.check:
                _must(apt(self.module, ["apt-mark", "unhold", *plan["release"]]), "apt-mark unhold")
        if plan["target_exact"]:
            _, out, _ = host.run(self.module, ["apt-get", "-o", "Debug::NoLocking=1", "install", "--assume-no"]
                                    + ([] if plan["install_recommends"] else ["--no-install-recommends"])
                                    + (["--allow-downgrades"] if plan["allow_upgrade"] else []) + plan["specs"],
                                    timeout=300)
            report = dry_run_report(out)
            self.download, self.disk, self.installs = report["download"], report["disk"], report["packages"]
        self.diff.append({"before_header": "driver packages", "after_header": "driver packages",
                          "before": "".join(f"{p}\n" for p in plan["present"]) if "present" in plan else "",
                          "after": "".join(f"{s}\n" for s in plan["specs"])})
        self.did(f"installed {' '.join(plan['missing'])}")
        self.module_changed = plan["module_changes"]
        if self.check:
            return
        extra = ["--allow-downgrades"] if plan["allow_upgrade"] else []
        out = _must(apt(self.module, self.apt_install_argv(plan["specs"], extra)),
                    f"installing {' '.join(plan['specs'])}")
        if "Unpacking " in out or "Setting up " in out:
            log_event(plan["event_log"], f"installed {plan['version_package']}={plan['target']} "
                                         f"(was {plan['installed'] or 'absent'})")
        else:
            self.module_changed = False

    def apt_repair(self, versions):
        missing = verify_apt(self.module, versions)
        for name, paths in sorted(missing.items()):
            spec = f"{name}={versions[name]}"
            what = f"{name}: {', '.join(paths)} missing; {'would reinstall' if self.check else 'reinstalled'} {spec}"
            if not self.check:
                _must(apt(self.module, self.apt_install_argv([spec], ["--reinstall"])), f"reinstalling {spec}")
                log_event(self.plan["event_log"], f"reinstalled {spec} (missing {', '.join(paths)})")
                still = verify_apt(self.module, {name: versions[name]})
                if still:
                    raise Failed(f"reinstalling {spec} did not bring back {', '.join(still[name])}")
            self.repaired.append(what)
        return missing

    def apt_holds(self, reread):
        """One apt-mark call for the whole stack (as read again after an install or a repair)."""
        if self.check or not reread:
            marks = self.plan["hold_changes"]
        else:
            now = state.apt_state(self.module, self.plan)
            marks = hold_changes(now["stack"], now["held"], self.plan["hold"])
        for verb in ("hold", "unhold"):
            if marks[verb]:
                self.did(f"apt-mark {verb} {' '.join(marks[verb])}")
                self.diff.append({"before_header": f"apt-mark {verb}", "after_header": f"apt-mark {verb}",
                                  "before": "", "after": "".join(f"{p}\n" for p in marks[verb])})
                if not self.check:
                    _must(apt(self.module, ["apt-mark", verb, *marks[verb]]), f"apt-mark {verb}")

    def package_health(self):
        """A dpkg interrupted under the driver's packages: finished and put back at the versions dpkg recorded
        (module_utils/driver/pkghealth.py, shared with nvidia_container_toolkit); another package's breakage is named
        and left to the administrator. Each step is said (actions) before it runs."""
        names = [n for n in dict.fromkeys(self.plan["packages"] + list(self.observed["packages"].get("stack") or []))
                 if n]
        dpkg = pkghealth.read(self.module, "deb", names)
        ours = names + [n for n in [*dpkg["audit"], *dpkg["status"]] if is_stack_package(n)]
        health = pkghealth.health_plan("deb", dpkg, ours, {})
        if health["refusal"]:
            raise Failed(health["refusal"])
        if health["note"]:
            self.module.warn(health["note"])
        if health["consistent"]:
            return
        if self.check:
            self.repaired += [f"would repair: {problem}" for problem in health["problems"]]
            return
        try:
            self.repaired += pkghealth.repair(self.module, "deb", health, self.actions)
        except RuntimeError as err:
            raise Failed(str(err)) from None
        self.observed["packages"] = state.apt_state(self.module, self.plan)

    def apply_apt(self):
        self.package_health()
        self.dev_char_links()
        self.keyring()
        written = self.files([FILES["distro_sources"], FILES["cuda_sources"]])
        plan = self.plan
        if written or plan["missing"] or plan["headers_missing"] or not plan["target_exact"]:
            self.apt_refresh(bool(written))
        # pinned before installing: apt then resolves every dependency of the driver to the same version
        self.files([FILES["apt_pin"]])
        self.apt_packages()
        fresh = not self.check and bool(self.plan["missing"] or self.plan["headers_missing"])
        now = state.apt_state(self.module, self.plan) if fresh else self.observed["packages"]
        self.apt_repair(now.get("versions") or {})
        self.apt_holds(fresh or bool(self.repaired))

    # dnf
    def apply_dnf(self):
        self.dev_char_links()
        self.files([FILES["cuda_yum_repo"]])
        plan, module = self.plan, self.module
        tool = state.tool(module)
        headers = plan["kernels"]["headers_to_install"]
        if headers:
            self.did(f"installed {' '.join(headers)} (the headers DKMS builds the module against)")
            if not self.check:
                _must(host.run(module, [tool, "install", "-y", *headers], timeout=1800),
                      f"installing {' '.join(headers)}")
        if plan["branch_lock"] and plan["missing"] and not plan["locked"]:
            # EL 10 has no module streams: the branch is chosen by locking it before the install (NVIDIA's
            # kernel-modules table); the holds below lock the installed versions afterwards
            self.did(f"{tool} versionlock add {plan['branch_lock']}")
            if not self.check:
                _must(host.run(module, [tool, "versionlock", "add", plan["branch_lock"]], timeout=300),
                      f"{tool} versionlock add {plan['branch_lock']}")
        if plan["release"]:
            self.did(f"{tool} versionlock delete {' '.join(plan['release'])}")
            if not self.check:
                _must(host.run(module, [tool, "versionlock", "delete", *plan["release"]], timeout=300),
                      f"{tool} versionlock delete")
        if plan["missing"]:
            argv = [tool, "install", "-y"] + ([] if plan["install_recommends"] else
                                              ["--setopt=install_weak_deps=False"])
            argv += ([plan["dnf_module"]] if plan["dnf_module"] else []) + plan["specs"]
            self.did(f"installed {' '.join(plan['missing'])}")
            self.diff.append({"before_header": "driver packages", "after_header": "driver packages",
                              "before": "".join(f"{p}\n" for p in plan.get("present", [])),
                              "after": "".join(f"{s}\n" for s in plan["specs"])})
            self.module_changed = plan["module_changes"]
            if not self.check:
                _must(host.run(module, argv, timeout=3600), f"{tool} install {' '.join(plan['specs'])}")
                after = state.rpm_state(module, plan)
                self.module_changed = after["installed"] != plan["installed"]
                self.plan["target"] = after["installed"] or plan["target"]
                log_event(plan["event_log"], f"installed {plan['version_package']}={self.plan['target']} "
                                             f"(was {plan['installed'] or 'absent'})")
        now = self.observed["packages"] if self.check else state.rpm_state(module, plan)
        versions = now.get("versions") or {}
        for name, paths in sorted(verify_rpm(module, versions).items()):
            spec = f"{name}-{versions[name]}"
            verb = "would reinstall" if self.check else "reinstalled"
            self.repaired.append(f"{name}: {', '.join(paths)} missing; {verb} {spec}")
            if not self.check:
                _must(host.run(module, [tool, "reinstall", "-y", spec], timeout=1800), f"reinstalling {spec}")
                log_event(plan["event_log"], f"reinstalled {spec} (missing {', '.join(paths)})")
        for verb, key in (("add", "hold"), ("delete", "unhold")):
            patterns = plan["hold_changes"][key]
            if patterns:
                self.did(f"{tool} versionlock {verb} {' '.join(patterns)}")
                if not self.check:
                    _must(host.run(module, [tool, "versionlock", verb, *patterns], timeout=300),
                          f"{tool} versionlock {verb}")

    # a driver found on the node, kept as it is
    def apply_adopted(self):
        self.dev_char_links()
        self.keyring()
        written = self.files([f["path"] for f in self.plan["files"] if f["path"] != self.plan["blacklist"]])
        if written:
            adopted = self.plan["adopted"]
            where = adopted["library"] or adopted["nvidia_smi"] or "the loaded kernel module"
            self.module.warn(f"adopted: the NVIDIA driver {adopted['version'] or '(version unknown)'} on this node "
                             f"({where}) is owned by no package; it is kept as it is, and the packages that would "
                             "replace it are blocked. nvidia_driver_existing=install installs the packages instead "
                             "(after the driver is removed)")
            if not self.check:
                log_event(self.plan["event_log"], f"adopted the driver {adopted['version']} found on the node "
                                                  f"({where}); its replacements blocked")

    # runfile
    def apply_runfile(self):
        self.dev_char_links()
        run = self.plan["runfile"]
        if not run["due"]:
            return
        self.did(f"ran {run['installer']} {' '.join(run['args'])}")
        self.module_changed = True
        if self.check:
            return
        if not os.path.exists(run["installer"]):
            raise Failed(f"the installer {run['installer']} is not on the node (the role brings it there from "
                         "nvidia_driver_runfile_url or nvidia_driver_runfile_path before this module runs)")
        rc, out, err = host.run(self.module, ["sh", run["installer"], *run["args"]], timeout=3600)
        if rc != 0:
            raise Failed(f"{run['name']} {' '.join(run['args'])} failed (exit {rc}): {_words(out, err)}; see "
                         "/var/log/nvidia-installer.log on the node")
        change.write([{"path": run["stamp"], "content": run["target"] + "\n", "mode": "0644", "before": None}])
        log_event(self.plan["event_log"], f"installed {run['name']}={run['target']} "
                                          f"(was {run['installed'] or 'absent'})")


# --- live -----------------------------------------------------------------------------------------------------


def live_state(module, plan, observed, run, gpu_facts):
    family = plan["family"] if plan else ("debian" if module.get_bin_path("dpkg-query") else "redhat")
    if plan and plan["source"] != "runfile" and not (run and run.check) and (run is None or run.changed):
        packages = state.apt_state(module, plan) if family == "debian" else state.rpm_state(module, plan)
    else:
        packages = observed.get("packages") or {}
    proc = host.read(gpu_smi.PROC_VERSION) or ""
    gpu = gpu_facts or (observed.get("gpu") if run is None or not run.changed else gather_gpus(module))
    unit = _persistenced_now(module, observed, run is not None and run.changed)
    loaded = gpu_smi.kernel_module(proc)
    loaded_version = loaded["version"]
    kernels = (plan or {}).get("kernels") or {}
    live = {
        "driver_loaded": bool(proc),
        "kernel_module_version": loaded_version,
        # the flavour the node shows (/proc/driver/nvidia/version), never the one asked for
        "kernel_module": loaded["flavour"],
        "kernel_module_source": loaded["source"],
        "kernels": kernels.get("kernels") or [],
        "nvidia_smi": {"path": module.get_bin_path("nvidia-smi") or "", "answered": bool(gpu.get("driver_loaded")),
                       "reason": gpu.get("reason")},
        "packages": dict(packages.get("versions") or {}),
        "holds": sorted(p for p in packages.get("held") or [] if p in (packages.get("versions") or {})),
        "persistenced": unit,
        "problems": list(kernels.get("problems") or []),
    }
    live["reboot_pending"] = False
    if plan and plan.get("target_exact") and loaded_version and plan["target"]:
        wanted = nvidia_upstream_version(plan["target"]) if plan["source"] != "runfile" else plan["target"]
        if wanted != loaded_version:
            live["reboot_pending"] = True
            live["problems"].append(f"the loaded kernel module is {loaded_version}, the installed driver {wanted}: "
                                    "reboot to load it")
    return live, gpu


# --- main ---------------------------------------------------------------------------------------------------


def install_words(run, plan):
    """What the run installed (or in check mode would), with apt's download and disk numbers: the state's
    ``changes``, which the role prints and the report lists."""
    if not plan.get("missing"):
        return []
    verb = "would install" if run.check else "installed"
    sizes = " ".join(part for part in (run.download or "download size unknown", run.disk) if part)
    return [f"{verb} {plan['version_package']}={plan['target']}: {sizes}"]


def _summary(run, reboot):
    lines = list(run.actions) + [f"repair: {r}" for r in run.repaired]
    if run.download:
        lines.append(run.download)
    if reboot:
        lines.append("reboot needed: the kernel module changes")
    return {"prepared": "".join(f"{line}\n" for line in lines)} if lines else None


def main():
    module = host.NodeModule(
        argument_spec={
            "source": {"type": "str", "default": "auto", "choices": list(SOURCE_CHOICES)},
            "existing": {"type": "str", "default": "auto", "choices": list(EXISTING)},
            "branch": {"type": "str", "default": "auto"},
            "version": {"type": "str", "default": ""},
            "kernel_module": {"type": "str", "default": "auto", "choices": [*KERNEL_MODULES, "auto"]},
            "hold": {"type": "bool", "default": True},
            "allow_upgrade": {"type": "bool", "default": False},
            "install_recommends": {"type": "bool", "default": False},
            "debian_mirror": {"type": "str", "default": "http://deb.debian.org/debian"},
            "debian_security_mirror": {"type": "str", "default": "http://deb.debian.org/debian-security"},
            "ubuntu_mirror": {"type": "str", "default": "http://archive.ubuntu.com/ubuntu"},
            "ubuntu_security_mirror": {"type": "str", "default": "http://security.ubuntu.com/ubuntu"},
            "cuda_repo_base_url": {"type": "str", "default": "https://developer.download.nvidia.com/compute/cuda/repos"},
            "cuda_repo_key": {"type": "str", "default": ""},
            "cuda_repo_key_rpm": {"type": "str", "default": ""},
            "runfile_url": {"type": "str", "default": ""},
            "runfile_path": {"type": "str", "default": ""},
            "runfile_extra_args": {"type": "list", "elements": "str", "default": []},
            "kernel_headers": {"type": "bool", "default": True},
            "blacklist_nouveau": {"type": "bool", "default": True},
            "initramfs_rebuild": {"type": "bool", "default": True},
            "persistenced_start": {"type": "bool", "default": True},
            "secure_boot_policy": {"type": "str", "default": "fail", "choices": ["fail", "continue"]},
            "gpu_facts": {"type": "dict", "default": {}},
            "observe_only": {"type": "bool", "default": False},
            "render_dir": {"type": "path"},
            "render_host": {"type": "str"},
            "observed": {"type": "dict", "default": {}},
        },
        required_together=[("render_dir", "render_host")],
        supports_check_mode=True,
    )
    module.run_command_environ_update = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C",
                                         "DEBIAN_FRONTEND": "noninteractive"}
    p = module.params
    inputs = {key: p[key] for key in INPUTS}
    gpu_facts = p["gpu_facts"] or None

    if p["render_dir"]:
        observed = dict(p["observed"])
        if gpu_facts:
            observed["gpu"] = gpu_facts
        try:
            plan = driver_plan(inputs, observed or {})
        except KgnError as err:
            module.fail_json(msg=f"{err}. Nothing was rendered.")
        written = change.render(p["render_dir"], p["render_host"], plan["files"], plan, "nvidia_driver")
        host.say(module, assumed=plan["assumed"])
        for line in plan["warnings"]:
            module.warn(line)
        module.exit_json(changed=bool(written), plan=plan, observed=observed, repaired=[], download="",
                         reboot_required=False, owned=(observed.get("driver") or {}).get("owned", True),
                         gpu=observed.get("gpu") or {})

    try:
        observed = observe(module, inputs, gpu_facts)
    except KgnError as err:
        module.fail_json(msg=f"{err}. Nothing was changed.")
    owned = observed["driver"]["owned"]
    if p["observe_only"]:
        live, gpu = live_state(module, None, observed, None, gpu_facts)
        live["packages"] = live["packages"] or {}
        module.exit_json(changed=False, observed=observed, live=live, owned=owned, repaired=[], download="",
                         reboot_required=False, gpu=gpu)

    try:
        plan = driver_plan(inputs, observed or {})
    except KgnError as err:
        module.fail_json(msg=f"{err}. Nothing was changed.", owned=owned)

    run = Run(module, inputs, observed, plan)
    try:
        if plan["adopted"]:
            run.apply_adopted()
        elif plan["source"] == "runfile":
            run.apply_runfile()
        elif plan["family"] == "debian":
            run.apply_apt()
        else:
            run.apply_dnf()
        run.kernel_side()
        run.kernel_modules()
        run.persistenced()
        run.request_reboot()
    except (Failed, change.ChangeFailed) as err:  # ChangeFailed: a write refused (a symlink) or undone
        done = "; ".join(run.actions) if run.actions else ""
        module.fail_json(msg=f"{err}. " + (f"Done before that: {done}." if done else "Nothing was changed."),
                         owned=owned, changed=bool(run.actions), actions=run.actions, repaired=run.repaired)
    plan = run.plan
    for line in plan["warnings"]:
        module.warn(line)
    live, gpu = live_state(module, plan, observed, run, gpu_facts)
    reboot = run.module_changed or live["reboot_pending"]
    diff = list(run.diff)
    summary = _summary(run, run.module_changed)
    if summary:
        diff.append(summary)
    host.say(module, repaired=[] if run.check else run.repaired)
    # The role reads what it reports and whether it reboots from the facts, so it registers nothing (a registered
    # result would keep this whole answer for every node until the run ends).
    module.exit_json(changed=run.changed, plan=plan, observed=observed, live=live, owned=owned,
                     repaired=run.repaired if not run.check else [], would_repair=run.repaired if run.check else [],
                     actions=run.actions, download=run.download, disk=run.disk, installs=run.installs,
                     reboot_required=reboot, gpu=gpu, diff=diff,
                     ansible_facts=recorded("nvidia_driver", observed, plan,
                                            {**live, "gpu": gpu, "reboot_required": reboot}, run.changed,
                                            run.check, run.repaired, changes=install_words(run, plan) + run.linked))


if __name__ == "__main__":
    main()
