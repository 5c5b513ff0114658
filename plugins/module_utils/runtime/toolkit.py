"""The nvidia_container_toolkit section of the host plan: NVIDIA's repository and the pinned runtime package.

Pure functions over plain data (no I/O). ``toolkit_plan`` decides, from the role's settings and what the
node shows, the repository layout of the toolkit version, the apt source or the .repo file (their text
is written here, for the node and for the render alike), which signing key to download and check,
the package (nvidia-docker2 below Docker 19.03, the toolkit otherwise), its pinned specs, which are
unmet, what must be held or version-locked, and which installed packages must be reinstalled because
files they own are missing or altered. The parsers below turn the node's command output (dpkg-query,
rpm -q, dpkg --verify / rpm -V, gpg --with-colons, apt-cache madison, versionlock list) into the
plain data the plan reads; the nvidia_container_toolkit module runs the commands.
"""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.nvidia import nvidia_apt_unmet
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plain import NotPlainError, to_plain
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime import (
    docker_nvidia_package,
    nvidia_repo_layout,
    nvidia_toolkit_rpm_packages,
)

HEADER = "# Written by kube-gpu-nodes (nvidia_container_toolkit).\n"
# Ansible's pkg_mgr fact -> package family.
FAMILIES = {"apt": "deb", "dnf": "rpm", "dnf5": "rpm", "yum": "rpm"}
# Ansible's os_family fact -> package family (an inventory may give that instead of pkg_mgr).
OS_FAMILIES = {"Debian": "deb", "RedHat": "rpm"}
# The plugin that gives yum/dnf the versionlock command (dnf5 has it built in).
VERSIONLOCK_PLUGINS = {"yum": "yum-plugin-versionlock", "dnf": "python3-dnf-plugin-versionlock"}
# Every package the module asks dpkg/rpm about (the pinned ones are a subset, per era and Docker).
PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "nvidia-docker2")
# The packages whose consistency is ours to repair: the pinned ones and the libraries they depend on at the same
# version (toolkit v1.20.0 packaging/debian/control: nvidia-container-toolkit depends on
# libnvidia-container-tools (= version), which depends on libnvidia-container1).
HEALTH_PACKAGES = (*PACKAGES, "libnvidia-container-tools", "libnvidia-container1")
# The toolkit's config file: its postinst writes it with `nvidia-ctk config --in-place` (toolkit v1.20.0
# packaging/debian/nvidia-container-toolkit-base.postinst; not a conffile from 1.18), so a deleted one is written
# again from `nvidia-ctk config default`, the same defaults.
CONFIG = "/etc/nvidia-container-runtime/config.toml"
# Where a pinned fingerprint's rpm keys are downloaded to be checked (dnf/yum import from gpgkey themselves).
RPM_KEY_DIR = "/etc/pki/rpm-gpg"
# The binary the toolkit ships and the engines run (checked to execute after every run).
BINARY = "nvidia-container-runtime"
PACKAGE_CHOICES = ("auto", "nvidia-container-toolkit", "nvidia-docker2")
INPUT_KEYS = ("version", "nvidia_docker2_version", "package", "hold", "repo_enabled", "repo_base_url",
              "repo_distribution", "gpg_key_fingerprint")


def refusal(pkg_mgr: object) -> str:
    """Today's message for a package manager the role does not handle."""
    return (
        "nvidia_container_toolkit installs with apt (Debian, Ubuntu) or dnf/yum (RHEL and its rebuilds, Oracle "
        f"Linux, Amazon Linux, Fedora); this host uses {pkg_mgr}. Nothing was changed: install the toolkit with "
        "its package manager yourself, or leave this host out of gpu_nodes."
    )


# --- parsers of the node's command output (pure) --------------------------------------------------


def parse_dpkg_query(text: object) -> dict:
    """``dpkg-query -W -f='${db:Status-Abbrev}|${Package}|${Version}\\n'`` -> ``{name: {version, held}}`` of
    the installed packages (status ``i``; ``h`` in the first column is a hold)."""
    packages = {}
    for line in str(text or "").splitlines():
        parts = line.split("|")
        if len(parts) != 3 or len(parts[0]) < 2:
            continue
        status, name, version = parts
        if status[1] == "i" and name and version:
            packages[name] = {"version": version, "held": status[0] == "h"}
    return packages


def parse_rpm_query(text: object) -> dict:
    """``rpm -q --qf '%{NAME}=%{VERSION}-%{RELEASE}\\n'`` -> ``{name: {version, held: False}}`` (the
    "package x is not installed" lines are skipped; rpm holds are version locks, read separately)."""
    packages = {}
    for line in str(text or "").splitlines():
        line = line.strip()
        if "=" in line and " " not in line:
            name, version = line.split("=", 1)
            packages[name] = {"version": version, "held": False}
    return packages


