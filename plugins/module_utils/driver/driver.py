"""NVIDIA driver decisions: platform, packages, version, pins, holds, files, and what is refused.

Pure functions over plain data (no I/O), used by the nvidia_driver module on the node and by the render
on the controller. ``driver_plan(inputs, observed)`` is the nvidia_driver section of the host plan.

Package names per platform: packages.debian.org (nvidia-graphics-drivers), packages.ubuntu.com
(nvidia-graphics-drivers-<branch>-server), NVIDIA's CUDA repositories and its kernel-modules guide
(dnf module streams <branch>-dkms / <branch>-open, the open modules from R515 for Turing and newer).
"""

import fnmatch
import functools
import os
import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import lifecycle
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver.driver_choice import (
    AUTO,
    SOURCES,
    adopted_choice,
    choose_branch,
    choose_flavour,
    choose_source,
    gpu_needs,
    os_words,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver.driver_kernels import kernel_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.nvidia import (
    driver_version_matches,
    nvidia_apt_missing_components,
    nvidia_apt_unmet,
    nvidia_pin_package,
    nvidia_upstream_version,
)

HEADER = "# Written by kube-gpu-nodes (nvidia_driver).\n"
# nvidia_driver_source: auto (the default: the OS's own packages where it ships the driver, NVIDIA's CUDA repository
# where it ships none; driver_choice.choose_source), or one of SOURCES (imported from driver_choice).
SOURCE_CHOICES = (AUTO, *SOURCES)
KERNEL_MODULES = ("proprietary", "open")
# Every branch NVIDIA's lifecycle page names, and the ones after it seen in NVIDIA's repositories (590, 620):
# what the CUDA repository can offer (driver_choice picks among them by lifecycle and GPU).
KNOWN_BRANCHES = sorted(set(lifecycle.BRANCHES) | set(lifecycle.ENDED) | {"590", "620"}, key=int)
# What to do with a driver already on the node: adopt one no package of ours owns (auto), always keep what
# is there (adopt), or always install the packages (install).
EXISTING = ("auto", "adopt", "install")

# Every platform the role installs on, keyed "<distribution>-<major version>". Debian has one driver
# branch per release (bookworm R535, trixie R550); Ubuntu ships several -server branches, each in the
# archive component it is published in; RHEL uses NVIDIA's CUDA repository (dnf module streams on EL 8
# and 9, a versionlock on the branch on EL 10, which has no modules). Sources: docs/driver-branches.md.
_DEBIAN_PACKAGES = {
    # libcuda1 and the PTX JIT are only Recommends of nvidia-driver, but containers need them (the
    # container toolkit mounts the host's libcuda): named explicitly for --no-install-recommends.
    "proprietary": ["nvidia-driver", "nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ptxjitcompiler1",
                    "nvidia-persistenced"],
    "open": ["nvidia-driver", "nvidia-open-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ptxjitcompiler1",
             "nvidia-persistenced"],
}
_UBUNTU_PACKAGES = {
    # Datacenter (-server) headless packages: no X stack. -open for the open kernel modules.
    "proprietary": ["nvidia-headless-{branch}-server", "nvidia-utils-{branch}-server",
                    "nvidia-compute-utils-{branch}-server"],
    "open": ["nvidia-headless-{branch}-server-open", "nvidia-utils-{branch}-server",
             "nvidia-compute-utils-{branch}-server"],
}
_APT_CUDA_PACKAGES = {"proprietary": ["cuda-drivers-{branch}"], "open": ["nvidia-open-{branch}"]}
# From branch 590 NVIDIA's Ubuntu packages drop the branch from their names (driver installation guide,
# "Recent Updates": "Ubuntu 590 and later packages"); the apt pin holds the branch and version.
_APT_CUDA_PACKAGES_590 = {"proprietary": ["cuda-drivers"], "open": ["nvidia-open"]}
CUDA_UNSUFFIXED_FROM = 590
_RPM_CUDA_PACKAGES = {"proprietary": ["nvidia-driver", "nvidia-driver-cuda", "nvidia-persistenced"],
                      "open": ["nvidia-open", "nvidia-driver-cuda", "nvidia-persistenced"]}
# The driver's components: the non-free ones in non-free, firmware-nvidia-gsp in non-free-firmware,
# nvidia-persistenced and nvidia-open-kernel-dkms in contrib.
_DEBIAN_COMPONENTS = ["contrib", "non-free", "non-free-firmware"]
# The -server source packages per Ubuntu release and the archive component each is in (packages.ubuntu.com,
# source pages nvidia-graphics-drivers-<branch>-server of each suite). On 22.04 and 24.04 R595 is published in
# multiverse; on 26.04 in restricted. 535-server and 570-server on 26.04 are transitional packages of 580-server.
_RESTRICTED = ["restricted"]
_UBUNTU_BRANCHES = {
    "focal": {"535": _RESTRICTED, "550": _RESTRICTED, "570": _RESTRICTED, "580": _RESTRICTED},
    "jammy": {"535": _RESTRICTED, "550": _RESTRICTED, "570": _RESTRICTED, "580": _RESTRICTED, "590": _RESTRICTED,
              "595": ["multiverse"]},
    "noble": {"535": _RESTRICTED, "550": _RESTRICTED, "570": _RESTRICTED, "580": _RESTRICTED, "590": _RESTRICTED,
              "595": ["multiverse"]},
    "resolute": {"580": _RESTRICTED, "595": _RESTRICTED},
}


def _debian(codename: str, branch: str, cuda_distro: str, cuda_first: str) -> dict:
    return {
        "family": "debian", "codename": codename, "mirror": "debian",
        "suites": [codename, f"{codename}-updates", f"{codename}-security"],
        "distro_branches": {branch: _DEBIAN_COMPONENTS}, "distro_packages": _DEBIAN_PACKAGES,
        "version_package": "nvidia-driver",
        # built from another source package, so it has its own version: installed unpinned
        "unpinned_packages": ["nvidia-persistenced"],
        "keyring": "/usr/share/keyrings/debian-archive-keyring.gpg",
        "cuda_repo_distro": cuda_distro, "cuda_repo_packages": _APT_CUDA_PACKAGES, "cuda_repo_first_branch": cuda_first,
        "cuda_repo_key": "3bf863cc.pub",
        "headers_package": "linux-headers-{kernel}", "initramfs_command": ["update-initramfs", "-u"],
    }


def _ubuntu(codename: str, cuda_distro: str, cuda_first: str) -> dict:
    return {
        "family": "debian", "codename": codename, "mirror": "ubuntu",
        "suites": [codename, f"{codename}-updates", f"{codename}-security"],
        "distro_branches": _UBUNTU_BRANCHES[codename], "distro_packages": _UBUNTU_PACKAGES,
        "version_package": "nvidia-utils-{branch}-server", "unpinned_packages": [],
        "keyring": "/usr/share/keyrings/ubuntu-archive-keyring.gpg",
        "cuda_repo_distro": cuda_distro, "cuda_repo_packages": _APT_CUDA_PACKAGES, "cuda_repo_first_branch": cuda_first,
        "cuda_repo_key": "3bf863cc.pub", "cuda_unsuffixed_from": CUDA_UNSUFFIXED_FROM,
        "headers_package": "linux-headers-{kernel}", "initramfs_command": ["update-initramfs", "-u"],
    }


def _redhat(cuda_distro: str, cuda_first: str, key: str = "D42D0685.pub") -> dict:
    return {
        "family": "redhat", "suites": [], "distro_branches": {}, "distro_packages": {},
        "version_package": "nvidia-driver", "unpinned_packages": [], "keyring": "",
        "cuda_repo_distro": cuda_distro, "cuda_repo_packages": _RPM_CUDA_PACKAGES, "cuda_repo_first_branch": cuda_first,
        "cuda_repo_key": key,
        "dnf_module_stream": {"proprietary": "{branch}-dkms", "open": "{branch}-open"},
        "versionlock_patterns": ["nvidia-*", "kmod-nvidia-*", "libnvidia-*", "dkms-nvidia"],
        "headers_package": "kernel-devel-{kernel}", "initramfs_command": ["dracut", "-f"],
    }


# EL 7: yum, no module streams; NVIDIA's RHEL 7 repository selects a branch with the
# nvidia-driver-branch-<branch> packages and yum-plugin-nvidia ("flavors" in NVIDIA's RHEL 7 packaging guide,
# developer.download.nvidia.com/compute/github-demos/yum-packaging-nvidia-driver/guide-rhel7). Planned and
# rendered here; never run on a real EL 7 host.
_EL7 = {**_redhat("rhel7", "410"), "dnf_module_stream": None,
        "cuda_repo_packages": {"proprietary": ["nvidia-driver-branch-{branch}", "nvidia-driver-branch-{branch}-cuda",
                                               "yum-plugin-nvidia"]},
        "version_package": "nvidia-driver-branch-{branch}"}
# EL 10: no module streams (RHEL 10 dropped modularity). NVIDIA's kernel-modules table: "dnf versionlock
# \*nvidia\*580\*" then "dnf install nvidia-open"; the repository is signed with CDF6BA43.pub (NVIDIA's
# gpu-driver-container rhel10/Dockerfile at 06a208ca checks it against a pinned SHA-256). dnf on RHEL 10 is
# DNF 4 (NVIDIA's "Version locking" page). Planned and rendered here; never run on a real EL 10 host.
_EL10 = {**_redhat("rhel10", "580", "CDF6BA43.pub"), "dnf_module_stream": None, "branch_lock": "*nvidia*{branch}*"}

PLATFORMS: dict = {
    "Debian-12": _debian("bookworm", "535", "debian12", "525"),
    "Debian-13": _debian("trixie", "550", "debian13", "575"),
    "Ubuntu-20": _ubuntu("focal", "ubuntu2004", "450"),
    "Ubuntu-22": _ubuntu("jammy", "ubuntu2204", "515"),
    "Ubuntu-24": _ubuntu("noble", "ubuntu2404", "550"),
    "Ubuntu-26": _ubuntu("resolute", "ubuntu2604", "595"),
    "RedHat-7": _EL7,
    "RedHat-8": _redhat("rhel8", "450"),
    "RedHat-9": _redhat("rhel9", "515"),
    "RedHat-10": _EL10,
}
# os-release IDs of the RHEL family (ID, or one of ID_LIKE).
REDHAT_IDS = ("rhel", "centos", "rocky", "almalinux", "ol", "fedora", "redhat")

# NVIDIA's CUDA repository names x86_64 "x86_64" and aarch64 "sbsa" (server ARM).
CUDA_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa"}

# Binary packages of the driver stack that the hold and the apt pin cover (globs). Every package a
# driver package depends on with "=" must match, or apt cannot install a version older than the
# newest (libglx-nvidia0: hence libglx-nvidia*, not libglx-nvidia-*).
PIN_GLOBS = ["nvidia-*", "libnvidia-*", "libcuda1", "libcudadebugger1", "libnvcuvid1", "libnvoptix1",
             "libgl1-nvidia*", "libglx-nvidia*", "libegl-nvidia*", "libgles-nvidia*", "firmware-nvidia-*",
             "xserver-xorg-video-nvidia*", "cuda-drivers*"]
RPM_STACK_GLOBS = ["nvidia-*", "kmod-nvidia-*", "libnvidia-*", "dkms-nvidia", "cuda-drivers*"]
# An adopted driver: the packages that would replace it, blocked (apt pin priority -1, yum/dnf exclude).
# Globs that spare the container toolkit (nvidia-container-*, libnvidia-container*, nvidia-docker2) and
# Debian's CUDA toolkit (nvidia-cuda-*): tests check them against is_stack_package.
BLOCK_GLOBS = ["nvidia-[!cd]*", "nvidia-compute-*", "nvidia-dkms-*", "nvidia-driver*", "libnvidia-[!c]*",
               "libnvidia-cfg*", "libnvidia-common*", "libnvidia-compute*", "libcuda1", "libcudadebugger1",
               "libnvcuvid1", "libnvoptix1", "libgl1-nvidia*", "libglx-nvidia*", "libegl-nvidia*", "libgles-nvidia*",
               "firmware-nvidia-*", "xserver-xorg-video-nvidia*", "cuda-drivers*", "linux-modules-nvidia-*",
               "linux-objects-nvidia-*", "linux-signatures-nvidia-*", "kmod-nvidia*", "dkms-nvidia*"]
# The container toolkit's packages match the same globs but belong to nvidia_container_toolkit.
NOT_DRIVER = re.compile(r"^(lib)?nvidia-(container|docker)")
# Packages that carry a kernel module (DKMS sources, prebuilt modules, or the metapackages that pull them).
KERNEL_PACKAGE = re.compile(r"(^nvidia-(open-)?kernel-|dkms|^linux-modules-nvidia-|^kmod-nvidia|^nvidia-driver|"
                            r"^nvidia-headless-|^cuda-drivers|^nvidia-open)")

# Files the module writes (render and apply use the same paths).
FILES = {
    "distro_sources": "/etc/apt/sources.list.d/kgn-nvidia-driver.sources",
    "cuda_sources": "/etc/apt/sources.list.d/kgn-cuda.sources",
    "cuda_keyring": "/usr/share/keyrings/kgn-cuda-archive-keyring.asc",
    "cuda_yum_repo": "/etc/yum.repos.d/kgn-cuda.repo",
    "apt_pin": "/etc/apt/preferences.d/kgn-nvidia-driver.pref",
    # EL: an adopted driver's packages are excluded here (yum.conf on EL 7, where yum is the tool)
    "dnf_conf": "/etc/dnf/dnf.conf",
    "yum_conf": "/etc/yum.conf",
    "blacklist": "/etc/modprobe.d/kgn-blacklist-nouveau.conf",
    "event_log": "/var/log/kgn/nvidia_driver.log",
    "runfile_stamp": "/var/lib/kgn/nvidia_driver_runfile.version",
}
# The initramfs tools the module may call (the first word of the platform's initramfs_command).
INITRAMFS_PATHS = ["/usr/sbin/update-initramfs", "/usr/bin/dracut", "/usr/sbin/dracut"]
NVIDIA_SMI = "/usr/bin/nvidia-smi"
RUNFILE_DIR = "/var/tmp"


def _fail(message: str) -> KgnError:
    return KgnError(f"nvidia_driver: {message}")


# --- versions --------------------------------------------------------------------------------------


def _deb_order(char: str) -> int:
    if char == "~":
        return -1
    if char.isdigit() or not char:
        return 0
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _deb_compare_part(left: str, right: str) -> int:
    """dpkg's verrevcmp: non-digit runs compared by dpkg's character order, digit runs as numbers."""
    i = j = 0
    while i < len(left) or j < len(right):
        while (i < len(left) and not left[i].isdigit()) or (j < len(right) and not right[j].isdigit()):
            a = _deb_order(left[i]) if i < len(left) else 0
            b = _deb_order(right[j]) if j < len(right) else 0
            if a != b:
                return a - b
            i += 1
            j += 1
        start_i, start_j = i, j
        while i < len(left) and left[i].isdigit():
            i += 1
        while j < len(right) and right[j].isdigit():
            j += 1
        a, b = int(left[start_i:i] or 0), int(right[start_j:j] or 0)
        if a != b:
            return a - b
    return 0


def _deb_split(version: str) -> "tuple[int, str, str]":
    epoch, _, rest = version.rpartition(":") if ":" in version else ("0", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or 0), upstream, revision


def deb_version_compare(left: str, right: str) -> int:
    """<0, 0 or >0 as Debian orders two package versions ('535.309.01-0+deb12u1' > '535.261.03-1')."""
    le, lu, lr = _deb_split(left)
    re_, ru, rr = _deb_split(right)
    if le != re_:
        return le - re_
    return _deb_compare_part(lu, ru) or _deb_compare_part(lr, rr)


def newest_first(versions: list) -> list:
    """The distinct versions, newest first (Debian ordering)."""
    return sorted(set(versions), key=functools.cmp_to_key(deb_version_compare), reverse=True)


def _upstream(version: str) -> str:
    return nvidia_upstream_version(version) if version else ""


def _in_branch(version: str, branch: str) -> bool:
    return driver_version_matches(version, branch) if version else False


def _is_version(package_version: str, wanted: str) -> bool:
    """'535.261.03-1' is the version '535.261.03' (or '535.261.03-1' written in full)."""
    return bool(wanted) and driver_version_matches(package_version, wanted)


# --- platform --------------------------------------------------------------------------------------


def platform_key(os_release: object) -> str:
    """'Debian-12', 'Ubuntu-24', 'RedHat-9' ... from os-release's id, version_id and id_like."""
    if not isinstance(os_release, dict) or not os_release.get("id") or not str(os_release.get("version_id") or ""):
        raise _fail(
            "the node's OS is not known (os.id and os.version_id from /etc/os-release). A run against the node "
            "reads it; a render takes it from the inventory: set kgn_observed_nvidia_driver.os.id/version_id "
            "(for example {id: debian, version_id: '12'}) or run once against the host so the run records it"
        )
    os_id = str(os_release["id"]).lower()
    like = str(os_release.get("id_like") or "").lower().split()
    major = str(os_release["version_id"]).split(".")[0]
    if os_id in REDHAT_IDS or any(name in ("rhel", "fedora") for name in like):
        return f"RedHat-{major}"
    return f"{os_id.capitalize()}-{major}"


def _platform(observed_os: dict) -> "tuple[str, dict]":
    key = platform_key(observed_os)
    if key not in PLATFORMS:
        raise _fail(f"supports {', '.join(PLATFORMS)}; this host is {observed_os.get('id')} "
                    f"{observed_os.get('version_id')} ({key})")
    return key, PLATFORMS[key]


def source_choice(requested: object, observed_os: object) -> dict:
    """nvidia_driver_source decided for the node's OS, and why: {source, how, why, words} (auto resolved by
    driver_choice.choose_source; an explicit source kept as asked). The OS is required, as for every plan."""
    key = platform_key(observed_os)
    return choose_source(requested, observed_os, key, PLATFORMS.get(key), list(PLATFORMS))


def _with_source(inputs: dict, observed: dict) -> "tuple[dict, dict]":
    """The inputs with ``source`` decided (auto resolved from the node's OS), and the record of why."""
    record = source_choice(inputs.get("source"), observed.get("os") or {})
    return {**inputs, "source": record["source"]}, record


def _check_inputs(inputs: dict) -> None:
    if inputs.get("source") not in SOURCE_CHOICES:
        raise _fail(f"nvidia_driver_source is {inputs.get('source')!r}; it must be one of "
                    f"{', '.join(SOURCE_CHOICES)}")
    if inputs.get("existing", "auto") not in EXISTING:
        raise _fail(f"nvidia_driver_existing is {inputs.get('existing')!r}; it must be one of {', '.join(EXISTING)}")
    if inputs.get("kernel_module") not in (*KERNEL_MODULES, AUTO):
        raise _fail(f"nvidia_driver_kernel_module is {inputs.get('kernel_module')!r}; it must be one of "
                    f"{', '.join((*KERNEL_MODULES, AUTO))}")
    if not re.match(r"^(\d+|auto)$", str(inputs.get("branch") or "")):
        raise _fail(f"nvidia_driver_branch is {inputs.get('branch')!r}; give auto or the branch as a quoted number "
                    "such as \"580\"")
    version = str(inputs.get("version") or "")
    if version and not re.match(r"^(\d+:)?\d+\.\d+", version):
        raise _fail(f"nvidia_driver_version is {version!r}; give an upstream version such as \"535.216.01\" (or "
                    "leave it empty for the newest of the branch)")
    if version and inputs["branch"] != AUTO and not _upstream(version).startswith(f"{inputs['branch']}."):
        raise _fail(f"nvidia_driver_version {version} is not in nvidia_driver_branch {inputs['branch']}; set both "
                    "to the same branch")


def offered_branches(platform: dict, source: str) -> list:
    """The branches the node's source offers: the distribution's packaged branches, or every branch NVIDIA's
    CUDA repository carries for the platform (from the oldest one checked, docs/driver-branches.md)."""
    if source == "distro":
        return sorted(platform["distro_branches"], key=int)
    if source == "cuda_repo":
        first = int(platform.get("cuda_repo_first_branch") or 0)
        return [b for b in KNOWN_BRANCHES if int(b) >= first]
    return []


def _runfile_branch(inputs: dict) -> str:
    name = os.path.basename(str(inputs.get("runfile_url") or inputs.get("runfile_path") or ""))
    pattern = r"_(\d+)\.\d+(?:\.\d+)?_linux" if name.startswith("cuda_") else r"(\d+)\.\d+(?:\.\d+)?\.run$"
    found = re.search(pattern, name)
    return found.group(1) if found else ""


def resolve(inputs: dict, observed: dict, today: object = None, adopted: "dict | None" = None) -> "tuple[dict, dict]":
    """The inputs with ``branch`` and ``kernel_module`` decided (auto resolved, explicit ones checked against the
    node's GPUs), and the record of why: {branch: choose_branch(), kernel_module: choose_flavour(), ...}. With
    ``adopted`` (the driver found on the node and kept) both are what the node shows. ``source`` auto is resolved
    from the node's OS (source_choice)."""
    _check_inputs(inputs)
    inputs, _ = _with_source(inputs, observed)
    key, platform = _platform(observed.get("os") or {})
    needs = gpu_needs(observed.get("gpu") if "gpu" in observed else None)
    record = {"platform": key, "gpus_unknown": needs["unknown"], "gpus_recorded": needs["known"]}
    if adopted is not None:
        version = str(adopted.get("version") or adopted.get("kernel_module_version") or "")
        branch, flavour, problems = adopted_choice(version, str(adopted.get("kernel_module") or ""),
                                                   str(adopted.get("kernel_module_source") or ""), needs, today)
        if problems:
            raise _fail("; ".join(problems))
        resolved = {**inputs, "branch": branch["branch"], "kernel_module": flavour["flavour"], "version": ""}
        return resolved, {**record, "branch": branch, "kernel_module": flavour}
    source = inputs["source"]
    if source == "distro" and not platform["distro_branches"]:
        raise _fail(f"nvidia_driver_source=distro is not available on {key}: it has no distribution driver packages "
                    f"({os_words(observed.get('os'), key)} ships no NVIDIA driver). Use "
                    "nvidia_driver_source=auto (the default: NVIDIA's CUDA repository here), cuda_repo or runfile")
    driver = observed.get("driver") or {}
    packages = observed.get("packages") or {}
    installed = ("" if not driver.get("owned", True) else
                 _upstream(str(packages.get("installed") or "")) or str(driver.get("package_version") or ""))
    requested = str(inputs.get("branch") or AUTO)
    if source == "runfile" and requested == AUTO:
        requested = _runfile_branch(inputs) or AUTO
    branch = choose_branch(requested, str(inputs.get("version") or ""), offered_branches(platform, source), needs,
                           installed, today)
    if source == "distro":
        open_offered = "open" in platform["distro_packages"]
    elif source == "cuda_repo":
        open_offered = "open" in platform["cuda_repo_packages"]
    else:
        open_offered = True
    flavour = choose_flavour(inputs.get("kernel_module") or AUTO, branch["branch"], needs, open_offered)
    resolved = {**inputs, "branch": branch["branch"], "kernel_module": flavour["flavour"]}
    return resolved, {**record, "branch": branch, "kernel_module": flavour}


def driver_packages(inputs: object, observed: object, today: object = None, adopted: "dict | None" = None) -> dict:
    """What the node must be asked about before planning: the platform, the branch and flavour (auto resolved),
    the packages of the chosen source and flavour, the package whose version is the driver's, and the kernel
    headers packages (one per kernel the next boot may use)."""
    inputs = dict(inputs or {})
    observed = dict(observed or {})
    inputs, choice = resolve(inputs, observed, today, adopted)
    key, platform = _platform(observed.get("os") or {})
    source, flavour, branch = inputs["source"], inputs["kernel_module"], str(inputs["branch"])
    if source == "distro":
        if platform["family"] != "debian" or branch not in platform["distro_branches"]:
            carries = (f"its distribution packages carry branch {', '.join(platform['distro_branches'])}"
                       if platform["distro_branches"] else "it has no distribution driver packages")
            raise _fail(f"nvidia_driver_source=distro with nvidia_driver_branch={branch} is not available on {key}: "
                        f"{carries}. Set nvidia_driver_branch to one of those, or use nvidia_driver_source=cuda_repo "
                        "or runfile")
        packages = platform["distro_packages"][flavour]
        version_package = platform["version_package"]
        unpinned = platform["unpinned_packages"]
    elif source == "cuda_repo":
        if flavour not in platform["cuda_repo_packages"]:
            raise _fail(f"nvidia_driver_kernel_module={flavour} is not packaged for {key}; use proprietary")
        names = platform["cuda_repo_packages"]
        if int(branch) >= platform.get("cuda_unsuffixed_from", 10000):
            names = _APT_CUDA_PACKAGES_590
        packages = names[flavour]
        version_package = (platform["version_package"] if platform["family"] == "redhat" else packages[0])
        unpinned = []
    else:
        packages, version_package, unpinned = [], "", []
    return {
        "platform": key,
        "family": platform["family"],
        "source": source,
        "branch": branch,
        "kernel_module": flavour,
        "choice": choice,
        "packages": [p.replace("{branch}", branch) for p in packages],
        "version_package": version_package.replace("{branch}", branch),
        "unpinned_packages": list(unpinned),
        "headers_packages": [platform["headers_package"].replace("{kernel}", k) for k in boot_kernels(observed)],
    }


def boot_kernels(observed: dict) -> list:
    """The kernels the next boot may use, as recorded (the running one when nothing was recorded: a render)."""
    recorded = observed.get("kernels")
    if isinstance(recorded, dict):
        return [k["version"] for k in recorded.get("kernels") or []]
    return [str(observed.get("kernel") or "<running kernel>")]


# --- pieces of the plan ----------------------------------------------------------------------------


def _missing_components(platform: dict, branch: str, observed: dict, assumed: list) -> list:
    components = platform["distro_branches"][branch]
    sources = observed.get("apt_sources")
    if sources is None:
        assumed.append("the node's apt sources were not recorded: every suite is assumed to lack "
                       f"{' '.join(components)} (a run writes only what is really missing)")
        sources = {}
    own = (FILES["distro_sources"], FILES["cuda_sources"])
    listed = [{"path": path, "content": text or ""} for path, text in sorted(sources.items()) if path not in own]
    return nvidia_apt_missing_components(listed, platform["suites"], components)


def _source_uris(path: str, text: str) -> list:
    """The URIs of the enabled deb entries of one apt source file (one-line .list or deb822 .sources)."""
    uris = []
    if path.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", text):
            fields = {}
            for line in stanza.splitlines():
                key, sep, value = line.partition(":")
                if sep and not line.startswith(("#", " ", "\t")):
                    fields[key.strip().lower()] = value.strip()
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
                uris += fields.get("uris", "").split()
        return uris
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) > 1 and words[0] == "deb":
            uris.append(words[1])
    return uris


