"""Container-runtime decisions: the engine kubelet uses, the NVIDIA package, and every runtime file.

Pure functions over plain data (no I/O), used by the container_runtime and nvidia_container_toolkit
modules on the nodes and by the filters on the controller. ``runtime_plan`` is the runtime section of
the host plan. Facts cite the source keys of docs/versions.md (section B), e.g. [ISS-NVD-1035].
"""

import copy
import fnmatch
import json
import posixpath

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plain import NotPlainError, require_text, to_plain
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import isolation, tomlio
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_patch import (
    scheduler_flag_value,
    systemd_exec_start,
    systemd_exec_start_files,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import VersionError, parse_version

NVIDIA_RUNTIME = "nvidia"
RUNC_V2 = "io.containerd.runc.v2"
# nvidia-ctk writes an absolute path for containerd/CRI-O and a bare name for Docker [NCT] docker.go.
DEFAULT_BINARY = "/usr/bin/nvidia-container-runtime"
DOCKER_DEFAULT_PATH = "nvidia-container-runtime"
RUNTIMES = ("docker", "containerd", "crio")  # the engines; "auto" picks one (container_runtime_choice)
# How GPUs reach containers: CDI (the node's CDI spec, injected by the engine or by nvidia-container-runtime in
# its "cdi" mode) or legacy (nvidia-container-runtime's hook and nvidia-container-cli). See runtime_mode.
MODES = ("auto", "cdi", "legacy")
# The node's spec: NVIDIA's folder and name (toolkit v1.20.0 deployments/systemd/nvidia-cdi-refresh.service writes
# NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml), as JSON, which the node-side checks read with the
# standard library; the refresh service is pointed at the same file (refresh_env_text).
CDI_SPEC_PATH = "/var/run/cdi/nvidia.json"
# The spec folders every engine scans by default (containerd v1.7.24 pkg/cri/config/config_unix.go and
# v2.1.0 internal/cri/config/config_unix.go; the CDI package's DefaultSpecDirs).
CDI_SPEC_DIRS = ["/etc/cdi", "/var/run/cdi"]
# The toolkit's config file (its postinst writes it with `nvidia-ctk config --in-place`, toolkit v1.20.0
# packaging/debian/nvidia-container-toolkit-base.postinst).
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"


def _version(value: object, what: str) -> "tuple[int, int, int]":
    try:
        return parse_version(value, what)
    except VersionError as err:
        raise KgnError(str(err)) from None


def _plain(value: object) -> object:
    try:
        return to_plain(value)
    except NotPlainError as err:
        raise KgnError(f"unsupported value of type {err}") from None


def _mapping(value: object, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KgnError(f"{what} must be a mapping (a parsed config file), got {type(value).__name__}")
    return _plain(value)


# --- decisions -----------------------------------------------------------------------------------


def docker_nvidia_package(docker_version: object) -> str:
    """NVIDIA package for a Docker engine version.

    Docker < 19.03 needs nvidia-docker2 (registers the ``nvidia`` runtime); from 19.03 Docker has
    ``--gpus`` and nvidia-container-toolkit is the package [ISS-NVD-1035], [NVDOCKER-README-OLD].
    Under Kubernetes the default runtime must be ``nvidia`` in both cases [DP-README-0.17]: that is
    the daemon.json merge's job, not the package's.
    """
    return "nvidia-docker2" if _version(docker_version, "docker_version") < (19, 3, 0) else "nvidia-container-toolkit"


def dockershim_available(kubernetes_version: object) -> bool:
    """Whether kubelet of this version talks to Docker itself (dockershim, removed in 1.24 [WEB-CRIDOCKERD]).

    From 1.24 Docker is only usable through cri-dockerd.
    """
    return _version(kubernetes_version, "kubernetes_version") < (1, 24, 0)


def container_runtime_choice(detected: object, kubernetes_version: object, requested: str = "auto") -> str:
    """The engine kubelet uses on a node: ``docker``, ``containerd`` or ``crio``.

    ``detected``: ``{docker: version|None, containerd: version|None, crio: version|None,
    cri_dockerd: bool}`` (what is installed). ``auto`` picks: CRI-O when present; Docker when
    dockershim exists (< 1.24) or cri-dockerd is installed [WEB-CRIDOCKERD]; otherwise containerd.
    """
    found = _mapping(detected, "container_runtime_choice: the detected runtimes")
    installed = [name for name in RUNTIMES if found.get(name)]
    if requested not in ("auto", *RUNTIMES):
        raise KgnError(
            f"container_runtime {requested!r} is not supported; use one of auto, {', '.join(RUNTIMES)}"
        )
    if requested != "auto":
        if requested not in installed:
            raise KgnError(
                f"container_runtime is {requested!r} but {requested} is not installed on this node "
                f"(found: {', '.join(installed) or 'none'}); install it first or set container_runtime to auto"
            )
        if requested == "docker" and not dockershim_available(kubernetes_version) and not found.get("cri_dockerd"):
            raise KgnError(
                f"container_runtime is 'docker' but Kubernetes {kubernetes_version} has no dockershim "
                "(removed in 1.24) and cri-dockerd is not installed; install cri-dockerd or use containerd"
            )
        return requested
    if "crio" in installed:
        return "crio"
    if "docker" in installed and (dockershim_available(kubernetes_version) or found.get("cri_dockerd")):
        return "docker"
    if "containerd" in installed:
        return "containerd"
    raise KgnError(
        f"container_runtime is auto but no usable engine was found for Kubernetes {kubernetes_version} "
        f"(found: {', '.join(installed) or 'none'}, cri-dockerd: {bool(found.get('cri_dockerd'))}); "
        "install containerd, CRI-O, or Docker (+ cri-dockerd from 1.24)"
    )


def _cri_plugin(config_version: int) -> str:
    # [NCT] containerd.go criRuntimePluginName: 1 -> "cri", 2 -> grpc.v1.cri, 3 -> cri.v1.runtime. Version 4
    # (containerd 2.3) keeps the CRI plugin ids of 3: its migration only moves the server settings ([grpc],
    # [ttrpc], [debug], [metrics]) into plugins (containerd v2.3.0 cmd/containerd/server/config/config.go
    # serviceMigrate; plugins/cri/runtime/plugin.go configMigration acts only on versions before 3).
    return {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime",
            4: "io.containerd.cri.v1.runtime"}[config_version]


def _new_config_version(version: "tuple[int, int, int]") -> int:
    """The config version containerd itself writes (`containerd config default`): 2 for 1.x, 3 for 2.0-2.2, 4 from
    2.3 (containerd v2.3.0 version/version.go ConfigVersion = 4; v2.2.0 and v2.1.0: 3)."""
    if version >= (2, 3, 0):
        return 4
    return 3 if version >= (2, 0, 0) else 2


def containerd_layout(containerd_version: object) -> dict:
    """Config layout for a containerd version.

    Config version 2 for containerd 1.3-1.7, version 3 for 2.0-2.2, 4 from 2.3 [NCT], [CTRD-REL]. ``imports`` exist
    from 1.3 (containerd#3574); 1.3.0 only matched imported CRI tables under ``plugins.cri``
    (containerd#3776), so drop-ins are used from 1.4. Before 2.0 an imported file replaces a
    plugin's table as a whole (containerd#5837), so the drop-in carries the whole CRI table (like
    nvidia-ctk's getBaseDropInConfigTree [NCT]); 2.0 merges tables key by key (containerd#9982).
    """
    version = _version(containerd_version, "containerd_version")
    if version < (1, 3, 0):
        raise KgnError(
            f"containerd {containerd_version} is older than 1.3 (config version 1, plugin 'cri'); "
            "upgrade containerd to 1.6 or newer"
        )
    config_version = _new_config_version(version)
    plugin = _cri_plugin(config_version)
    return {
        "config_version": config_version,
        "cri_plugin": plugin,
        "runtimes_path": ["plugins", plugin, "containerd", "runtimes"],
        "default_runtime_path": ["plugins", plugin, "containerd", "default_runtime_name"],
        "imports_supported": version >= (1, 4, 0),
        "imports_merge": "key" if config_version >= 3 else "plugin",
    }


def nvidia_repo_layout(
    toolkit_version: object,
    base_url: str = "https://nvidia.github.io",
    distribution: str = "",
    family: str = "deb",
) -> dict:
    """NVIDIA's package repository for a container-toolkit version [NCT-1.10-APT], [NCT-1.12.1], [NCT-INSTALL].

    < 1.6.0: the nvidia-docker repository (three repos per distribution); 1.6.0-1.13.x:
    ``libnvidia-container/<distribution>``; >= 1.14.0: distribution-independent
    ``libnvidia-container/stable/<deb|rpm>``. ``base_url`` is NVIDIA's site or a mirror of it.
    apt lines use ``$(ARCH)``, which apt expands itself. ``rpm_repos`` are the sections of NVIDIA's
    own .repo file for that era (section id, ``<url>/$basearch``, each repository's own gpgkey):
    NVIDIA/libnvidia-container gh-pages ``stable/rpm/nvidia-container-toolkit.repo`` and
    ``centos7/libnvidia-container.repo``, NVIDIA/nvidia-docker gh-pages ``centos7/nvidia-docker.repo``.
    """
    version = _version(toolkit_version, "nvidia_container_toolkit_version")
    if family not in ("deb", "rpm"):
        raise KgnError(f"package family {family!r} is not supported; use deb or rpm")
    base = str(base_url).rstrip("/")
    if not base:
        raise KgnError("the repository base URL is empty; set it to https://nvidia.github.io or a mirror")
    if version >= (1, 14, 0):
        era, paths, key = "stable", [f"libnvidia-container/stable/{family}"], "libnvidia-container/gpgkey"
        repo_file = "libnvidia-container/stable/rpm/nvidia-container-toolkit.repo"
    else:
        if not distribution:
            raise KgnError(
                f"toolkit {toolkit_version} predates the distribution-independent repository (1.14.0): "
                "give the distribution as NVIDIA names it, e.g. 'ubuntu18.04' or 'debian10'"
            )
        if version >= (1, 6, 0):
            era, paths, key = (
                "libnvidia-container",
                [f"libnvidia-container/{distribution}"],
                "libnvidia-container/gpgkey",
            )
            repo_file = f"libnvidia-container/{distribution}/libnvidia-container.repo"
        else:
            era = "nvidia-docker"
            repos = ("libnvidia-container", "nvidia-container-runtime", "nvidia-docker")
            paths = [f"{repo}/{distribution}" for repo in repos]
            key = "nvidia-docker/gpgkey"
            repo_file = f"nvidia-docker/{distribution}/nvidia-docker.repo"
    urls = [f"{base}/{path}" for path in paths]
    # NVIDIA's section ids: the repository's name (below 1.14), nvidia-container-toolkit (stable).
    ids = [path.split("/")[0] for path in paths] if era != "stable" else ["nvidia-container-toolkit"]
    return {
        "era": era,
        "repo_urls": urls,
        "apt_suites": [f"{url}/$(ARCH) /" for url in urls] if family == "deb" else [],
        "rpm_repo_file_url": f"{base}/{repo_file}" if family == "rpm" else "",
        "rpm_repos": [
            {"id": repo_id, "baseurl": f"{url}/$basearch", "gpgkey": f"{base}/{path.split('/')[0]}/gpgkey"}
            for repo_id, url, path in zip(ids, urls, paths)
        ]
        if family == "rpm"
        else [],
        "gpgkey_url": f"{base}/{key}",
        "keyring": "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg",
        "apt_list_file": "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
        "yum_repo_file": "/etc/yum.repos.d/nvidia-container-toolkit.repo",
    }


def nvidia_toolkit_rpm_packages(
    toolkit_version: object,
    package: str = "nvidia-container-toolkit",
    nvidia_docker2_version: object = "2.14.0",
    installed: object = None,
) -> dict:
    """The pinned rpm packages of the container toolkit and what dnf/yum still has to do for them.

    ``nvidia-container-toolkit-<version>``, plus ``nvidia-container-toolkit-base-<version>`` from 1.11.0
    (the toolkit was split then; the apt path pins the same pair), plus ``nvidia-docker2-<version>``
    when ``package`` is nvidia-docker2 (Docker < 19.03, docker_nvidia_package). ``installed``:
    ``name=version-release`` of the installed ones, one per line of ``rpm -q --qf '%{NAME}=%{VERSION}-%{RELEASE}'``.
    A spec is met when the installed version is the pin or the pin followed by ``-<release>``.
    ``moved``: packages installed at another version, whose version lock must go before dnf can
    move them to the pin.
    """
    name = "nvidia_toolkit_rpm_packages"
    version = _version(toolkit_version, "nvidia_container_toolkit_version")
    if package not in ("nvidia-container-toolkit", "nvidia-docker2"):
        raise KgnError(f"{name}: package {package!r} is not nvidia-container-toolkit or nvidia-docker2")
    if installed is None:
        installed = []
    if not isinstance(installed, list) or not all(isinstance(i, str) and "=" in i for i in installed):
        raise KgnError(f"{name}: installed {installed!r} must be a list of 'name=version-release' strings")
    pins = [("nvidia-container-toolkit", str(toolkit_version))]
    if version >= (1, 11, 0):
        pins.append(("nvidia-container-toolkit-base", str(toolkit_version)))
    if package == "nvidia-docker2":
        _version(nvidia_docker2_version, "nvidia_container_toolkit_nvidia_docker2_version")
        pins.append(("nvidia-docker2", str(nvidia_docker2_version)))
    have = dict(i.split("=", 1) for i in installed)
    unmet = [(pkg, pin) for pkg, pin in pins if have.get(pkg) != pin and not have.get(pkg, "").startswith(pin + "-")]
    return {
        "install": [f"{pkg}-{pin}" for pkg, pin in pins],
        "names": [pkg for pkg, _ in pins],
        "unmet": [f"{pkg}-{pin}" for pkg, pin in unmet],
        "moved": [pkg for pkg, _ in unmet if pkg in have],
    }


# --- the runtime mode: CDI or legacy ----------------------------------------------------------------

# First engine release with CDI: containerd 1.7.0 (enable_cdi, containerd v1.7.24 pkg/cri/config/config.go), CRI-O
# 1.23.0 (always on), Docker 25.0 (features.cdi, an opt-in: cncf-tags/container-device-interface#84, docker/cli
# docs/reference/dockerd.md).
ENGINE_CDI = {"containerd": (1, 7, 0), "crio": (1, 23, 0), "docker": (25, 0, 0)}
# `nvidia-ctk cdi generate` exists from toolkit 1.12 (cmd/nvidia-ctk/cdi/generate at v1.12.0); the project asks for
# 1.14 (the stable repository) for an explicit cdi. From 1.18 NVIDIA makes CDI the default (jit-cdi,
# internal/info/auto.go at v1.18.0) and ships nvidia-cdi-refresh: auto takes CDI from there.
TOOLKIT_CDI = (1, 14, 0)
TOOLKIT_CDI_DEFAULT = (1, 18, 0)


def runtime_mode(inputs: object, observed: object = None) -> dict:
    """How GPUs reach the node's containers: ``{mode: "cdi"|"legacy", why, engine, engine_version, toolkit_version}``.

    The one decision of the mode, called by the runtime plan on the node and by controller-side checks with the
    inventory settings and the recorded observation (``kgn_observed_container_runtime``). ``inputs``: ``mode``
    (auto|cdi|legacy, default auto), ``engine`` (auto|docker|containerd|crio), ``kubernetes_version``,
    ``toolkit_version`` (the pinned toolkit); ``observed``: ``versions`` {docker, containerd, crio},
    ``cri_dockerd``, ``toolkit_version`` (the installed one, when recorded: it wins over the pin).
    ``auto`` is CDI where the toolkit is 1.18 or later and the engine has CDI (containerd 1.7, CRI-O 1.23,
    Docker 25), as NVIDIA's GPU Operator does from v25.10; legacy otherwise (nvidia-docker2, Docker < 25,
    containerd < 1.7). An explicit ``cdi`` the node cannot run is refused, saying what to change.
    """
    inputs = _mapping(inputs, "runtime_mode: inputs")
    observed = _mapping(observed, "runtime_mode: observed")
    requested = inputs.get("mode") or "auto"
    if requested not in MODES:
        raise KgnError(f"nvidia_container_runtime_mode {requested!r} is not one of {', '.join(MODES)}")
    assumed: list = []
    versions = _observed_versions(observed, {"engine": inputs.get("engine") or "auto",
                                             "kubernetes_version": inputs["kubernetes_version"]}, assumed)
    detected = {**versions, "cri_dockerd": bool(observed.get("cri_dockerd"))}
    engine = container_runtime_choice(detected, inputs["kubernetes_version"], inputs.get("engine") or "auto")
    engine_version = versions[engine]
    toolkit = observed.get("toolkit_version") or inputs.get("toolkit_version")
    result = {"engine": engine, "engine_version": engine_version, "toolkit_version": toolkit, "assumed": assumed}
    if requested == "legacy":
        return {**result, "mode": "legacy", "why": "nvidia_container_runtime_mode is legacy"}
    problems = []
    if engine == "docker" and docker_nvidia_package(engine_version) == "nvidia-docker2":
        problems.append(f"Docker {engine_version} needs nvidia-docker2, which has no CDI")
    if _version(engine_version, f"{engine} version") < ENGINE_CDI[engine]:
        first = ".".join(str(n) for n in ENGINE_CDI[engine])
        problems.append(f"{engine} {engine_version} has no CDI (from {engine} {first})")
    need = TOOLKIT_CDI if requested == "cdi" else TOOLKIT_CDI_DEFAULT
    if not toolkit:
        problems.append("no container toolkit version is known (nvidia_container_toolkit_version)")
    elif _version(toolkit, "toolkit version") < need:
        problems.append(f"container toolkit {toolkit} is older than {'.'.join(str(n) for n in need)}"
                        + (" (CDI by default and nvidia-cdi-refresh)" if requested == "auto" else ""))
    if not problems:
        why = (f"{engine} {engine_version} and container toolkit {toolkit} support CDI"
               + (" (auto)" if requested == "auto" else ""))
        return {**result, "mode": "cdi", "why": why}
    if requested == "cdi":
        raise KgnError(
            f"nvidia_container_runtime_mode is cdi but {'; '.join(problems)}. Upgrade what is named, or set "
            "nvidia_container_runtime_mode to auto (CDI where supported) or legacy"
        )
    return {**result, "mode": "legacy", "why": f"auto: {'; '.join(problems)}"}


def _toml_value(value):
    return ("true" if value else "false") if isinstance(value, bool) else f'"{value}"'


def toolkit_config_text(existing: object, default: object, mode: str, top: object = None) -> str:
    """The toolkit's config.toml with ``[nvidia-container-runtime] mode`` set to ``mode`` ("cdi" or "legacy") and
    each top-level key of ``top`` (``{key: value}``; None leaves the key as the file has it) set.

    Starts from the file on the node, or, when it is missing, from ``nvidia-ctk config default`` (what the
    package's postinst writes). Only those lines change: comments and the user's other keys stay, as with
    ``nvidia-ctk config --in-place --set ...``. A top-level key the file shows only commented out
    (``#key = default``, as the toolkit's default file lists them) is set on that line.
    """
    if mode not in ("cdi", "legacy"):
        raise KgnError(f"toolkit_config_text: mode {mode!r} is not cdi or legacy")
    text = existing if existing is not None else default
    text = "" if text is None else require_text(str(text), TOOLKIT_CONFIG)
    toml_parse(text, TOOLKIT_CONFIG)
    lines = text.splitlines()
    wanted = {("nvidia-container-runtime", "mode"): mode}
    wanted.update({(None, key): value for key, value in (top or {}).items() if value is not None})
    for (section, key), value in wanted.items():
        _set_line(lines, section, key, f"{key} = {_toml_value(value)}")
    result = "\n".join(lines) + "\n"
    parsed = toml_parse(result, TOOLKIT_CONFIG)
    for (section, key), value in wanted.items():
        if (parsed.get(section, {}) if section else parsed).get(key) != value:
            name = f"{section}.{key}" if section else key
            raise KgnError(f"{TOOLKIT_CONFIG}: could not set {name} to {value!r}; fix the file")
    return result


def _set_line(lines: list, section: object, key: str, wanted: str) -> None:
    """Set ``key`` of ``section`` (None: the top level) in the TOML ``lines``: its line, else its commented-out
    line, else a new line at the section's start (top level: before the first table)."""
    current, header, commented, first_table = None, None, None, None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip()
            first_table = index if first_table is None else first_table
            if current == section:
                header = index
            continue
        if current != section:
            continue
        if stripped.split("=")[0].strip() == key:
            lines[index] = wanted
            return
        named = stripped.lstrip("#").split("=")[0].strip() == key and "=" in stripped
        if section is None and commented is None and stripped.startswith("#") and named:
            commented = index
    if commented is not None:
        lines[commented] = wanted
    elif section is None:
        lines.insert(first_table if first_table is not None else len(lines), wanted)
    else:
        if header is None:
            lines += (["", f"[{section}]"] if lines else [f"[{section}]"])
            header = len(lines) - 1
        lines.insert(header + 1, wanted)


# --- Docker daemon.json ----------------------------------------------------------------------------


def json_document(text: object, path: str = "the file") -> dict:
    """Parse a JSON object from ``text``; the error names ``path``, line and column. Empty -> {}."""
    body = "" if text is None else require_text(str(text), path)
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except json.JSONDecodeError as err:
        raise KgnError(
            f"{path} is not valid JSON: line {err.lineno}, column {err.colno}: {err.msg}. "
            f"It was left unchanged; fix that line (or move the file away) and run again"
        ) from None
    if not isinstance(data, dict):
        raise KgnError(f"{path} must hold a JSON object ({{...}}), found {type(data).__name__}")
    return _plain(data)


def docker_daemon_merge(
    existing: object,
    runtime_path: str = DOCKER_DEFAULT_PATH,
    runtime_args: object = None,
    set_default: bool = True,
    cdi: bool = False,
) -> dict:
    """daemon.json with the nvidia runtime merged in; every other key is kept as it is.

    ``cdi``: ``features.cdi = true`` (Docker 25 and later; nvidia-ctk ``--cdi.enabled`` sets the same key,
    [NCT] docker.go EnableCDI), the other features kept.
    Sets ``runtimes.nvidia.path`` and ``runtimeArgs`` (Docker's documented key; nvidia-ctk writes
    ``args``, which Docker ignores [NCT] docker.go vs dockerd.md) and ``default-runtime: nvidia``,
    which Kubernetes needs on Docker whatever the Docker version [DP-README-0.17], [ISS-DP-168].
    """
    config = _mapping(existing, "docker_daemon_merge: the existing daemon.json")
    args = _plain(runtime_args) if runtime_args is not None else []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise KgnError(f"runtime_args must be a list of strings, got {runtime_args!r}")
    runtimes = config.get("runtimes", {})
    if not isinstance(runtimes, dict):
        raise KgnError(f"daemon.json 'runtimes' must be an object, found {type(runtimes).__name__}")
    entry = runtimes.get(NVIDIA_RUNTIME, {})
    if not isinstance(entry, dict):
        entry = {}
    entry.update({"path": str(runtime_path), "runtimeArgs": args})
    runtimes[NVIDIA_RUNTIME] = entry
    config["runtimes"] = runtimes
    if set_default:
        config["default-runtime"] = NVIDIA_RUNTIME
    if cdi:
        features = config.get("features", {})
        if not isinstance(features, dict):
            raise KgnError(f"daemon.json 'features' must be an object, found {type(features).__name__}")
        features["cdi"] = True
        config["features"] = features
    return config


# --- containerd ---------------------------------------------------------------------------------


def _dig(tree: dict, path: list, create: bool = False) -> dict:
    node = tree
    for key in path:
        child = node.get(key)
        if not isinstance(child, dict):
            if not create:
                return {}
            child = node[key] = {}
        node = child
    return node


def _file_config_version(config: dict, containerd_version: "tuple[int, int, int]") -> int:
    if not config:
        return _new_config_version(containerd_version)
    version = config.get("version", 1)
    if version not in (1, 2, 3, 4) or isinstance(version, bool):
        raise KgnError(f"containerd config has version = {version!r}; containerd knows 1 to 4 (4 from containerd 2.3)")
    if version == 1:
        raise KgnError(
            "containerd config.toml has no 'version' key (config version 1, plugin 'cri'); "
            "convert it to version 2 (containerd 1.x) or 3 (containerd 2.x, `containerd config migrate`) first"
        )
    if version == 3 and containerd_version < (2, 0, 0):
        raise KgnError("containerd config.toml is version 3 but containerd is 1.x, which reads only 1 and 2")
    if version == 4 and containerd_version < (2, 3, 0):
        # containerd refuses a newer version than its own (v2.1.0 cmd/containerd/server/config/config.go
        # ValidateVersion: "expected containerd config version equal to or less than `3`")
        raise KgnError(
            "containerd config.toml is version 4 (containerd 2.3) but containerd is older than 2.3, which reads "
            "only 1 to 3; upgrade containerd or write the file as version 3 (`containerd config migrate` of 2.2)")
    return version


def _base_runtime(cri: dict, builtin_cri: dict) -> "tuple[str, dict | None, bool]":
    """The runtime nvidia is modelled on: the default one (normally runc), from the file or else from
    containerd's built-in config. Returns (name, entry, found_only_in_builtin)."""
    default = _dig(cri, ["containerd"]).get("default_runtime_name", "runc")
    name = default if default != NVIDIA_RUNTIME else "runc"
    entry = _dig(cri, ["containerd", "runtimes"]).get(name)
    if isinstance(entry, dict):
        return name, entry, False
    entry = _dig(builtin_cri, ["containerd", "runtimes"]).get(name)
    return name, (entry if isinstance(entry, dict) else None), isinstance(entry, dict)


def _nvidia_entry(source: "dict | None", binary: str) -> dict:
    """The nvidia runtime: runc's entry (options incl. SystemdCgroup) with BinaryName [NCT] config.go."""
    entry = copy.deepcopy(source) if isinstance(source, dict) else {}
    entry["runtime_type"] = RUNC_V2
    options = entry.get("options") if isinstance(entry.get("options"), dict) else {}
    options["BinaryName"] = binary
    entry["options"] = options
    return entry


def containerd_nvidia(
    existing: object,
    containerd_version: object,
    runtime_path: str = DEFAULT_BINARY,
    dropin_path: str = "",
    set_default: bool = True,
    builtin: object = None,
    cdi: bool = False,
    cdi_spec_dir: str = "/var/run/cdi",
) -> dict:
    """containerd config with the nvidia runtime (default) for config version 2, 3 or 4.

    Returns ``{config, dropin, dropin_path, cri_plugin, config_version}``: ``config`` is the whole
    config.toml (unchanged but for ``imports`` when a drop-in is used), ``dropin`` the drop-in
    document or None. A config that disables the CRI plugin is refused: kubelet could not use it.
    ``builtin``: the parsed ``containerd config default``. A file without a runc entry (Debian's) relies
    on containerd's built-in runc; writing ``runtimes.nvidia`` alone would replace that built-in table
    and drop runc (seen on containerd 1.6), so the built-in runc entry is written too.
    ``cdi``: turn CDI on in the CRI plugin (``enable_cdi = true``, off by default in 1.7, on from 2.0; written
    either way, as nvidia-ctk's ``--cdi.enabled`` does [NCT] containerd EnableCDI), and add ``cdi_spec_dir`` to
    ``cdi_spec_dirs`` when the file or the built-in config names folders without it.
    """
    version = _version(containerd_version, "containerd_version")
    layout = containerd_layout(containerd_version)
    config = _mapping(existing, "containerd_nvidia: the existing config.toml")
    disabled = [str(p) for p in config.get("disabled_plugins", []) or []]
    cri_names = {"cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"}
    if cri_names.intersection(disabled):
        raise KgnError(
            f"containerd config.toml has disabled_plugins = {disabled}: the CRI plugin is off (Docker's "
            "containerd.io package ships it that way), so kubelet cannot use containerd and no runtime "
            'can be added. Remove "cri" from disabled_plugins (or the whole file to start from containerd\'s '
            "default) and run again"
        )
    config_version = _file_config_version(config, version)
    plugin = _cri_plugin(config_version)
    merged = copy.deepcopy(config)
    merged["version"] = config_version
    cri = _dig(merged, ["plugins", plugin], create=True)
    live = _mapping(builtin, "containerd_nvidia: the built-in config (containerd config default)")
    live_cri = _dig(live, ["plugins", plugin]) if live.get("version", config_version) == config_version else {}
    base_name, base_entry, base_is_builtin = _base_runtime(cri, live_cri)
    nvidia = _nvidia_entry(base_entry, str(runtime_path))
    added = {NVIDIA_RUNTIME: nvidia}
    if base_is_builtin:
        added[base_name] = copy.deepcopy(base_entry)
    cdi_keys = _containerd_cdi_keys(cri, live_cri, cdi_spec_dir) if cdi else {}

    use_dropin = bool(dropin_path) and layout["imports_supported"]
    if not use_dropin:
        _dig(cri, ["containerd", "runtimes"], create=True).update(added)
        cri.update(cdi_keys)
        if set_default:
            _dig(cri, ["containerd"], create=True)["default_runtime_name"] = NVIDIA_RUNTIME
        return {
            "config": merged,
            "dropin": None,
            "dropin_path": "",
            "cri_plugin": plugin,
            "config_version": config_version,
        }

    # Drop-in: containerd 1.x replaces the whole plugin table on import, so carry all of it (containerd#5837).
    base = copy.deepcopy(cri) if config_version == 2 else {}
    base.update(cdi_keys)
    _dig(base, ["containerd", "runtimes"], create=True).update(added)
    if set_default:
        _dig(base, ["containerd"], create=True)["default_runtime_name"] = NVIDIA_RUNTIME
    dropin = {"version": config_version, "plugins": {plugin: base}}
    main = copy.deepcopy(config)
    main["version"] = config_version
    imports = [str(i) for i in main.get("imports", []) or []]
    if not any(fnmatch.fnmatch(dropin_path, pattern) for pattern in imports):
        imports.append(dropin_path)
    main["imports"] = imports
    return {
        "config": main,
        "dropin": dropin,
        "dropin_path": dropin_path,
        "cri_plugin": plugin,
        "config_version": config_version,
    }


def _containerd_cdi_keys(cri: dict, builtin_cri: dict, spec_dir: str) -> dict:
    """``enable_cdi`` and, when the folders in force lack ``spec_dir``, ``cdi_spec_dirs`` with it added."""
    keys: dict = {"enable_cdi": True}
    dirs = cri.get("cdi_spec_dirs")
    if not isinstance(dirs, list):
        dirs = builtin_cri.get("cdi_spec_dirs") if isinstance(builtin_cri.get("cdi_spec_dirs"), list) else None
    if dirs is not None and spec_dir not in dirs:
        keys["cdi_spec_dirs"] = [*dirs, spec_dir]
    return keys


# --- CRI-O ---------------------------------------------------------------------------------------


def crio_dropin(existing: object = None, runtime_path: str = DEFAULT_BINARY, set_default: bool = True,
                cdi_spec_dir: str = "") -> dict:
    """CRI-O drop-in document with the nvidia runtime [NCT] crio.go, [DP-README-0.17].

    CRI-O has CDI on with no switch; ``cdi_spec_dir`` (CDI mode) is added to ``cdi_spec_dirs`` only when the
    config names folders without it (CRI-O's default is /etc/cdi and /var/run/cdi).
    ``existing``: the parsed CRI-O config (crio.conf merged with its drop-ins) or {}; the options
    of its default runtime (``crun`` from CRI-O 1.31, ``runc`` before) are copied, then
    ``runtime_path`` and ``runtime_type = "oci"`` are set.
    """
    config = _mapping(existing, "crio_dropin: the existing CRI-O config")
    runtime = _dig(config, ["crio", "runtime"])
    default = runtime.get("default_runtime", "")
    source = _dig(runtime, ["runtimes"]).get(default) if default and default != NVIDIA_RUNTIME else None
    entry = copy.deepcopy(source) if isinstance(source, dict) else {}
    entry.update({"runtime_path": str(runtime_path), "runtime_type": entry.get("runtime_type", "oci")})
    section: dict = {"runtimes": {NVIDIA_RUNTIME: entry}}
    if set_default:
        section["default_runtime"] = NVIDIA_RUNTIME
    dirs = runtime.get("cdi_spec_dirs")
    if cdi_spec_dir and isinstance(dirs, list) and cdi_spec_dir not in dirs:
        section["cdi_spec_dirs"] = [*dirs, cdi_spec_dir]
    return {"crio": {"runtime": section}}


# --- TOML ----------------------------------------------------------------------------------------


def toml_parse(text: object, path: str = "the file") -> dict:
    """Parse TOML (module_utils/runtime/tomlio.py: tomllib, or the node's own package before Python 3.11); the
    error names ``path``. Empty -> {}."""
    body = "" if text is None else require_text(str(text), path)
    try:
        return _plain(tomlio.loads(body))
    except tomlio.NoReader:
        raise  # the node's Python, not the file: what to install
    except ValueError as err:
        raise KgnError(f"{path} is not valid TOML: {err}. It was left unchanged; fix it and run again") from None


def toml_emit(data: object) -> str:
    """Emit a mapping as TOML (tomli-w, on the control machine: plans are made there and nodes get the bytes)."""
    return tomlio.dumps(_mapping(data, "toml_emit: the document"))


# --- the runtime section of the host plan ----------------------------------------------------------

HEADER = "# Written by kube-gpu-nodes (nvidia_container_runtime).\n"
SERVICE = {"docker": "docker", "containerd": "containerd", "crio": "crio"}
# What the render assumes when the inventory does not say what the node runs (and why).
ASSUMED_VERSIONS = {"docker": "20.10.24", "containerd": "1.7.24", "crio": "1.30.0"}


def _observed_versions(observed: dict, inputs: dict, assumed: list) -> dict:
    versions = dict(observed.get("versions") or {})
    if "versions" in observed:
        return {name: versions.get(name) for name in RUNTIMES}
    # nothing recorded: the engine kubelet of this version would use, as a fresh node has it
    engine = inputs["engine"]
    if engine == "auto":
        engine = "docker" if dockershim_available(inputs["kubernetes_version"]) else "containerd"
    assumed.append(
        f"the node runs {engine} {ASSUMED_VERSIONS[engine]} and no other engine (no recorded observation; "
        "record one with a run against the node, or set kgn_observed_container_runtime.versions)"
    )
    return {name: ASSUMED_VERSIONS[name] if name == engine else None for name in RUNTIMES}


def _docker_files(inputs: dict, observed_files: dict, docker_version: str, cdi: bool) -> list:
    path = inputs["docker_config"]
    merged = docker_daemon_merge(json_document(observed_files.get(path), path), inputs["docker_runtime_path"],
                                 inputs["docker_runtime_args"], inputs["set_default"], cdi)
    validate = (["dockerd", "--validate", "--config-file=%s"]
                if _version(docker_version, "docker version") >= (23, 0, 0) else None)
    return [{"path": path, "content": json.dumps(merged, indent=4) + "\n", "mode": "0644", "validate": validate}]


def migration_needed(config_text: object, containerd_version: object) -> bool:
    """Whether config.toml is version 2 on containerd 2.x: the module then asks containerd itself to migrate it
    (``containerd --config <the file without imports> config migrate``) and the plan writes the 2.x layout."""
    if _version(containerd_version, "containerd_version") < (2, 0, 0) or not config_text:
        return False
    try:
        return toml_parse(config_text).get("version", 1) == 2
    except KgnError:
        return False


def _migrated(existing: dict, migrated: object, containerd_version: str, path: str, assumed: list) -> dict:
    """config.toml in the layout of the running containerd. A version 2 file on containerd 2.x (a node upgraded
    from 1.7, or Debian's packaged file) becomes what containerd's own migration makes of it (``containerd config
    migrate``: containerd v2.1.0 cmd/containerd/server/config/config.go MigrateConfigTo and each plugin's
    ConfigMigration, e.g. plugins/cri/runtime/plugin.go), with the file's own ``imports`` put back: containerd
    migrates a version 2 file at every start anyway (and logs a warning), so the settings in force are the same,
    now written where 2.x reads them. Without the migrated text (a render) the file stays version 2, said."""
    if not existing or existing.get("version", 1) != 2 or _version(containerd_version, "containerd") < (2, 0, 0):
        return existing
    if not migrated:
        assumed.append(f"{path} is version 2 on containerd {containerd_version}: a run migrates it to version "
                       f"{_new_config_version(_version(containerd_version, 'containerd'))} with `containerd config "
                       "migrate`; not recorded here, so the render keeps version 2 (containerd migrates it at start)")
        return existing
    base = toml_parse(migrated, "containerd config migrate")
    imports = [str(i) for i in existing.get("imports") or []]
    if imports:
        base["imports"] = imports
    else:
        base.pop("imports", None)
    return base


def _containerd_files(inputs: dict, observed: dict, containerd_version: str, assumed: list, cdi: bool) -> list:
    path, dropin_path = inputs["containerd_config"], inputs["containerd_dropin"]
    files = observed.get("files") or {}
    default_text = observed.get("containerd_default")
    text = files.get(path)
    if text is None:
        if default_text is None:
            assumed.append(
                f"{path} does not exist and containerd's built-in default (`containerd config default`) was not "
                "recorded: the rendered config.toml holds only what this project adds, while a run starts from "
                "the node's built-in default"
            )
        text = default_text or ""
    existing = toml_parse(text, path)
    existing = _migrated(existing, observed.get("containerd_migrated"), containerd_version, path, assumed)
    result = containerd_nvidia(
        existing, containerd_version, inputs["binary"], dropin_path, inputs["set_default"],
        toml_parse(default_text or "", "containerd config default"), cdi, _spec_dir(inputs),
    )
    check = ["containerd", "--config", "%s", "config", "dump"]
    planned = [{"cri_plugin": result["cri_plugin"]}]
    if result["dropin"] is not None:
        planned.append({"path": dropin_path, "content": HEADER + toml_emit(result["dropin"]), "mode": "0644",
                        "validate": check})
    planned.append({"path": path, "content": toml_emit(result["config"]), "mode": "0644", "validate": check})
    return planned[0]["cri_plugin"], planned[1:]


def _crio_files(inputs: dict, observed_files: dict, cdi: bool) -> list:
    existing = toml_parse(observed_files.get(inputs["crio_config"]), inputs["crio_config"])
    dropin = crio_dropin(existing, inputs["binary"], inputs["set_default"], _spec_dir(inputs) if cdi else "")
    # CRI-O has no check for a drop-in alone: the restart, its health check and the rollback stand for it.
    return [{"path": inputs["crio_dropin"], "content": HEADER + toml_emit(dropin), "mode": "0644", "validate": None}]


def _stale_files(engine: str, inputs: dict, observed: dict, containerd_version: "str | None") -> list:
    """Our drop-ins of engines the node no longer uses (an engine switch), and the import that named
    ours in config.toml: removed with the same care as a change."""
    files = observed.get("files") or {}
    stale = []
    dropin = inputs["containerd_dropin"]
    if engine != "containerd" and dropin and files.get(dropin) is not None:
        stale.append({"path": dropin, "content": None, "service": "containerd"})
        config_text = files.get(inputs["containerd_config"])
        config = toml_parse(config_text, inputs["containerd_config"]) if config_text else {}
        if dropin in (config.get("imports") or []):
            config["imports"] = [i for i in config["imports"] if i != dropin]
            if not config["imports"]:
                del config["imports"]
            stale.append({"path": inputs["containerd_config"], "content": toml_emit(config), "mode": "0644",
                          "service": "containerd"})
    if engine != "crio" and files.get(inputs["crio_dropin"]) is not None:
        stale.append({"path": inputs["crio_dropin"], "content": None, "service": "crio"})
    return stale


def file_repairs(plan: dict, observed: dict, orphaned: bool) -> list:
    """What a change puts back that this project had set up before, in words (a first install says nothing):
    containerd's config.toml no longer importing our drop-in (rewritten, e.g. by `containerd config default`),
    daemon.json's nvidia runtime path or default runtime changed by hand."""
    files = observed.get("files") or {}
    said = []
    if plan["engine"] == "containerd" and orphaned:
        config = plan["files"][-1]["path"]  # the drop-in first, config.toml last
        said.append(f"{config} no longer imported the nvidia drop-in (the file was rewritten, e.g. by `containerd "
                    "config default`): import put back, the user's settings kept, containerd restarted")
    if plan["engine"] == "docker" and plan["files"]:
        path = plan["files"][0]["path"]
        try:
            before = json_document(files.get(path), path)
            after = json.loads(plan["files"][0]["content"])
        except (KgnError, ValueError):
            return said
        old = (before.get("runtimes") or {}).get(NVIDIA_RUNTIME)
        new = after["runtimes"][NVIDIA_RUNTIME]
        if isinstance(old, dict) and old.get("path") != new["path"]:
            said.append(f"{path}: runtimes.nvidia.path was {old.get('path')!r}, set back to {new['path']!r}")
        if isinstance(old, dict) and after.get("default-runtime") and before.get("default-runtime") != \
                after["default-runtime"]:
            said.append(f"{path}: default-runtime was {before.get('default-runtime') or 'unset'!r}, set back to "
                        f"{after['default-runtime']!r}")
    return said


def judged(plan: dict, observed: dict, inputs: dict) -> dict:
    """What the module applying ``plan`` takes from the observation already judged (on the control machine, where
    TOML is read): ``dropin`` our containerd drop-in ("" when the plan has none), ``dropin_orphaned`` whether
    config.toml no longer imports it, ``file_repairs`` what the change puts back, ``toolkit_envvar_was`` whether
    the toolkit's config let unprivileged containers ask for GPUs by the variable (None when unread)."""
    files = observed.get("files") or {}
    config, path = inputs["containerd_config"], inputs["containerd_dropin"]
    dropin = path if any(f["path"] == path for f in plan["files"]) else ""
    orphaned = dropin_orphaned(files.get(config), dropin, files.get(dropin))
    was = None
    toolkit = plan.get("toolkit_files") or []
    if toolkit and files.get(toolkit[0]["path"]) is not None:
        try:
            was = toml_parse(files[toolkit[0]["path"]], toolkit[0]["path"]).get(isolation.ENVVAR_KEY, True)
        except KgnError:
            was = None
    return {"dropin": dropin, "dropin_orphaned": orphaned, "file_repairs": file_repairs(plan, observed, orphaned),
            "toolkit_envvar_was": was}


def toml_refusal(plan: dict, node: object) -> str:
    """Why a run cannot check the engine it would restart ("" when it can): the engine answers in TOML (``crio
    status config``; ``containerd config dump`` where crictl is missing) and ``node`` (what the module found:
    ``toml_reader``, ``python``, ``crictl``) has no TOML reader, so the health check after the restart could not
    tell a working engine from a broken one."""
    if not isinstance(node, dict) or node.get("toml_reader"):
        return ""
    engine = plan["engine"]
    if engine == "crio" or (engine == "containerd" and not node.get("crictl")):
        answer = "crio status config" if engine == "crio" else "containerd config dump, as crictl is not installed"
        return (f"{engine}'s answer after a restart is TOML ({answer}), and "
                f"{tomlio.no_reader_words(str(node.get('python') or '?'))}"
                + (" or crictl" if engine == "containerd" else ""))
    return ""


def dropin_orphaned(config_text: object, dropin_path: str, dropin_text: object) -> bool:
    """Whether our containerd drop-in is on disk but the main config no longer imports it (the config was
    rewritten, e.g. by ``containerd config default``, which has no ``imports``)."""
    if not dropin_path or dropin_text is None or config_text is None:
        return False
    try:
        imports = toml_parse(config_text).get("imports") or []
    except KgnError:
        return False  # an unreadable config is reported by the engine's own checks
    return not any(fnmatch.fnmatch(dropin_path, str(pattern)) for pattern in imports)


# --- the file that sets the default runtime last ---------------------------------------------------------------
# Each engine reads several files, and the last one that sets the default runtime decides it. When that file is not
# ours (an admin's file, another installer's) no restart makes nvidia the default: the run refuses before it changes
# anything, naming the file, what it sets and the choices (docs/versions.md, "B3b. A config file after ours"). This
# project does not override a later file, as it does not override a later systemd drop-in of kube-scheduler.

CRIO_DEFAULT_KEY = "[crio.runtime] default_runtime"
DOCKER_UNIT_HOW = ("for a packaged unit, with a drop-in in /etc/systemd/system/docker.service.d/ that resets "
                   "ExecStart= and repeats the command without it")
SET_DEFAULT_OFF = ("or keep that default and set nvidia_container_runtime_set_default: false (nvidia stays registered "
                   "but is not the default: GPU pods, the device plugin's included, then need a RuntimeClass whose "
                   "handler is nvidia)")


def _sorted_paths(paths: object) -> list:
    """Paths in the order Go lists them (filepath.Glob and filepath.Walk read each folder sorted by name): by their
    components, so that /a/b/x comes before /a/b.d/x."""
    return sorted(paths, key=lambda path: path.split("/"))


def glob_match(pattern: str, path: str) -> bool:
    """Go's filepath.Match on a whole path: ``*``, ``?`` and ``[...]`` never match ``/``; ``[^...]`` negates."""
    parts, names = pattern.split("/"), path.split("/")
    return len(parts) == len(names) and all(
        fnmatch.fnmatchcase(name, part.replace("[^", "[!")) for part, name in zip(parts, names))


def _clean(path: str) -> str:
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("/") else path


def containerd_imports(parent: str, imports: object, glob: object) -> "list[tuple[str, str]]":
    """``[(path, entry)]``: the files an ``imports`` list of ``parent`` names, as containerd resolves them (v1.7.24
    services/server/config/config.go and v2.1.0 cmd/containerd/server/config/config.go, resolveImports): each entry
    cleaned, a relative one taken from the folder of ``parent``, one with ``*`` expanded by ``glob(pattern)`` (Go's
    filepath.Glob: the matches sorted; ``?`` or ``[`` alone are not globs there), the others as they are."""
    found = []
    for entry in imports if isinstance(imports, list) else []:
        path = _clean(str(entry))
        if not path.startswith("/"):
            path = _clean(posixpath.join(posixpath.dirname(parent), path))
        if "*" in path:
            found.extend((match, str(entry)) for match in glob(path))
        else:
            found.append((path, str(entry)))
    return found


def containerd_load_order(config_path: str, texts: object) -> list:
    """``[{path, document, importer, entry}]``: the files containerd reads, in its order (v2.1.0
    cmd/containerd/server/config/config.go LoadConfigWithPlugins, v1.7.24 services/server/config/config.go
    LoadConfig): the main config, then its imports in order, then the imports of the first imported file, and so on
    (a queue: an import's imports come after every file queued before them); a file already read is not read
    again. ``texts``: ``{path: text or None}``, every file that exists (a glob matches among them). A missing or
    unreadable file is left out: containerd refuses to start on it, with its own error."""
    texts = _mapping(texts, "containerd_load_order: the files")
    known = [path for path, text in texts.items() if text is not None]

    def glob(pattern):
        return _sorted_paths(path for path in known if glob_match(pattern, path))

    order, loaded, pending = [], set(), [(config_path, None, None)]
    while pending:
        (path, importer, entry), pending = pending[0], pending[1:]
        if path in loaded:
            continue
        loaded.add(path)
        try:
            document = toml_parse(texts.get(path), path) if texts.get(path) is not None else None
        except KgnError:
            document = None
        if document is None:
            continue
        order.append({"path": path, "document": document, "importer": importer, "entry": entry})
        pending.extend((child, path, line) for child, line in containerd_imports(path, document.get("imports"), glob))
    return order


def _containerd_default_in(document: dict, version: "tuple[int, int, int]", builtin: str) -> "dict | None":
    """What one file does to the CRI default runtime: ``{key, value, table}`` or None when it leaves it alone.

    containerd 2.x migrates every file to its own config version before merging it (a version 2 file's
    ``io.containerd.grpc.v1.cri`` table becomes ``io.containerd.cri.v1.runtime``; plugins/cri/runtime/plugin.go
    configMigration) and then merges key by key, an empty value changing nothing (mergo.WithOverride). containerd
    1.x reads ``io.containerd.grpc.v1.cri`` and takes a plugin's whole table from the last file that has it
    (mergeConfig: ``to.Plugins[k] = v``; containerd#5837): a file with that table but no default_runtime_name sets
    it back to the built-in default."""
    if version >= (2, 0, 0):
        file_version = document.get("version", 1)
        if isinstance(file_version, bool) or file_version not in (1, 2, 3, 4):
            return None
        plugin = _cri_plugin(file_version)
        value = _dig(document, ["plugins", plugin, "containerd"]).get("default_runtime_name")
        if not isinstance(value, str) or not value:
            return None
        return {"key": f'plugins."{plugin}".containerd.default_runtime_name', "value": value, "table": False}
    plugin = _cri_plugin(2)
    if not isinstance((document.get("plugins") or {}).get(plugin), dict):
        return None
    value = _dig(document, ["plugins", plugin, "containerd"]).get("default_runtime_name")
    if isinstance(value, str) and value:
        return {"key": f'plugins."{plugin}".containerd.default_runtime_name', "value": value, "table": False}
    return {"key": f'plugins."{plugin}" (the whole table, without default_runtime_name)', "value": builtin,
            "table": True}


def containerd_default_setters(config_path: str, texts: object, containerd_version: object,
                               builtin: object = None) -> list:
    """The files that set containerd's CRI default runtime, in the order containerd reads them: the last one wins.
    Each is ``{path, key, value, table, importer, entry}`` (``importer``/``entry``: the file and the ``imports``
    line that brought it in, None for the main config). ``builtin``: the parsed ``containerd config default``,
    for the value a 1.x plugin table without the key falls back to (``runc`` when not known)."""
    version = _version(containerd_version, "containerd_version")
    live = _mapping(builtin, "containerd_default_setters: the built-in config")
    fallback = _dig(live, ["plugins", _cri_plugin(2), "containerd"]).get("default_runtime_name") or "runc"
    setters = []
    for loaded in containerd_load_order(config_path, texts):
        found = _containerd_default_in(loaded["document"], version, str(fallback))
        if found:
            setters.append({"path": loaded["path"], **found, "importer": loaded["importer"], "entry": loaded["entry"]})
    return setters


def crio_load_order(crio_config: str, dropin_dir: str, texts: object) -> list:
    """The files CRI-O reads, in its order (cri-o v1.33.0 internal/criocli/criocli.go mergeConfig, pkg/config/config.go
    UpdateFromFile and UpdateFromPath; docs/crio.conf.d.5.md): crio.conf, then every file under the drop-in folder
    in lexical order (filepath.Walk: subfolders too, any name), each decoded over the settings before it."""
    texts = _mapping(texts, "crio_load_order: the files")
    folder = _clean(dropin_dir).rstrip("/") + "/"
    dropins = [path for path, text in texts.items() if path.startswith(folder) and text is not None]
    return [path for path in [crio_config, *_sorted_paths(dropins)] if texts.get(path) is not None]


def crio_default_setters(crio_config: str, dropin_dir: str, texts: object) -> list:
    """The files that set CRI-O's ``[crio.runtime] default_runtime``, in its order (the last one wins): ``[{path,
    key, value}]``. A file that does not parse is left out (CRI-O refuses to start on it, with its own error)."""
    texts = _mapping(texts, "crio_default_setters: the files")
    setters = []
    for path in crio_load_order(crio_config, dropin_dir, texts):
        try:
            value = _dig(toml_parse(texts[path], path), ["crio", "runtime"]).get("default_runtime")
        except KgnError:
            continue
        if isinstance(value, str) and value:
            setters.append({"path": path, "key": CRIO_DEFAULT_KEY, "value": value})
    return setters


def _docker_flags(inputs: dict, observed: dict) -> "dict | None":
    """A dockerd flag in its systemd unit (the ExecStart systemd runs: the last of the unit and its drop-ins, sorted
    by name, that sets it; scheduler_patch.systemd_exec_start) that a change of daemon.json cannot live with:
    ``--config-file`` naming another file (dockerd then never reads ours), or ``--default-runtime`` while the plan
    sets ``default-runtime`` in daemon.json (dockerd refuses to start when an option is both a flag and in the
    file: docs.docker.com/reference/cli/dockerd/#daemon-configuration-file). ``observed.docker_unit``: ``{paths:
    [the unit, its drop-ins], texts: {path: text}}``. Flags from an EnvironmentFile (``$OPTIONS``) are not seen."""
    unit = observed.get("docker_unit") or {}
    texts = unit.get("texts") or {}
    paths = [path for path in unit.get("paths") or [] if texts.get(path) is not None]
    setting = systemd_exec_start_files([(path, texts[path]) for path in paths])
    if not setting:
        return None
    try:
        argv = systemd_exec_start([texts[path] for path in paths])
    except KgnError:
        return None  # no single command: systemd itself refuses the unit
    config_file = scheduler_flag_value(argv, "--config-file")
    if config_file and _clean(config_file) != _clean(inputs["docker_config"]):
        return {"path": setting[-1], "key": "--config-file", "value": config_file, "ours": inputs["docker_config"]}
    runtime = scheduler_flag_value(argv, "--default-runtime")
    if runtime is not None and inputs["set_default"]:
        return {"path": setting[-1], "key": "--default-runtime", "value": runtime, "ours": inputs["docker_config"]}
    return None


def _later_default(engine: str, inputs: dict, observed: dict, planned: list, version: object) -> "dict | None":
    """``{engine, path, key, value, ours, ...}`` when a file that is not ours decides the default runtime against
    the plan (or, for Docker, keeps dockerd from reading or accepting our daemon.json); None otherwise."""
    if engine == "docker":
        found = _docker_flags(inputs, observed)
        return {"engine": engine, **found, "config": inputs["docker_config"]} if found else None
    if not inputs["set_default"]:
        return None
    texts = {**(observed.get("files") or {}), **{f["path"]: f["content"] for f in planned}}
    if engine == "containerd":
        ours = planned[0]["path"]  # the drop-in when there is one, else config.toml: the file with our default
        builtin = toml_parse(observed.get("containerd_default") or "", "containerd config default")
        config = inputs["containerd_config"]
        setters = containerd_default_setters(config, texts, version, builtin)
    else:
        ours, config = inputs["crio_dropin"], inputs["crio_config"]
        setters = crio_default_setters(inputs["crio_config"], posixpath.dirname(ours), texts)
    if not setters or setters[-1]["path"] == ours or setters[-1]["value"] == NVIDIA_RUNTIME:
        return None
    return {"engine": engine, **setters[-1], "ours": ours, "config": config}


def _rename_hint(path: str, ours: str) -> str:
    name = posixpath.basename(path)
    number = posixpath.basename(ours)[:2]
    stem = name.split("-", 1)[-1] if name[:2].isdigit() and "-" in name else name
    return f"{posixpath.dirname(path)}/{'50' if number.isdigit() and number > '50' else '00'}-{stem}"


def default_refusal(plan: object) -> str:
    """The refusal of a plan whose default runtime a later file of the node decides (``plan['default_set_by']``),
    in words: the file, what it sets, why it wins and the choices; "" when there is none."""
    plan = _mapping(plan, "default_refusal: the plan")
    found = plan.get("default_set_by")
    if not found:
        return ""
    path, value, ours, key, config = found["path"], found["value"], found["ours"], found["key"], found["config"]
    if found["engine"] == "docker":
        if key == "--config-file":
            return (
                f"{path} starts dockerd with --config-file={value} (its ExecStart), so dockerd reads {value}, not "
                f"{ours}, where this project writes the nvidia runtime: a restart would not give Docker the nvidia "
                "runtime. This project does not override a unit's ExecStart. Choose one: set "
                f"nvidia_container_runtime_docker_config: {value} (this project then merges the runtime into that "
                f"file and keeps its other keys); or remove --config-file from the ExecStart in {path} "
                f"({DOCKER_UNIT_HOW})")
        return (
            f"{path} starts dockerd with --default-runtime={value} (its ExecStart), and this project sets "
            f"\"default-runtime\" in {ours}: dockerd refuses to start when an option is both a flag and in "
            "daemon.json (\"the following directives are specified both as a flag and in the configuration file\"), "
            "so a restart would leave Docker down. This project does not override a unit's ExecStart. Choose one: "
            f"remove --default-runtime from the ExecStart in {path} ({DOCKER_UNIT_HOW}); {SET_DEFAULT_OFF}")
    if found["engine"] == "crio":
        return (
            f"{path} sets {key} = \"{value}\" and CRI-O reads it after this project's drop-in {ours} (it reads "
            f"{config}, then every file in {posixpath.dirname(ours)}/ in "
            "lexical order; the last file that sets a key wins), so CRI-O would run "
            f"\"{value}\" by default whatever this project writes: a restart would not make nvidia the default. This "
            f"project does not override a later drop-in. Choose one: remove default_runtime from {path} (its other "
            f"settings stay); or rename it so that it sorts before {posixpath.basename(ours)} (for example "
            f"{_rename_hint(path, ours)}); {SET_DEFAULT_OFF}")
    if found.get("table"):
        what = (f"has a [plugins.\"{_cri_plugin(2)}\"] table without default_runtime_name: containerd 1.x takes a "
                f"plugin's whole table from the last file that has it (containerd#5837), so the default falls back to "
                f"\"{value}\" and the nvidia runtime of {ours} is dropped too")
        remove = (f"move that table's settings into {config} (this project copies its CRI table into {ours}) and "
                  f"remove the table from {path}")
    else:
        what, remove = f"sets {key} = \"{value}\"", f"remove default_runtime_name from {path} (its other settings stay)"
    if found.get("importer") == config and found.get("entry") and "*" in found["entry"] and \
            glob_match(_clean(posixpath.join(posixpath.dirname(config), found["entry"])), ours):
        before = (f"rename it so that it sorts before {posixpath.basename(ours)} (for example "
                  f"{_rename_hint(path, ours)}), as {found['entry']} imports both")
    elif found.get("importer") == config:
        before = f"list it before {ours} in the imports of {config}"
    else:
        before = (f"import it from {config} before {ours} (it is imported by {found.get('importer')}, and containerd "
                  f"reads an imported file's imports after every import of {config})")
    return (
        f"{path} {what}; containerd reads it after this project's {'drop-in ' if ours != config else ''}{ours} (it "
        f"reads {config}, then each of its imports in order, a glob's files sorted by name, then the imports of "
        "those files; the last file that sets a key wins), so containerd would run "
        f"\"{value}\" by default whatever this project writes: a restart would not make nvidia the default. This "
        f"project does not override a later file. Choose one: {remove}; or {before}; {SET_DEFAULT_OFF}")


PLAN_DEFAULTS = {"mode": "auto", "toolkit_version": None, "cdi_spec_path": CDI_SPEC_PATH,
                 "toolkit_config": TOOLKIT_CONFIG, "envvar_unprivileged": "auto", "stacks": []}


def _spec_dir(inputs: dict) -> str:
    return inputs["cdi_spec_path"].rsplit("/", 1)[0] or "/"


def _toolkit_files(inputs: dict, observed: dict, mode: str, isolation_policy: dict, assumed: list) -> list:
    """The toolkit's config.toml with the mode of the plan and who may ask for GPUs by NVIDIA_VISIBLE_DEVICES (no
    engine restart: the runtime reads it per container)."""
    path = inputs["toolkit_config"]
    files = observed.get("files") or {}
    existing, default = files.get(path), observed.get("toolkit_default")
    if existing is None and default is None:
        assumed.append(f"{path} does not exist and `nvidia-ctk config default` was not recorded: the rendered file "
                       "holds only the mode, while a run starts from the toolkit's defaults")
    top = isolation.toolkit_settings(isolation_policy)
    return [{"path": path, "content": toolkit_config_text(existing, default, mode, top), "mode": "0644"}]


# The toolkit's refresh of the spec (from 1.18): nvidia-cdi-refresh.path watches the kernel's module list and
# nvidia-ctk, and nvidia-cdi-refresh.service runs `nvidia-ctk cdi generate` with the output path of its env file
# (toolkit v1.20.0 deployments/systemd/nvidia-cdi-refresh.{path,service,env}).
REFRESH_UNIT = "nvidia-cdi-refresh.path"
REFRESH_ENV = "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"
OWN_REFRESH_UNIT = "kgn-cdi-refresh.path"
OWN_REFRESH_DIR = "/etc/systemd/system"


def refresh_env_text(existing: object, spec_path: str) -> str:
    """The refresh service's env file with ``NVIDIA_CTK_CDI_OUTPUT_FILE_PATH`` set to our spec (the JSON one we
    check), so the toolkit's refresh and this project write one spec, not two that name the same devices. The
    file's comments and other settings stay."""
    text = "" if existing is None else require_text(str(existing), REFRESH_ENV)
    wanted = f"NVIDIA_CTK_CDI_OUTPUT_FILE_PATH={spec_path}"
    lines = [line for line in text.splitlines() if not line.startswith("NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=")]
    return "\n".join([*lines, wanted]) + "\n"


def own_refresh_units(spec_path: str) -> list:
    """Our refresh trigger where the toolkit has none (before 1.18): the same watch and command as NVIDIA's units
    (toolkit v1.20.0 deployments/systemd/nvidia-cdi-refresh.path and .service), writing our spec."""
    service = (
        "# Written by kube-gpu-nodes: regenerate the NVIDIA CDI spec when the driver or the toolkit changes\n"
        "# (the same trigger as the toolkit's nvidia-cdi-refresh units, which this toolkit does not ship).\n"
        "[Unit]\nDescription=Refresh the NVIDIA CDI specification (kube-gpu-nodes)\n"
        "ConditionPathExists=/usr/bin/nvidia-ctk\n\n"
        "[Service]\nType=oneshot\nExecCondition=/bin/sh -c 'nvidia-smi -L'\n"
        f"ExecStart=/usr/bin/nvidia-ctk cdi generate --format=json --output={spec_path}\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    path_unit = (
        "# Written by kube-gpu-nodes: start kgn-cdi-refresh.service when the driver or the toolkit changes.\n"
        "[Unit]\nDescription=Trigger the NVIDIA CDI spec refresh on driver or toolkit changes (kube-gpu-nodes)\n\n"
        "[Path]\nPathChanged=/lib/modules/%v/modules.dep\nPathChanged=/lib/modules/%v/modules.dep.bin\n"
        "PathChanged=/usr/bin/nvidia-ctk\nUnit=kgn-cdi-refresh.service\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    return [{"path": f"{OWN_REFRESH_DIR}/kgn-cdi-refresh.service", "content": service, "mode": "0644"},
            {"path": f"{OWN_REFRESH_DIR}/{OWN_REFRESH_UNIT}", "content": path_unit, "mode": "0644"}]


def _cdi_section(inputs: dict, observed: dict, toolkit_version: object) -> dict:
    """The spec and its refresh: the toolkit's units pointed at our spec when installed, else our own. Not
    observed (a render): the toolkit ships them from 1.18."""
    spec_path = inputs["cdi_spec_path"]
    if "cdi_refresh_unit" in observed:
        toolkit_units = bool(observed["cdi_refresh_unit"])
    else:
        toolkit_units = bool(toolkit_version) and _version(toolkit_version, "toolkit version") >= TOOLKIT_CDI_DEFAULT
    files = observed.get("files") or {}
    if toolkit_units:
        refresh = {"unit": REFRESH_UNIT, "owner": "the container toolkit",
                   "files": [{"path": REFRESH_ENV, "content": refresh_env_text(files.get(REFRESH_ENV), spec_path),
                              "mode": "0644"}]}
    else:
        refresh = {"unit": OWN_REFRESH_UNIT, "owner": "kube-gpu-nodes", "files": own_refresh_units(spec_path)}
    return {"spec_path": spec_path, "spec_dir": _spec_dir(inputs), "refresh": refresh,
            "generate": ["nvidia-ctk", "cdi", "generate", "--format=json", "--output=%s"]}


def runtime_plan(inputs: object, observed: object) -> dict:
    """The container-runtime section of the host plan: which engine, the mode, the files it needs, what is removed.

    ``inputs``: the nvidia_container_runtime role's settings (``engine``, ``kubernetes_version``,
    ``set_default``, ``binary``, ``docker_config``, ``docker_runtime_path``, ``docker_runtime_args``,
    ``containerd_config``, ``containerd_dropin`` ("" = no drop-in), ``crio_config``, ``crio_dropin``, ``mode``
    auto|cdi|legacy, ``toolkit_version``, ``cdi_spec_path``, ``toolkit_config``).
    ``observed``: what the node shows (``versions`` {docker, containerd, crio}, ``cri_dockerd``,
    ``files`` {path: text or None}, ``containerd_default``, ``toolkit_version``, ``toolkit_default``); what is
    missing is assumed and listed in ``assumed``. Returns ``{runtime_mode, runtime_mode_why, cdi, toolkit_files,
    engine, service, cri_plugin, versions, files, remove, assumed}``; each file is ``{path, content, mode,
    validate}`` (validate: argv with %s for the candidate, or None). ``toolkit_files`` (the toolkit's config.toml
    with the mode, the refresh units or env file) need no engine restart; ``cdi`` (CDI mode only) names the spec
    the node generates (``generate``: argv, %s for the output), its folder and its refresh (``unit`` to enable).
    ``observed.cdi_refresh_unit``: whether the toolkit's nvidia-cdi-refresh.path is installed.
    ``default_set_by``: None, or the file of the node that decides the default runtime against the plan (a
    containerd import or CRI-O drop-in read after ours that sets another default; a docker unit's ExecStart with
    ``--default-runtime`` or another ``--config-file``: ``observed.docker_unit`` {paths, texts}), ``{engine, path,
    key, value, ours, config, ...}``; the module refuses it before any change (``default_refusal`` says why).
    ``observed.files`` then also holds the files containerd imports and those in CRI-O's drop-in folder.
    """
    inputs = {**PLAN_DEFAULTS, **_mapping(inputs, "runtime_plan: inputs")}
    observed = _mapping(observed, "runtime_plan: observed")
    assumed: list = []
    versions = _observed_versions(observed, inputs, assumed)
    decided = runtime_mode(inputs, observed)
    engine, mode = decided["engine"], decided["mode"]
    policy = isolation.envvar_policy(inputs["envvar_unprivileged"], inputs["stacks"],
                                     inputs.get("kubernetes_version"))
    cdi = mode == "cdi"
    files = observed.get("files") or {}
    cri_plugin = None
    if engine == "docker":
        planned = _docker_files(inputs, files, versions["docker"], cdi)
    elif engine == "containerd":
        cri_plugin, planned = _containerd_files(inputs, observed, versions["containerd"], assumed, cdi)
    else:
        planned = _crio_files(inputs, files, cdi)
    return {
        "runtime_mode": mode,
        "runtime_mode_why": decided["why"],
        "cdi": _cdi_section(inputs, observed, decided["toolkit_version"]) if cdi else None,
        "isolation": policy,
        "toolkit_files": _toolkit_files(inputs, observed, mode, policy, assumed)
        + (_cdi_section(inputs, observed, decided["toolkit_version"])["refresh"]["files"] if cdi else []),
        "engine": engine,
        "service": SERVICE[engine],
        "cri_plugin": cri_plugin,
        "versions": versions,
        "files": planned,
        "remove": _stale_files(engine, inputs, observed, versions.get("containerd")),
        "assumed": assumed,
        "default_set_by": _later_default(engine, inputs, observed, planned, versions.get(engine)),
    }