def parse_fingerprints(text: object) -> list:
    """The fingerprints in ``gpg --with-colons`` output (``fpr`` records, field 10), in order."""
    found = []
    for line in str(text or "").splitlines():
        fields = line.split(":")
        if fields[0] == "fpr" and len(fields) > 9 and fields[9] and fields[9] not in found:
            found.append(fields[9])
    return found


def parse_madison(text: object) -> dict:
    """``apt-cache madison`` -> ``{name: [versions the lists offer]}``."""
    offered: dict = {}
    for line in str(text or "").splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) >= 3 and parts[0] and parts[1]:
            versions = offered.setdefault(parts[0], [])
            if parts[1] not in versions:
                versions.append(parts[1])
    return offered


_VERIFY = re.compile(r"^(?P<check>missing|[.?SM5DLUGTPF]{8,9})\s+(?:(?P<attr>[cdglr])\s+)?(?P<path>/.*)$")


def verify_problems(text: object) -> list:
    """The broken files in ``dpkg --verify`` or ``rpm -V`` output (the same rpm-like format): files that are
    missing or whose checksum differs. Configuration files (attribute ``c``) are left out: a changed or
    deleted conffile is the administrator's, and reinstalling does not bring it back."""
    problems = []
    for line in str(text or "").splitlines():
        match = _VERIFY.match(line.rstrip())
        if not match or match["attr"] == "c":
            continue
        if match["check"] == "missing":
            problems.append(f"{match['path']} is missing")
        elif "5" in match["check"]:
            problems.append(f"{match['path']} differs from the package (checksum)")
    return problems


def versionlock_names(text: object, names: object = PACKAGES) -> list:
    """The package names among ``names`` that ``yum/dnf/dnf5 versionlock list`` shows locked. yum prints
    ``0:name-1.17.8-1.*``, dnf ``name-0:1.17.8-1.*``, dnf5 ``Package name: name``."""
    locked = []
    lines = [line.strip() for line in str(text or "").splitlines()]
    for name in names:
        entry = re.compile(rf"^(?:\d+:)?{re.escape(name)}-(?:\d+:)?\d")
        if any(entry.match(line) or line == f"Package name: {name}" for line in lines):
            locked.append(name)
    return locked


# --- the plan --------------------------------------------------------------------------------------