def foreign_cuda_source(sources: dict, url: str) -> str:
    """The apt source file, not ours, that already enables the CUDA repository at ``url`` ("" when none).

    NVIDIA's ``cuda-keyring`` package writes ``/etc/apt/sources.list.d/cuda-<distro>-<arch>.list`` signed by
    ``/usr/share/keyrings/cuda-archive-keyring.gpg`` (NVIDIA's CUDA installation guide, "Network Repo
    Installation for Ubuntu"). A second entry for the same URI with another ``Signed-By`` makes apt refuse every
    source ("Conflicting values set for option Signed-By"), so the plan then uses that file instead of its own.
    """
    want = url.rstrip("/")
    for path in sorted(sources or {}):
        if path != FILES["cuda_sources"] and want in (u.rstrip("/") for u in _source_uris(path, sources[path] or "")):
            return path
    return ""


def _distro_sources(missing: list, mirror: str, security_mirror: str, keyring: str) -> str:
    text = HEADER + ("# Only the components the NVIDIA driver needs that no other apt source enables; your own\n"
                     "# source files are left as they are.\n")
    for entry in missing:
        uri = security_mirror if entry["suite"].endswith("-security") else mirror
        text += (f"\nTypes: deb\nURIs: {uri}\nSuites: {entry['suite']}\n"
                 f"Components: {' '.join(entry['components'])}\nSigned-By: {keyring}\n")
    return text


