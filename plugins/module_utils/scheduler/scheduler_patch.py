"""How kube-scheduler is patched to use the generated config: pure functions over plain data.

Filters (documentation in the sidecar ``<filter>.yml`` files):

- ``scheduler_extender_urls``: the base URL of each stack's extender Service for the chosen mode.
- ``systemd_exec_start``: the effective ExecStart argv of a unit from its file and drop-ins
  (``systemd_exec_start_files``: which of them set it; the last one wins).
- ``systemd_exec_line``: an argv written as one systemd ExecStart= value (quoted, % and $ escaped).
- ``scheduler_args``: an argv with the managed config flag set exactly once.
- ``scheduler_static_pod``: a kubeadm static pod manifest with the flag, hostPath volume and mount.
- ``scheduler_flag_value``: the value of a flag in an argv (or None).

The version decisions (which flag, file and document) stay in scheduler.py; these functions only apply
them. scheduler_plan.py puts both together for the kgn.gpu_nodes.kube_scheduler_extender module.
"""

import copy
import re
import shlex

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

URL_MODES = ("auto", "loopback", "node_ip", "cluster_ip", "url")
# kube-proxy modes under which a NodePort does not answer on 127.0.0.1: IPVS binds
# NodePorts to the node's addresses only, nftables mode does not serve localhost NodePorts by design.
NO_LOOPBACK_NODEPORT = ("ipvs", "nftables")
CONFIG_FLAGS = ("--config", "--policy-config-file")
VOLUME_NAME = "kgn-scheduler-config"
CHECKSUM_ANNOTATION = "kube-gpu-nodes/scheduler-config-sha256"


def _fail(message: str) -> KgnError:
    return KgnError(message)


def scheduler_extender_urls(
    stacks, catalog, mode="auto", node_ip="", cluster_ips=None, urls=None, proxy_mode="unknown"
):
    """Base URL per extender stack: ``{stack: 'http://host:port'}``.

    ``catalog`` is ``gpu_sharing_stacks | stack_catalog`` (service name, port, node_port).
    ``urls`` (stack -> URL) always wins. ``auto`` means loopback NodePort when kube-proxy runs in
    iptables mode, else the node IP with the NodePort (works with iptables, IPVS and nftables).
    """
    if mode not in URL_MODES:
        raise _fail(f"kube_scheduler_extender_url_mode is {mode!r}; choose one of {', '.join(URL_MODES)}")
    cluster_ips = cluster_ips or {}
    urls = urls or {}
    if not isinstance(cluster_ips, dict) or not isinstance(urls, dict):
        raise _fail(
            "kube_scheduler_extender_cluster_ips and kube_scheduler_extender_urls must be mappings "
            "stack -> value, e.g. {gpushare: 'http://10.0.0.5:32766'}"
        )
    if mode == "auto":
        mode = "loopback" if proxy_mode == "iptables" else "node_ip"
    result = {}
    for stack in stacks or []:
        entry = (catalog or {}).get(stack) or {}
        service = entry.get("service")
        if not entry.get("extender") or not service:
            continue
        if stack in urls:
            result[stack] = str(urls[stack])
        elif mode == "url":
            raise _fail(
                f"kube_scheduler_extender_url_mode is 'url' but kube_scheduler_extender_urls has no entry "
                f"for stack {stack!r}; add e.g. {stack}: 'http://<host>:{service['node_port']}'"
            )
        elif mode == "loopback":
            if proxy_mode in NO_LOOPBACK_NODEPORT:
                raise _fail(
                    f"kube_scheduler_extender_url_mode 'loopback' cannot work: kube-proxy runs in {proxy_mode} mode, "
                    f"where NodePort {service['node_port']} does not answer on 127.0.0.1; use 'node_ip' (or 'auto', "
                    "'cluster_ip', 'url')"
                )
            result[stack] = f"http://127.0.0.1:{service['node_port']}"
        elif mode == "node_ip":
            if not node_ip:
                raise _fail(
                    f"no node IP for the extender URL of stack {stack!r}: set kube_scheduler_extender_node_ip "
                    "(or gather the default_ipv4 fact), or choose another kube_scheduler_extender_url_mode"
                )
            host = f"[{node_ip}]" if ":" in str(node_ip) else node_ip
            result[stack] = f"http://{host}:{service['node_port']}"
        else:  # cluster_ip
            if stack not in cluster_ips:
                raise _fail(
                    f"kube_scheduler_extender_url_mode is 'cluster_ip' but kube_scheduler_extender_cluster_ips "
                    f"has no entry for stack {stack!r} (Service {service['name']}); add {stack}: <its "
                    f"ClusterIP> (pin it with spec.clusterIP so it survives a re-create)"
                )
            result[stack] = f"http://{cluster_ips[stack]}:{service['port']}"
    return result


# ------------------------------------------------------------------------------------------------
# systemd
_LINE_CONT = re.compile(r"\\\n")


def _exec_start_values(text):
    """The ExecStart= values of the [Service] section of one unit file text ("" for a reset), in order."""
    values = []
    section = ""
    for raw in _LINE_CONT.sub(" ", str(text or "")).splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line.startswith("ExecStart="):
            values.append(line.split("=", 1)[1].strip())
    return values