def _plain_mapping(value: object, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KgnError(f"{what} must be a mapping, got {type(value).__name__}")
    try:
        return to_plain(value)
    except NotPlainError as err:
        raise KgnError(f"{what}: unsupported value {err}") from None


def _family(observed: dict) -> tuple:
    """(family, pkg_mgr) from the observation: pkg_mgr (apt, dnf, dnf5, yum) or os_family (Debian, RedHat)."""
    pkg_mgr = observed.get("pkg_mgr")
    if pkg_mgr:
        if pkg_mgr not in FAMILIES:
            raise KgnError(refusal(pkg_mgr))
        return FAMILIES[pkg_mgr], pkg_mgr
    os_family = observed.get("os_family")
    if os_family:
        if os_family not in OS_FAMILIES:
            raise KgnError(refusal(f"an {os_family} system (os_family {os_family})"))
        return OS_FAMILIES[os_family], None
    raise KgnError(
        "no package family is known for this host (kgn_observed_nvidia_container_toolkit has neither pkg_mgr "
        "nor os_family), so neither the apt source nor the .repo file can be chosen. Run the role against the "
        "node once (it records kgn_observed_nvidia_container_toolkit), or set it in the inventory, e.g. "
        "kgn_observed_nvidia_container_toolkit: {pkg_mgr: apt} (apt, dnf, dnf5 or yum) or {os_family: RedHat}"
    )


def watched_paths(inputs: object, family: str) -> dict:
    """The files the module reads before planning: the apt source or .repo file, the key and keyring (deb),
    the checked copies of the rpm keys (rpm, with a pinned fingerprint)."""
    inputs = _inputs(inputs)
    layout = nvidia_repo_layout(inputs["version"], inputs["repo_base_url"], inputs["repo_distribution"], family)
    if family == "deb":
        return {"source": layout["apt_list_file"], "key": _key_file(layout), "keyring": layout["keyring"],
                "rpm_keys": []}
    keys = [_rpm_key_path(repo) for repo in layout["rpm_repos"]] if inputs["gpg_key_fingerprint"] else []
    return {"source": layout["yum_repo_file"], "key": None, "keyring": None, "rpm_keys": keys}


def _key_file(layout: dict) -> str:
    # the downloaded (armored) key beside the binary keyring apt's signed-by points at
    return re.sub(r"\.gpg$", ".asc", layout["keyring"])


def _rpm_key_path(repo: dict) -> str:
    return f"{RPM_KEY_DIR}/kgn-{repo['id']}.asc"


def _inputs(inputs: object) -> dict:
    inputs = _plain_mapping(inputs, "toolkit_plan: inputs")
    defaults = {"nvidia_docker2_version": "2.14.0", "package": "auto", "hold": True, "repo_enabled": True,
                "repo_base_url": "https://nvidia.github.io", "repo_distribution": "", "gpg_key_fingerprint": ""}
    merged = {**defaults, **{k: v for k, v in inputs.items() if v is not None}}
    if "version" not in merged:
        raise KgnError("toolkit_plan: inputs need version (nvidia_container_toolkit_version, e.g. '1.17.8')")
    if merged["package"] not in PACKAGE_CHOICES:
        raise KgnError(
            f"nvidia_container_toolkit_package {merged['package']!r} is not one of {', '.join(PACKAGE_CHOICES)}"
        )
    merged["gpg_key_fingerprint"] = str(merged["gpg_key_fingerprint"] or "").replace(" ", "").upper()
    return merged


def health_pins(plan: dict) -> dict:
    """{package: version prefix} the package-health repair puts back: every toolkit package at the toolkit's pin
    (the libraries share the toolkit's version), nvidia-docker2 at its own."""
    pins = {name: plan["version"] for name in HEALTH_PACKAGES if name != "nvidia-docker2"}
    for name, spec in zip(plan["names"], plan["specs"]):
        pins[name] = spec.split("=", 1)[-1].rstrip("*") if plan["family"] == "deb" else spec[len(name) + 1:]
    return pins


def config_restore(config_text: object, default_text: object, packages: dict, installed_now: bool) -> dict:
    """Whether the toolkit's config.toml must be written: ``{write, content, why, repair}``. It is written when the
    toolkit is installed and the file is missing, with ``nvidia-ctk config default`` (what the postinst writes); a
    repair when the toolkit was installed before this run (a file deleted by hand), an install otherwise."""
    if config_text is not None or "nvidia-container-toolkit-base" not in (packages or {}):
        return {"write": False, "content": None, "why": "", "repair": False}
    if not default_text:
        return {"write": False, "content": None, "repair": False,
                "why": f"{CONFIG} is missing and `nvidia-ctk config default` gave nothing to restore it from"}
    return {"write": True, "content": str(default_text), "repair": not installed_now,
            "why": f"{CONFIG} was missing: written from `nvidia-ctk config default` (as the package's postinst does)"}


def _package(inputs: dict, observed: dict, assumed: list) -> tuple:
    if inputs["package"] != "auto":
        return inputs["package"], "nvidia_container_toolkit_package asks for it"
    if "docker_version" not in observed:
        assumed.append(
            "no Docker version recorded: nvidia-container-toolkit is planned (Docker 19.03 or later, or no Docker); "
            "a node with Docker older than 19.03 gets nvidia-docker2. Record the observation with a run against the "
            "node, or set kgn_observed_nvidia_container_toolkit.docker_version"
        )
        return "nvidia-container-toolkit", "assumed: no Docker version recorded"
    docker = observed.get("docker_version")
    if not docker:
        return "nvidia-container-toolkit", "no Docker engine on the node"
    package = docker_nvidia_package(docker)
    older = "older than 19.03" if package == "nvidia-docker2" else "19.03 or later"
    return package, f"Docker {docker} ({older})"


def apt_source_text(layout: dict, version: str) -> str:
    """The apt source: one signed-by line per repository of the era."""
    lines = [HEADER, f"# NVIDIA container toolkit {version} ({layout['era']} layout)\n"]
    lines += [f"deb [signed-by={layout['keyring']}] {suite}\n" for suite in layout["apt_suites"]]
    return "".join(lines)


def yum_repo_text(layout: dict, version: str) -> str:
    """NVIDIA's .repo file for the era, with the sections and settings of NVIDIA's own files:
    NVIDIA/libnvidia-container gh-pages stable/rpm/nvidia-container-toolkit.repo (>= 1.14) and
    centos7/libnvidia-container.repo (1.6-1.13), NVIDIA/nvidia-docker gh-pages centos7/nvidia-docker.repo
    (< 1.6): repo_gpgcheck=1, gpgcheck=0, enabled=1 and each repository's own gpgkey. Left out: the disabled
    experimental section, and sslverify/sslcacert, which NVIDIA removed from its files
    (NVIDIA/libnvidia-container#370: dnf's defaults apply)."""
    text = HEADER + f"# NVIDIA container toolkit {version} ({layout['era']} layout)\n"
    for repo in layout["rpm_repos"]:
        text += (
            f"\n[{repo['id']}]\nname={repo['id']}\nbaseurl={repo['baseurl']}\n"
            f"repo_gpgcheck=1\ngpgcheck=0\nenabled=1\ngpgkey={repo['gpgkey']}\n"
        )
    return text


def _key_fetch(state: object, pin: str, mode_matters: bool = True) -> str:
    """Why a key must be downloaded ("" = it is in place). ``state``: {exists, mode, fingerprints}; a
    fingerprint list of None means unknown (no gpg on the node, or nothing recorded)."""
    state = state or {}
    if not state.get("exists"):
        return "missing"
    if mode_matters and state.get("mode") not in (None, "0644"):
        return f"mode {state.get('mode')}, not 0644"
    fprs = state.get("fingerprints")
    if fprs is not None and not fprs:
        return "not a key gpg can read"
    if pin and fprs is not None and pin not in fprs:
        return f"its fingerprint(s) {', '.join(fprs)} are not the pinned {pin}"
    return ""


def _deb_repository(inputs: dict, layout: dict, observed: dict) -> dict:
    """The key (downloaded when missing, not 0644, unreadable or not the pinned one) and the binary keyring
    (written when missing or holding other keys; the module also writes it when a download changed the key)."""
    pin = inputs["gpg_key_fingerprint"]
    key_why = _key_fetch(observed.get("key"), pin)
    keyring = observed.get("keyring") or {}
    key_fprs = (observed.get("key") or {}).get("fingerprints")
    if not keyring.get("exists"):
        ring_why = "missing"
    elif key_fprs is not None and keyring.get("fingerprints") is not None and keyring["fingerprints"] != key_fprs:
        ring_why = f"it holds other keys ({', '.join(keyring['fingerprints']) or 'none'}) than the key file"
    else:
        ring_why = ""
    return {
        "key": {"url": layout["gpgkey_url"], "path": _key_file(layout), "fingerprint": pin,
                "fetch": bool(key_why), "why": key_why},
        "keyring": {"path": layout["keyring"], "write": bool(ring_why), "why": ring_why},
    }


def _rpm_keys(inputs: dict, layout: dict, observed: dict) -> list:
    pin = inputs["gpg_key_fingerprint"]
    if not pin:
        return []
    states = observed.get("rpm_keys") or {}
    keys = []
    for repo in layout["rpm_repos"]:
        path = _rpm_key_path(repo)
        why = _key_fetch(states.get(path), pin, mode_matters=False)
        keys.append({"id": repo["id"], "url": repo["gpgkey"], "path": path, "fingerprint": pin,
                     "fetch": bool(why), "why": why})
    return keys


def _offered(spec: str, available: dict) -> bool:
    name, _, version = spec.partition("=")
    return any(v.startswith(version.rstrip("*")) for v in available.get(name, []))


def _repair(names: list, unmet_names: list, packages: dict, verify: dict, family: str) -> list:
    """Installed packages at their pin whose files are missing or altered: reinstalled at that version."""
    repair = []
    for name in names:
        problems = verify.get(name) or []
        if problems and name in packages and name not in unmet_names:
            version = packages[name]["version"]
            spec = f"{name}={version}" if family == "deb" else f"{name}-{version}"
            repair.append({"name": name, "version": version, "spec": spec, "problems": list(problems)})
    return repair


def toolkit_plan(inputs: object, observed: object) -> dict:
    """The nvidia_container_toolkit section of the host plan.

    ``inputs``: the role's settings (``version``, ``nvidia_docker2_version``, ``package`` auto|
    nvidia-container-toolkit|nvidia-docker2, ``hold``, ``repo_enabled``, ``repo_base_url``,
    ``repo_distribution``, ``gpg_key_fingerprint``). ``observed``: what the node shows: ``pkg_mgr`` (or
    ``os_family``; one of them is required), ``docker_version`` (None: no Docker; absent: assumed and said),
    ``packages`` {name: {version, held}}, ``files`` {path: text or None}, ``key``/``keyring`` {exists, mode,
    fingerprints} (deb), ``rpm_keys`` {path: {...}} and ``locked`` [names] (rpm), ``available`` {name:
    [versions]} (deb), ``verify`` {name: [problems]}.

    Returns ``{family, pkg_mgr, era, package, package_reason, docker_version, specs, names, installed, unmet,
    moved, install, refresh_lists, refresh_why, hold_wanted, hold, unhold, versionlock_plugin, release, lock, unlock,
    repair, repository, files, remove, binary, assumed}``; ``files`` are ``{path, content, mode}``.
    """
    inputs = _inputs(inputs)
    observed = _plain_mapping(observed, "toolkit_plan: observed")
    family, pkg_mgr = _family(observed)
    assumed: list = []
    layout = nvidia_repo_layout(inputs["version"], inputs["repo_base_url"], inputs["repo_distribution"], family)
    package, reason = _package(inputs, observed, assumed)
    packages = observed.get("packages") or {}
    installed = [f"{name}={info['version']}" for name, info in packages.items() if name in PACKAGES]
    rpm = nvidia_toolkit_rpm_packages(inputs["version"], package, inputs["nvidia_docker2_version"], installed)
    names = rpm["names"]
    pins = [spec[len(name) + 1:] for name, spec in zip(names, rpm["install"])]
    if family == "deb":
        specs = [f"{name}={pin}*" for name, pin in zip(names, pins)]
        unmet = nvidia_apt_unmet(specs, installed)
        unmet_names = [spec.split("=", 1)[0] for spec in unmet]
    else:
        specs, unmet = rpm["install"], rpm["unmet"]
        unmet_names = [name for name, spec in zip(names, specs) if spec in unmet]
    moved = [name for name in unmet_names if name in packages]

    files, remove, repository = [], [], {}
    source_path = layout["apt_list_file"] if family == "deb" else layout["yum_repo_file"]
    observed_files = observed.get("files") or {}
    if inputs["repo_enabled"]:
        write = apt_source_text if family == "deb" else yum_repo_text
        text = write(layout, inputs["version"])
        files.append({"path": source_path, "content": text, "mode": "0644"})
        repository = _deb_repository(inputs, layout, observed) if family == "deb" else {
            "keys": _rpm_keys(inputs, layout, observed)}
    elif str(observed_files.get(source_path) or "").startswith(HEADER):
        # the repository this role wrote, no longer asked for; a file someone else wrote stays
        remove.append({"path": source_path, "content": None})

    repair = _repair(names, unmet_names, packages, observed.get("verify") or {}, family)
    refresh_why = []
    if family == "deb":
        planned_source = files[0]["content"] if files else None
        if files and observed_files.get(source_path) != planned_source:
            refresh_why.append(f"{source_path} changes")
        if remove:
            refresh_why.append(f"{source_path} is removed")
        if repository.get("keyring", {}).get("write"):
            refresh_why.append(f"the keyring {repository['keyring']['path']} is written")
        wanted = (specs if unmet else []) + [item["spec"] for item in repair]
        if wanted and "available" in observed:
            unoffered = [spec for spec in wanted if not _offered(spec, observed.get("available") or {})]
            if unoffered:
                refresh_why.append(f"the apt lists do not offer {', '.join(unoffered)}")
    elif unmet:
        refresh_why.append("a package is installed (the pin may be newer than the cached metadata)")

    held = [name for name in names if (packages.get(name) or {}).get("held")]
    specs_names = names if unmet else []
    locked = [name for name in observed.get("locked") or [] if name in names]
    plugin = VERSIONLOCK_PLUGINS.get(pkg_mgr or "", "") if family == "rpm" else ""
    hold = inputs["hold"]
    plan = {
        "family": family,
        "pkg_mgr": pkg_mgr,
        "era": layout["era"],
        "version": inputs["version"],
        "package": package,
        "package_reason": reason,
        "docker_version": observed.get("docker_version"),
        "specs": specs,
        "names": names,
        "installed": {name: info["version"] for name, info in packages.items() if name in PACKAGES},
        "unmet": unmet,
        "moved": moved,
        "install": specs if unmet else [],
        "refresh_lists": bool(refresh_why),
        "refresh_why": refresh_why,
        "hold_wanted": hold,
        # apt-get install (and --reinstall) names the packages again and drops their hold: hold them after it
        "hold": [name for name in names if name not in held or name in specs_names
                 or name in [item["name"] for item in repair]] if hold and family == "deb" else [],
        "unhold": held if not hold and family == "deb" else [],
        "versionlock_plugin": plugin if hold and plugin and plugin not in packages else "",
        "release": [name for name in moved if name in locked] if hold else [],
        "lock": [name for name in names if name not in locked or name in moved] if hold and family == "rpm" else [],
        "unlock": locked if not hold else [],
        "repair": repair,
        "repository": repository,
        "files": files,
        "remove": remove,
        "binary": BINARY,
        "assumed": assumed,
    }
    return plan