def _cuda_sources(url: str) -> str:
    return (HEADER + "# NVIDIA's CUDA repository (or your mirror of it), trusted through its own key only.\n"
            f"Types: deb\nURIs: {url}/\nSuites: /\nSigned-By: {FILES['cuda_keyring']}\n")


def _yum_repo(key: str, url: str, key_url: str) -> str:
    return (HEADER + f"[kgn-cuda]\nname=NVIDIA CUDA repository ({key})\nbaseurl={url}\nenabled=1\ngpgcheck=1\n"
            f"gpgkey={key_url}\nmodule_hotfixes=0\n")


def _apt_pin(target: str) -> str:
    return (HEADER + "# Keep the driver stack at the chosen version: apt prefers it over anything newer, so an\n"
            "# unattended upgrade cannot split the kernel module and the user-space libraries. The packages\n"
            f"# are held too.\nPackage: {' '.join(PIN_GLOBS)}\nPin: version {target}\nPin-Priority: 1001\n")


BLACKLIST = (HEADER + "# nouveau must not claim the GPU before the NVIDIA driver.\n"
             "blacklist nouveau\noptions nouveau modeset=0\n")


def is_stack_package(name: str, family: str = "debian") -> bool:
    """A package of the driver stack (held, pinned, verified), not one of the container toolkit's."""
    globs = PIN_GLOBS if family == "debian" else RPM_STACK_GLOBS
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs) and not NOT_DRIVER.match(name)