def systemd_exec_start_files(unit_files):
    """The files that set ExecStart=, from ``[(path, text), ...]`` in systemd's order (the unit, then its drop-ins
    sorted by file name); the last one is the file whose command systemd runs."""
    return [path for path, text in unit_files or [] if _exec_start_values(text)]


def systemd_exec_start(unit_texts):
    """Effective ExecStart argv of a service from its unit file text followed by its drop-ins' texts.

    Like systemd: an empty ``ExecStart=`` resets the list, later files override earlier ones;
    line continuations are joined; the ``-@+!:`` prefixes are dropped. A service with several
    ExecStart lines (not allowed for Type=simple) is refused.
    """
    if isinstance(unit_texts, str):
        unit_texts = [unit_texts]
    commands: list[str] = []
    for text in unit_texts or []:
        for value in _exec_start_values(text):
            commands = [*commands, value] if value else []
    if not commands:
        raise _fail(
            "the kube-scheduler unit has no ExecStart= in [Service]; check kube_scheduler_extender_"
            "systemd_unit names the service that runs kube-scheduler"
        )
    if len(commands) > 1:
        raise _fail(f"the kube-scheduler unit has {len(commands)} ExecStart= lines; expected one command")
    command = commands[0].lstrip("-@+!:")
    try:
        argv = shlex.split(command.replace("%%", "%").replace("$$", "$"))
    except ValueError as err:
        raise _fail(f"cannot parse the kube-scheduler ExecStart {command!r}: {err}") from None
    return argv


def _systemd_word(word: str) -> str:
    escaped = word.replace("%", "%%").replace("$", "$$")
    if re.search(r"[\s\"'\\;]", escaped) or escaped == "":
        escaped = '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return escaped


def systemd_exec_line(argv):
    """An argv as a systemd ExecStart value, one flag per continuation line."""
    if not argv:
        raise _fail("systemd_exec_line: empty argv")
    return " \\\n  ".join(_systemd_word(str(w)) for w in argv)


# ------------------------------------------------------------------------------------------------
# flags
def _flag_name(arg: str) -> str:
    return arg.split("=", 1)[0] if arg.startswith("--") else ""


def scheduler_flag_value(argv, flag):
    """Value of ``--flag=value`` or ``--flag value`` in argv (last one wins), or None."""
    value = None
    items = [str(a) for a in argv or []]
    for index, arg in enumerate(items):
        if arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
        elif arg == flag and index + 1 < len(items) and not items[index + 1].startswith("--"):
            value = items[index + 1]
    return value


def scheduler_args(argv, flag, path, remove_flags=()):
    """argv with every config flag and every ``remove_flags`` entry dropped, then ``flag=path`` appended.

    argv[0] (the binary) is kept; every other flag keeps its place. Flags are matched in both the
    ``--flag=value`` and the ``--flag value`` spelling.
    """
    items = [str(a) for a in argv or []]
    if not items:
        raise _fail("scheduler_args: empty kube-scheduler command")
    drop = set(CONFIG_FLAGS) | {str(f) for f in remove_flags or ()} | {flag}
    result = [items[0]]
    skip_value = False
    for arg in items[1:]:
        if skip_value:
            skip_value = False
            if not arg.startswith("-"):
                continue
        name = _flag_name(arg)
        if name in drop:
            skip_value = "=" not in arg
            continue
        result.append(arg)
    result.append(f"{flag}={path}")
    return result


def scheduler_static_pod(manifest, flag, path, remove_flags=(), checksum=""):
    """A kubeadm kube-scheduler static pod with the config flag, a hostPath volume and its mount.

    The container named kube-scheduler (else the first) gets ``flag=path`` exactly once in its
    command (config flags in ``args`` are dropped too), the volume ``kgn-scheduler-config`` (hostPath
    File) and a read-only mount at the same path. ``checksum`` goes into an annotation so that a
    config change alone also changes the manifest, which is what makes the kubelet restart the pod.
    """
    if not isinstance(manifest, dict) or manifest.get("kind") != "Pod":
        raise _fail(
            "the kube-scheduler static pod manifest is not a Pod (kind: Pod); check "
            "kube_scheduler_extender_kubeadm_manifest"
        )
    pod = copy.deepcopy(manifest)
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if not containers:
        raise _fail("the kube-scheduler static pod manifest has no containers")
    container = next((c for c in containers if c.get("name") == "kube-scheduler"), containers[0])
    command = list(container.get("command") or [])
    if not command:
        raise _fail(
            "the kube-scheduler container has no command; kubeadm manifests start with command: [kube-scheduler, ...]"
        )
    container["command"] = scheduler_args(command, flag, path, remove_flags)
    if container.get("args"):
        drop = set(CONFIG_FLAGS) | set(remove_flags or ())
        container["args"] = [a for a in container["args"] if _flag_name(str(a)) not in drop]
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != VOLUME_NAME]
    mounts.append({"mountPath": path, "name": VOLUME_NAME, "readOnly": True})
    container["volumeMounts"] = mounts
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != VOLUME_NAME]
    volumes.append({"hostPath": {"path": path, "type": "File"}, "name": VOLUME_NAME})
    spec["volumes"] = volumes
    pod["spec"] = spec
    if checksum:
        metadata = pod.setdefault("metadata", {})
        annotations = dict(metadata.get("annotations") or {})
        annotations[CHECKSUM_ANNOTATION] = str(checksum)
        metadata["annotations"] = annotations
    return pod

