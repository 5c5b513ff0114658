"""What a node shows about its NVIDIA driver: the one reader of the installed state.

Node side (modules only: every function takes the AnsibleModule for run_command and get_bin_path). The
nvidia_driver module plans from it; gpu_facts returns ``installed()`` so that the CUDA toolkit role and
verify read the same thing. Nothing is decided here (driver.py and driver_kernels.py decide).

  os_release        /etc/os-release's id, version_id, id_like
  apt_state         dpkg's installed and held driver packages, the versions apt offers
  rpm_state         rpm's installed driver packages, dnf/yum versionlock
  driver_state      the driver on the node: loaded module (version, flavour), nvidia-smi, NVML library, who owns it
  kernels           every installed kernel the next boot may use: its headers, its NVIDIA module (version,
                    flavour, signature), and DKMS's status
  installed         driver_state for callers that know nothing of the plan (gpu_facts, verify)
"""

import glob
import os
import re
import shlex

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu, host
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver.driver import (
    KERNEL_PACKAGE,
    PIN_GLOBS,
    RPM_STACK_GLOBS,
    is_stack_package,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.nvidia import nvidia_upstream_version

# Where a driver installed outside the packages leaves its NVML library (the file name carries the version).
NVML_GLOBS = ("/usr/lib64/libnvidia-ml.so.*.*", "/usr/lib/libnvidia-ml.so.*.*", "/usr/lib/*/libnvidia-ml.so.*.*",
              "/usr/lib/*/nvidia/*/libnvidia-ml.so.*.*")
MODULES_DIR = "/lib/modules"
BOOT_DIR = "/boot"
# The main NVIDIA module under /lib/modules/<kernel>: nvidia.ko (NVIDIA's packages, DKMS, Ubuntu's
# linux-modules-nvidia-*), nvidia-current.ko (Debian's nvidia-kernel-dkms), nvidia-tesla-<branch>.ko and
# nvidia-legacy-<branch>.ko (Debian's Tesla and legacy packages); compressed or not.
MODULE_FILE = re.compile(r"^nvidia(-current|-tesla(-\d+)?|-legacy-\w+)?\.ko(\.(xz|zst|gz))?$")


def os_release(text):
    """id, version_id and id_like of /etc/os-release."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in ("ID", "VERSION_ID", "ID_LIKE"):
            try:
                parts = shlex.split(value)
            except ValueError:
                parts = [value.strip().strip("\"'")]
            values[key.strip().lower()] = " ".join(parts)
    return {key: values.get(key, "") for key in ("id", "version_id", "id_like")}


def family(module):
    return "redhat" if module.get_bin_path("rpm") and not module.get_bin_path("dpkg-query") else "debian"


def dpkg_installed(module, names):
    """``({name: version}, [held names])`` of the installed packages among names and globs, from one dpkg-query:
    the first letter of db:Status-Abbrev is the selection, ``h`` for a package on hold (what apt-mark showhold
    lists)."""
    if not names:
        return {}, []
    _, out, _ = host.run(module, ["dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Package}|${Version}\n", *names])
    rows, held = {}, []
    for line in (out or "").splitlines():
        status, _, rest = line.partition("|")
        name, _, version = rest.partition("|")
        if status[:2] in ("ii", "hi") and name:
            rows[name] = version
            if status[0] == "h":
                held.append(name)
    return rows, sorted(held)


def dpkg_rows(module, names):
    """{name: version} of the installed (or held) packages among names and globs."""
    return dpkg_installed(module, names)[0]


def apt_state(module, basics):
    """What dpkg has installed and holds, and what the package lists offer, for the planned packages."""
    planned = list(dict.fromkeys(basics["packages"] + [basics["version_package"]] + basics["headers_packages"]))
    # the holds that matter are those of these packages (the stack and the version package): no apt-mark showhold
    rows, held = dpkg_installed(module, [n for n in planned if n] + PIN_GLOBS)
    offered = []
    if basics["version_package"]:
        _, out, _ = host.run(module, ["apt-cache", "madison", basics["version_package"]])
        for line in (out or "").splitlines():
            fields = [f.strip() for f in line.split("|")]
            if len(fields) >= 2 and fields[0] == basics["version_package"] and fields[1]:
                offered.append(fields[1])
    stack = {n: v for n, v in rows.items() if is_stack_package(n)}
    return {
        "installed": rows.get(basics["version_package"], ""),
        "held": held,
        "present": sorted(f"{n}={rows[n]}" for n in planned if n in rows),
        "offered": list(dict.fromkeys(offered)),
        "stack": sorted(stack),
        "versions": stack,
        "refreshed": False,
    }


def _locked_names(lines):
    names = set()
    for line in lines:
        found = re.match(r"^(?:\d+:)?(.+?)-(?:\d+:)?\d[^-]*-[^-]+$", line.strip())
        if found:
            names.add(found.group(1))
    return sorted(names)


def tool(module):
    """dnf (4 on EL 8-10, 5 on Fedora 41 and later: both take versionlock add/delete/list) or yum (EL 7)."""
    return "dnf" if module.get_bin_path("dnf") else "yum"


def rpm_state(module, basics):
    """What rpm has installed and dnf versionlock holds, for the planned packages."""
    planned = [n for n in dict.fromkeys(basics["packages"] + [basics["version_package"]]) if n]
    present = {}
    _, out, _ = host.run(module, ["rpm", "-q", "--qf", "%{NAME}=%{VERSION}\n", *planned])
    for line in (out or "").splitlines():
        if "=" in line and " " not in line:
            name, _, version = line.partition("=")
            present[name] = version
    for headers in basics["headers_packages"]:
        rc, _, _ = host.run(module, ["rpm", "-q", headers])
        if rc == 0:
            present[headers] = "installed"
    _, out, _ = host.run(module, ["rpm", "-qa", "--qf", "%{NAME}=%{VERSION}\n", *RPM_STACK_GLOBS])
    stack = {}
    for line in (out or "").splitlines():
        name, _, version = line.partition("=")
        if name and is_stack_package(name, "redhat"):
            stack[name] = version
    _, out, _ = host.run(module, [tool(module), "-q", "versionlock", "list"], timeout=120)
    locked = [line.strip() for line in (out or "").splitlines()
              if line.strip() and not line.startswith(("Last metadata", "Loaded plugins", "Adding versionlock"))]
    return {
        "installed": present.get(basics["version_package"], ""),
        "held": _locked_names(locked),
        "present": sorted(f"{n}={v}" for n, v in present.items()),
        "offered": [],
        "stack": sorted(stack),
        "versions": stack,
        "locked": locked,
        "refreshed": False,
    }


def owner(module, family_name, path):
    """The package that owns ``path`` ("" when none)."""
    if not path:
        return ""
    real = os.path.realpath(path)
    if family_name == "redhat":
        rc, out, _ = host.run(module, ["rpm", "-qf", "--qf", "%{NAME}\n", real])
        return out.strip().splitlines()[0] if rc == 0 and out.strip() else ""
    rc, out, _ = host.run(module, ["dpkg-query", "-S", real])
    for line in (out or "").splitlines() if rc == 0 else []:
        names, _, where = line.partition(": ")
        if where.strip() == real and not names.startswith("diversion"):
            return names.split(",")[0].split(":")[0].strip()
    return ""


def nvml_library():
    """The newest libnvidia-ml.so.<version> on the node and its version ("" when there is none)."""
    found = []
    for pattern in NVML_GLOBS:
        for path in glob.glob(pattern):
            match = re.search(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$", path)
            if match and not os.path.islink(path):
                found.append((tuple(int(x) for x in match.group(1).split(".")), path, match.group(1)))
    if not found:
        return "", ""
    _, path, version = max(found)
    return path, version


# A driver version: a three-digit branch and more ("550.163.01"); the driver stack also holds packages with
# versions of their own (Debian's nvidia-kernel-common 20240109+1, nvidia-modprobe, ...), which are not it.
DRIVER_VERSION = re.compile(r"^\d{3}\.\d+(\.\d+)?$")


def _package_version(stack_versions):
    """The driver's upstream version from its installed packages (the highest, "" when none)."""
    versions = []
    for name, version in (stack_versions or {}).items():
        if not (KERNEL_PACKAGE.search(name) and version) or not re.match(r"^(\d+:)?\d", version):
            continue
        upstream = nvidia_upstream_version(version)
        if DRIVER_VERSION.match(upstream):
            versions.append(upstream)
    return max(versions, key=lambda v: tuple(int(p) for p in v.split("."))) if versions else ""


def driver_state(module, family_name, stack, runfile_installed, stack_versions=None):
    """The driver the node has: {present, version, kernel_module_version, kernel_module (open, proprietary or "" as
    the node says), kernel_module_source, nvidia_smi, library, package_version, owner, owned}."""
    loaded = gpu.read_kernel_module(module)
    proc_loaded = bool(host.read(gpu.PROC_VERSION))
    smi = module.get_bin_path("nvidia-smi") or ""
    library, library_version = nvml_library()
    present = proc_loaded or bool(smi) or bool(library)
    owned_by = owner(module, family_name, smi) or owner(module, family_name, library)
    if not owned_by and proc_loaded:
        owned_by = next((name for name in stack if KERNEL_PACKAGE.search(name)), "")
    loaded_version = loaded["version"] if proc_loaded else ""
    package_version = _package_version(stack_versions)
    return {
        "present": present,
        "version": loaded_version or library_version or package_version,
        "kernel_module_version": loaded_version,
        "kernel_module": loaded["flavour"],
        "kernel_module_source": loaded["source"],
        "nvidia_smi": smi,
        "library": library,
        "package_version": package_version,
        "owner": owned_by or ("runfile" if runfile_installed else ""),
        "owned": not present or bool(owned_by) or bool(runfile_installed),
    }


def installed(module, runfile_stamp=""):
    """driver_state of a node, for callers that know nothing of the driver plan (gpu_facts, verify)."""
    name = family(module)
    if name == "debian":
        versions = {n: v for n, v in dpkg_rows(module, PIN_GLOBS).items() if is_stack_package(n)}
    else:
        _, out, _ = host.run(module, ["rpm", "-qa", "--qf", "%{NAME}=%{VERSION}\n", *RPM_STACK_GLOBS])
        versions = dict(line.split("=", 1) for line in (out or "").splitlines() if "=" in line)
        versions = {n: v for n, v in versions.items() if is_stack_package(n, "redhat")}
    stamp = (host.read(runfile_stamp) or "").strip() if runfile_stamp else ""
    state = driver_state(module, name, sorted(versions), stamp, versions)
    state["packages"] = versions
    return state


# --- kernels ------------------------------------------------------------------------------------------


def parse_dkms_status(text):
    """``dkms status`` -> [{module, version, kernel, state}]: DKMS 3 prints "nvidia-current/550.163.01,
    6.12.48+deb13-amd64, x86_64: installed" (or "nvidia/580.95.05: added"), DKMS 2 "nvidia, 535.54.03,
    5.15.0-1-generic, x86_64: installed"."""
    rows = []
    for line in (text or "").splitlines():
        head, sep, state = line.rpartition(":")
        if not sep:
            continue
        parts = [p.strip() for p in head.split(",")]
        if "/" in parts[0]:
            name, _, version = parts[0].partition("/")
            rest = parts[1:]
        elif len(parts) >= 2:
            name, version, rest = parts[0], parts[1], parts[2:]
        else:
            continue
        rows.append({"module": name, "version": version, "kernel": rest[0] if rest else "",
                     "state": state.strip().split(" ")[0]})
    return [r for r in rows if r["module"].startswith("nvidia")]


def _module_file(kernel):
    for path, dirs, files in os.walk(os.path.join(MODULES_DIR, kernel)):
        dirs.sort()
        for name in sorted(files):
            if MODULE_FILE.match(name):
                return os.path.join(path, name)
    return ""


def kernels(module):
    """Every kernel the next boot may use (its modules installed, and a boot image in /boot or running now),
    with its headers, its NVIDIA module, and DKMS's status: {running, kernels: [...], dkms: {...}}."""
    running = os.uname().release
    try:
        names = sorted(os.listdir(MODULES_DIR))
    except OSError:
        names = []
    found = []
    for version in names:
        bootable = os.path.exists(os.path.join(BOOT_DIR, "vmlinuz-" + version)) or version == running
        if not (bootable and os.path.isdir(os.path.join(MODULES_DIR, version, "kernel"))):
            continue
        path = _module_file(version)
        info = {}
        if path and module.get_bin_path("modinfo"):
            rc, out, _ = host.run(module, ["modinfo", path], timeout=20)
            info = gpu.parse_modinfo(out) if rc == 0 else {}
        found.append({
            "version": version,
            "running": version == running,
            "headers": os.path.exists(os.path.join(MODULES_DIR, version, "build", "Makefile")),
            "module": path,
            "module_version": info.get("version", ""),
            "module_flavour": info.get("flavour", ""),
            "signed": bool(info.get("signed")),
        })
    dkms = {"present": bool(module.get_bin_path("dkms")), "modules": []}
    if dkms["present"]:
        rc, out, _ = host.run(module, ["dkms", "status"], timeout=60)
        dkms["modules"] = parse_dkms_status(out) if rc == 0 else []
    return {"running": running, "kernels": found, "dkms": dkms}