def hold_changes(stack: list, held: list, hold: bool) -> dict:
    """The apt-mark call that makes the holds right: ``{"hold": [...], "unhold": [...]}``."""
    held_set = set(held or [])
    if hold:
        return {"hold": sorted(p for p in stack if p not in held_set), "unhold": []}
    return {"hold": [], "unhold": sorted(p for p in stack if p in held_set)}


def runfile_plan(inputs: dict, installed: str) -> dict:
    """The installer's name, the driver version it carries, and its silent flags."""
    url, path = str(inputs.get("runfile_url") or ""), str(inputs.get("runfile_path") or "")
    if bool(url) == bool(path):
        raise _fail("nvidia_driver_source=runfile needs exactly one of nvidia_driver_runfile_url (http/https, may "
                    "point at your mirror) or nvidia_driver_runfile_path (a file on the control host)")
    if url and not re.match(r"^https?://", url):
        raise _fail(f"nvidia_driver_runfile_url {url!r} is not an http(s) URL")
    name = os.path.basename(url or path)
    is_cuda = name.startswith("cuda_")
    found = re.search(r"_(\d+\.\d+(?:\.\d+)?)_linux" if is_cuda else r"(\d+\.\d+(?:\.\d+)?)\.run$", name)
    if not found:
        raise _fail(f"cannot tell the driver version from the runfile name {name!r}; NVIDIA names its installers "
                    "NVIDIA-Linux-<arch>-<version>.run and cuda_<cuda>_<driver>_linux.run")
    target = found.group(1)
    if is_cuda:
        args = ["--silent", "--driver"]
    else:
        args = ["--silent", "--dkms", "--no-questions", "--ui=none"]
        if inputs["kernel_module"] == "open":
            args.append("--kernel-module-type=open")
    return {"name": name, "installer": f"{RUNFILE_DIR}/{name}", "target": target,
            "args": args + list(inputs.get("runfile_extra_args") or []), "stamp": FILES["runfile_stamp"],
            "installed": installed, "due": installed != target}


def _choose_target(inputs: dict, installed: str, offered: list) -> str:
    """The exact version asked for, else the installed one when it is in the branch, else the newest
    the source offers in the branch ("" when none fits)."""
    version, branch = str(inputs.get("version") or ""), str(inputs["branch"])
    if version:
        if installed and _is_version(installed, version):
            return installed
        return next((v for v in offered if _is_version(v, version)), "")
    if _in_branch(installed, branch):
        return installed
    return next((v for v in offered if _in_branch(v, branch)), "")


def _moves(inputs: dict, installed: str) -> bool:
    """Whether the request moves an installed driver to another version (known before the lists are read)."""
    if not installed:
        return False
    version = str(inputs.get("version") or "")
    return not _is_version(installed, version) if version else not _in_branch(installed, str(inputs["branch"]))


def _packages_state(observed: dict, assumed: list) -> dict:
    """Installed, held, present, offered and the installed stack, as recorded (assumed empty when not)."""
    state = observed.get("packages")
    if state is None:
        assumed.append("no package state recorded: the driver is assumed not installed and nothing held")
        state = {}
    return {
        "installed": str(state.get("installed") or ""),
        "held": sorted(state.get("held") or []),
        "present": sorted(state.get("present") or []),
        "offered": newest_first([str(v) for v in state.get("offered") or []]),
        "stack": sorted(state.get("stack") or []),
        "locked": sorted(state.get("locked") or []),
        "refreshed": bool(state.get("refreshed")),
        "recorded": "packages" in observed,
    }


def adopted_driver(existing: str, driver: dict, source: str) -> bool:
    """Whether the plan keeps the driver found on the node instead of installing packages.

    ``driver``: what the node shows (``present``, ``owned`` by a package of ours or the runfile stamp,
    ``version``, ``kernel_module_version``, ``nvidia_smi``, ``library``). A driver no package owns is adopted
    unless ``existing`` is "install"; "adopt" keeps whatever is there and refuses a node without a driver.
    """
    present, foreign = bool(driver.get("present")), bool(driver.get("present")) and not driver.get("owned", True)
    if existing == "adopt" and not present:
        raise _fail("nvidia_driver_existing=adopt, but the node has no NVIDIA driver (no loaded kernel module, no "
                    "nvidia-smi, no libnvidia-ml): install one first, or set nvidia_driver_existing=auto to install "
                    "the packages")
    if existing == "install" and foreign and source != "runfile":
        where = driver.get("version") or driver.get("kernel_module_version") or driver.get("nvidia_smi") or "found"
        raise _fail(
            f"an NVIDIA driver ({where}) is installed that no package owns (a runfile, a vendor image or a manual "
            f"install) and nvidia_driver_existing=install: installing the {source} packages over it would leave "
            "two drivers fighting over the GPU. Remove it first (nvidia-uninstall, then reboot) and run again, or "
            "keep it with nvidia_driver_existing=auto (the default) or adopt"
        )
    return foreign and existing != "install"


def _apt_block(version: str) -> str:
    return (HEADER + f"# The NVIDIA driver on this node ({version or 'version unknown'}) was installed outside the "
            "package manager\n# and is adopted: no package may replace it. The container toolkit's packages are not "
            f"blocked.\nPackage: {' '.join(BLOCK_GLOBS)}\nPin: version *\nPin-Priority: -1\n")


def yum_exclude(text: str, globs: list) -> str:
    """The yum/dnf main config with ``globs`` added to ``exclude=`` in its [main] section (values kept)."""
    lines = (text or "").splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "[main]"), None)
    if start is None:
        lines, start = ["[main]", *lines], 0
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("[")), len(lines))
    for i in range(start + 1, end):
        key, sep, value = lines[i].partition("=")
        if sep and key.strip() in ("exclude", "excludepkgs"):
            have = value.replace(",", " ").split()
            wanted = have + [g for g in globs if g not in have]
            if wanted != have:
                lines[i] = f"{key.strip()}={' '.join(wanted)}"
            break
    else:
        lines.insert(end, f"exclude={' '.join(globs)}")
    return "\n".join(lines) + "\n"


def _adopt_plan(plan: dict, driver: dict, version: str, observed: dict) -> list:
    """Keep the driver found on the node: nothing installed, held or removed; our package sources gone; the
    packages that would replace it blocked. Returns the plan's files."""
    plan.update(
        adopted={"version": version, "kernel_module_version": driver.get("kernel_module_version") or "",
                 "kernel_module": driver.get("kernel_module") or "unknown",
                 "kernel_module_source": driver.get("kernel_module_source") or "",
                 "nvidia_smi": driver.get("nvidia_smi") or "", "library": driver.get("library") or ""},
        installed=version, target=version, target_exact=bool(version), specs=[], missing=[], held=[], offered=[],
        stack=[], present=[], locked=[], hold_changes={"hold": [], "unhold": []}, release=[], upgrade=False,
        kernel_headers=False, missing_components=[], module_changes=False, runfile=None,
        version_package="", packages=[], dnf_module="", branch_lock="", versionlock_patterns=[],
    )
    plan["cuda_keyring"]["wanted"] = False
    plan["assumed"][:] = [a for a in plan["assumed"] if "headers package" not in a]
    if plan["family"] == "debian":
        return [{"path": FILES["distro_sources"], "mode": "0644", "content": None},
                {"path": FILES["cuda_sources"], "mode": "0644", "content": None},
                {"path": FILES["apt_pin"], "mode": "0644", "content": _apt_block(version)}]
    conf = FILES["yum_conf"] if plan["platform"] == "RedHat-7" else FILES["dnf_conf"]
    text = (observed.get("files") or {}).get(conf)
    if text is None:
        plan["assumed"].append(f"{conf} was not recorded: the render shows only the exclude line in [main]")
    return [{"path": FILES["cuda_yum_repo"], "mode": "0644", "content": None},
            {"path": conf, "mode": "0644", "content": yum_exclude(text or "", BLOCK_GLOBS)}]


# --- the section -------------------------------------------------------------------------------------


def _refuse_secure_boot(inputs: dict, observed: dict, adopt: bool) -> None:
    if observed.get("secure_boot") and inputs.get("secure_boot_policy", "fail") != "continue" and not adopt:
        raise _fail(
            "Secure Boot is enabled on the node: an unsigned DKMS module would not load. Either use pre-signed "
            "modules (Ubuntu linux-modules-nvidia-<branch>-server-<kernel>, NVIDIA precompiled streams) or enrol a "
            "MOK key that DKMS signs with (mokutil --import /var/lib/dkms/mok.pub, reboot, confirm in the MOK "
            "manager), then set nvidia_driver_secure_boot_policy=continue. See roles/nvidia_driver/README.md "
            "\"Secure Boot\""
        )


def _node_assumptions(observed: dict, choice: dict) -> list:
    """What the plan assumes because the node's record lacks it (the driver, GPUs, architecture, kernels)."""
    assumed = []
    if "driver" not in observed:
        assumed.append("no driver recorded on the node: no driver installed outside the packages is assumed")
    if not choice["gpus_recorded"]:
        assumed.append("no GPU facts recorded: the branch and the kernel module flavour were not checked against "
                       "the node's GPUs")
    if choice["gpus_unknown"]:
        assumed.append(f"GPUs outside the project's table ({', '.join(choice['gpus_unknown'])}): not checked against "
                       "the branch")
    if not observed.get("architecture"):
        assumed.append("the node's architecture was not recorded: x86_64 assumed")
    if not observed.get("kernel") and "kernels" not in observed:
        assumed.append("the node's kernels were not recorded: the headers package names <running kernel>")
    return assumed


def _repositories(inputs: dict, platform: dict, architecture: str, adopt: bool, flavour: str, branch: str) -> dict:
    """Where the packages come from: the CUDA repository's URL and key, the distribution's mirrors, and the EL
    module stream or branch lock that keeps the driver on its branch."""
    source = inputs["source"]
    cuda_repo_url = f"{str(inputs.get('cuda_repo_base_url') or '').rstrip('/')}/{platform['cuda_repo_distro']}/" \
                    f"{CUDA_ARCH.get(architecture, architecture)}"
    key_file = (inputs.get("cuda_repo_key") if platform["family"] == "debian" else inputs.get("cuda_repo_key_rpm")) \
        or platform["cuda_repo_key"]
    mirror, security = ((inputs.get("debian_mirror"), inputs.get("debian_security_mirror"))
                        if platform.get("mirror") == "debian"
                        else (inputs.get("ubuntu_mirror"), inputs.get("ubuntu_security_mirror")))
    dnf_module = ""
    if platform.get("dnf_module_stream") and not adopt and source == "cuda_repo":
        dnf_module = f"@nvidia-driver:{platform['dnf_module_stream'][flavour].replace('{branch}', branch)}/default"
    return {"cuda_repo_url": cuda_repo_url, "cuda_repo_key_url": f"{cuda_repo_url}/{key_file}", "mirror": mirror,
            "security": security, "dnf_module": dnf_module,
            "branch_lock": (platform.get("branch_lock") or "").replace("{branch}", branch)
            if source == "cuda_repo" else ""}


def _source_files(plan: dict, platform: dict, key: str, observed: dict, assumed: list) -> list:
    """The package sources' files of a package install: the distribution's missing components, the CUDA repository
    (unless the node already enables it under another name) and the apt pin, or the EL repository file."""
    source, cuda_repo_url = plan["source"], plan["cuda_repo_url"]
    if platform["family"] != "debian":
        plan["missing_components"] = []
        content = _yum_repo(key, cuda_repo_url, plan["cuda_repo_key_url"]) if source == "cuda_repo" else None
        return [{"path": FILES["cuda_yum_repo"], "mode": "0644", "content": content}]
    missing = (_missing_components(platform, plan["branch"], observed, assumed) if source == "distro" else [])
    plan["missing_components"] = missing
    files = [{"path": FILES["distro_sources"], "mode": "0644",
              "content": _distro_sources(missing, plan["distro_mirror"], plan["distro_security_mirror"],
                                         platform["keyring"]) if missing else None}]
    theirs = foreign_cuda_source(observed.get("apt_sources"), cuda_repo_url) if source == "cuda_repo" else ""
    if theirs:
        plan["cuda_source_found"] = theirs
        plan["cuda_keyring"]["wanted"] = False
    files.append({"path": FILES["cuda_sources"], "mode": "0644",
                  "content": _cuda_sources(cuda_repo_url) if source == "cuda_repo" and not theirs else None})
    files.append({"path": FILES["apt_pin"], "mode": "0644",
                  "content": _apt_pin(plan["target"]) if plan["hold"] else None})
    return files


def driver_plan(inputs: object, observed: object) -> dict:
    """The nvidia_driver section of the host plan.

    ``inputs``: the role's settings (``source``, ``branch``, ``version``, ``kernel_module``, ``hold``,
    ``allow_upgrade``, ``install_recommends``, the mirrors, ``cuda_repo_base_url``, ``cuda_repo_key``,
    ``cuda_repo_key_rpm``, ``runfile_url``, ``runfile_path``, ``runfile_extra_args``, ``kernel_headers``,
    ``blacklist_nouveau``, ``initramfs_rebuild``, ``persistenced_start``, ``secure_boot_policy``).
    ``observed``: what the node shows (``os`` {id, version_id, id_like}, ``architecture``, ``kernel``,
    ``secure_boot``, ``initramfs_tools``, ``files`` {path: text}, ``apt_sources`` {path: text},
    ``cuda_keyring``, ``packages`` {installed, held, present, offered, stack, locked, refreshed},
    ``driver`` {present, owned, ...}, ``runfile_installed``, ``gpu``). The OS is required; what else is
    missing is assumed and listed in ``assumed``. Raises KgnError for every refusal.
    """
    if not isinstance(inputs, dict):
        raise _fail("inputs must be a mapping of the role's settings")
    if observed is not None and not isinstance(observed, dict):
        raise _fail("observed must be a mapping (kgn_observed_nvidia_driver)")
    inputs, observed = dict(inputs), dict(observed or {})
    assumed: list = []
    _check_inputs(inputs)
    # auto: the OS's own packages where it ships the driver, NVIDIA's CUDA repository where it ships none
    inputs, source_record = _with_source(inputs, observed)
    today = inputs.get("today")
    driver = observed.get("driver") or {}
    adopt = adopted_driver(str(inputs.get("existing") or "auto"), driver, inputs["source"])
    # a driver that is kept: the source does not matter, its branch and flavour are what the node shows
    basics = driver_packages({**inputs, "source": "runfile"} if adopt else inputs, observed, today,
                             driver if adopt else None)
    choice = basics.pop("choice")
    inputs = {**inputs, "branch": basics["branch"], "kernel_module": basics["kernel_module"]}
    key = basics["platform"]
    platform = PLATFORMS[key]
    family, source, flavour, branch = platform["family"], inputs["source"], basics["kernel_module"], basics["branch"]

    adopted_version = str(driver.get("version") or driver.get("kernel_module_version") or "")
    _refuse_secure_boot(inputs, observed, adopt)
    assumed += _node_assumptions(observed, choice)
    os_state = lifecycle.os_lifecycle(observed.get("os") or {}, today)
    architecture = str(observed.get("architecture") or "") or "x86_64"
    repos = _repositories(inputs, platform, architecture, adopt, flavour, branch)
    cuda_repo_url, mirror, security = repos["cuda_repo_url"], repos["mirror"], repos["security"]

    plan = {
        **basics,
        "source": source,
        # which source and why: "source: cuda_repo (the default for Rocky Linux 10: ...)"
        "source_choice": source_record,
        "branch": branch,
        "version": str(inputs.get("version") or ""),
        "kernel_module": flavour,
        "architecture": architecture,
        "hold": bool(inputs.get("hold", True)),
        "allow_upgrade": bool(inputs.get("allow_upgrade")),
        "install_recommends": bool(inputs.get("install_recommends")),
        "kernel_headers": bool(inputs.get("kernel_headers", True)) and source != "runfile",
        "suites": list(platform["suites"]),
        "components": list(platform["distro_branches"].get(branch, [])) if source == "distro" else [],
        "distro_branches": sorted(platform["distro_branches"], key=int),
        # why this branch and flavour, whether NVIDIA still supports the branch, and where the OS stands
        "branch_choice": choice["branch"],
        "kernel_module_choice": choice["kernel_module"],
        "os_lifecycle": os_state,
        "distro_mirror": mirror or "",
        "distro_security_mirror": security or "",
        "distro_keyring": platform["keyring"],
        "cuda_repo_url": cuda_repo_url,
        "cuda_repo_key_url": repos["cuda_repo_key_url"],
        "cuda_keyring": {"path": FILES["cuda_keyring"],
                         "wanted": family == "debian" and source == "cuda_repo",
                         "present": bool(observed.get("cuda_keyring"))},
        # the apt source that enables the CUDA repository when it is not ours (e.g. the cuda-keyring package's)
        "cuda_source_found": "",
        "dnf_module": repos["dnf_module"],
        "branch_lock": repos["branch_lock"],
        "versionlock_patterns": list(platform.get("versionlock_patterns", [])),
        "initramfs": {
            "command": list(platform["initramfs_command"]),
            "available": platform["initramfs_command"][0] in (observed.get("initramfs_tools") or []),
            "rebuild": bool(inputs.get("initramfs_rebuild", True)),
        },
        "persistenced": {"enable": True, "start": bool(inputs.get("persistenced_start", True))},
        "event_log": FILES["event_log"],
        "blacklist": FILES["blacklist"],
        "nvidia_smi": NVIDIA_SMI,
        "runfile": None,
        "adopted": None,
        "assumed": assumed,
    }
    if "initramfs_tools" not in observed:
        assumed.append("the node's initramfs tools were not recorded: the initramfs is not rebuilt in the plan")

    files = []
    if adopt:
        files = _adopt_plan(plan, driver, adopted_version, observed)
    elif source == "runfile":
        plan["runfile"] = runfile_plan(inputs, str(observed.get("runfile_installed") or ""))
        plan.update(target=plan["runfile"]["target"], installed=plan["runfile"]["installed"],
                    module_changes=plan["runfile"]["due"], specs=[], missing=[], held=[], offered=[], stack=[],
                    present=[], locked=[],
                    hold_changes={"hold": [], "unhold": []}, release=[], upgrade=False,
                    missing_components=[], target_exact=True)
    else:
        _package_plan(plan, inputs, _packages_state(observed, assumed), assumed)
        files = _source_files(plan, platform, key, observed, assumed)
    files.append({"path": FILES["blacklist"], "mode": "0644",
                  "content": BLACKLIST if inputs.get("blacklist_nouveau", True) else None})
    plan["files"] = files
    _kernels(plan, observed, platform, adopt, bool(inputs.get("kernel_headers", True)))
    plan["warnings"] = warnings_of(plan)
    return plan


def _kernels(plan: dict, observed: dict, platform: dict, adopt: bool, wanted_headers: bool) -> None:
    """The headers to install and the modules to build for every kernel the next boot may use."""
    recorded = observed.get("kernels") if isinstance(observed.get("kernels"), dict) else None
    driver_version = _upstream(plan.get("target") or "") if plan.get("target_exact") else ""
    wanted = wanted_headers and not adopt and plan["source"] != "runfile"
    kernels = kernel_plan(recorded, plan["family"], platform["headers_package"], driver_version, wanted,
                          bool(observed.get("secure_boot")), manage=not adopt)
    if recorded is None:
        present = dict(p.split("=", 1) for p in plan.get("present") or [] if "=" in p)
        wanted = plan["kernel_headers"] and not adopt
        kernels["headers_to_install"] = [p for p in plan["headers_packages"] if wanted and p not in present]
    plan["kernels"] = kernels
    plan["headers_missing"] = bool(kernels["headers_to_install"])


def warnings_of(plan: dict) -> list:
    """What the run and the report say about a plan that works but needs attention: an OS past its end of life,
    a branch NVIDIA no longer supports, kernels whose module is missing."""
    said = []
    if plan["os_lifecycle"].get("message"):
        said.append(plan["os_lifecycle"]["message"])
    branch = plan.get("branch_choice") or {}
    life = branch.get("lifecycle") or {}
    if life.get("status") == "ended":
        newest = branch.get("newest_supported")
        said.append(f"driver branch R{branch['branch']} is past NVIDIA's end of life"
                    + (f" ({life['eol']})" if life.get("eol") else "")
                    + (f"; R{newest} is the newest supported branch this source offers for these GPUs" if newest
                       else "") + f" (per {life['source']})")
    elif life.get("status") == "unlisted" and branch.get("branch"):
        said.append(f"driver branch R{branch['branch']} is not in NVIDIA's lifecycle table: its support is unknown "
                    f"(per {life['source']})")
    said.extend(plan["kernels"]["problems"])
    return said


def _package_plan(plan: dict, inputs: dict, state: dict, assumed: list) -> None:
    """Target version, pinned specs, what is missing, the holds, and the refusals that depend on them."""
    installed, held, version_package = state["installed"], state["held"], plan["version_package"]
    family, branch, version = plan["family"], plan["branch"], str(inputs.get("version") or "")
    goal = version or f"branch {branch}"
    if _moves(inputs, installed) and version_package in held and not plan["allow_upgrade"]:
        raise _fail(
            f"{version_package} is held at {installed}; moving it to {goal} is a planned upgrade: run "
            "playbooks/nvidia_driver_upgrade.yml (cordon, drain, pin, install, reboot, uncordon, one batch at a time)"
        )
    present = dict(p.split("=", 1) for p in state["present"] if "=" in p)
    if family == "debian":
        target = _choose_target(inputs, installed, state["offered"])
        exact = bool(target)
        if not target:
            if state["refreshed"]:
                raise _fail(
                    f"{version_package} {goal} is not offered by nvidia_driver_source={plan['source']} on "
                    f"{plan['platform']} (offered: {', '.join(state['offered']) or 'nothing'}). Fix "
                    "nvidia_driver_version / nvidia_driver_branch or the mirror"
                )
            target = f"{version}*" if version else f"{branch}.*"
            assumed.append(
                (f"the package lists offer no {version_package} ({goal}) yet" if state["recorded"]
                 else "no package lists recorded") + f": {version_package} pinned as {target}; a run refreshes the "
                "lists and pins the exact version"
            )
        specs = [nvidia_pin_package(p, target, plan["unpinned_packages"]) for p in plan["packages"]]
        missing = nvidia_apt_unmet(specs, [f"{name}={ver}" for name, ver in present.items()])
    else:
        # dnf: the module stream decides the version; an exact version is asked for as name-version
        target = version or (installed if _in_branch(installed, branch) else f"{branch}.*")
        exact = bool(version) or target == installed
        specs, missing = [], []
        for name in plan["packages"]:
            spec = f"{name}-{version}" if version else name
            specs.append(spec)
            have = present.get(name)
            if have is None or not (_is_version(have, version) if version else _in_branch(have, branch)):
                missing.append(spec)
    upgrade = bool(installed) and bool(missing) and target != installed
    release = [p for p in state["stack"] if p in held] if upgrade and plan["allow_upgrade"] else []
    if family == "debian":
        # after the install the whole stack is held again, the newly installed planned packages included
        stack_after = sorted(set(state["stack"]) | (set(plan["packages"]) if missing else set()))
        holds = hold_changes(stack_after, [p for p in held if p not in release], plan["hold"])
    else:
        locked = bool(state["locked"])
        release = list(plan["versionlock_patterns"]) if upgrade and plan["allow_upgrade"] and locked else []
        holds = {"hold": list(plan["versionlock_patterns"]) if plan["hold"] and (bool(missing) or not locked) else [],
                 "unhold": list(plan["versionlock_patterns"]) if not plan["hold"] and locked else []}
    plan.update(
        installed=installed,
        held=held,
        present=state["present"],
        offered=state["offered"],
        stack=state["stack"],
        locked=state["locked"],
        target=target,
        target_exact=exact,
        specs=specs,
        missing=missing,
        upgrade=upgrade,
        release=release,
        hold_changes=holds,
        # the kernel module changes with the driver version (a first install included)
        module_changes=bool(missing) and target != installed,
    )
