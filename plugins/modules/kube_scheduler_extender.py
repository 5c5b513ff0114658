#!/usr/bin/python
"""Point kube-scheduler at the GPU-sharing extenders (or take it back), safely and live."""

DOCUMENTATION = r"""
---
module: kube_scheduler_extender
short_description: Point kube-scheduler at the GPU-sharing scheduler extenders, safely and live
description:
  - Reads the control-plane host in one call (the kubeadm static pod manifest, the systemd unit and its drop-ins,
    the config the scheduler uses now, the kubeconfig, the scheduler version when it is not given, the host's
    addresses, kube-proxy's mode when the URL mode needs it, the running kube-scheduler processes), plans with
    the same code as the render (the kube_scheduler section of the host plan) and, when the plan or the live
    scheduler differs from the host, applies it.
  - The config (Policy JSON up to 1.18, KubeSchedulerConfiguration YAML after) is merged with the config the
    scheduler uses now, so your own extenders and settings stay. kubeadm; the manifest gets the config flag, a
    hostPath volume and mount and the config's sha256 as an annotation. systemd; a drop-in rebuilds ExecStart
    from the unit and the other drop-ins.
  - When no chosen stack needs an extender and the scheduler runs on this project's config, the scheduler goes
    back to the installer's own command (manifest without our flag, volume and annotations, the config flags our
    patch replaced put back; systemd drop-in removed) and this project's config file is removed. A scheduler
    that does not run on this project's config is left alone.
  - Apply; a systemd KubeSchedulerConfiguration is first checked by the host's scheduler binary
    (C(--write-config-to)); every touched file is backed up into O(backup_dir), written atomically, the scheduler
    restarted (systemd) or recreated by the kubelet (kubeadm), and the module waits until a new scheduler process
    runs exactly the planned flags and answers its health endpoint. When it does not within O(health_timeout),
    every file is restored byte for byte, the scheduler restarted, and the module fails with the actual cause (the
    flags the process runs and the file that set them, or the scheduler's own error lines; never a healthy start
    log) and whether it is healthy again.
  - systemd; a drop-in that sorts after this project's own and sets ExecStart= is refused before anything changes,
    naming it and the choices (systemd would run its command, never ours).
  - Live, every run; the running scheduler must run the planned flags and have been started after its config,
    manifest, unit and drop-ins last changed. When not (a run interrupted between write and restart, a hand
    edit), it is restarted (systemd) or recreated (kubeadm; the manifest's C(kube-gpu-nodes/restarted-at)
    annotation is set to the time, which makes the kubelet recreate the pod) and health-checked.
  - With O(render_dir) no host is contacted; the plan comes from O(observed) (the RV(observed) of an earlier run)
    or, when nothing is recorded, from the installers' own layouts in O(assume), and the files are written
    under C(<render_dir>/<render_host>/<path>) with the plan in C(_plan/kube_scheduler.json).
extends_documentation_fragment:
  - kgn.gpu_nodes.render
options:
  kubernetes_version:
    description: The cluster's Kubernetes version, quoted; empty detects it (image tag, else the binary's C(--version)).
    type: str
    default: ""
  style:
    description: How kube-scheduler runs; V(auto) is V(kubeadm) when the manifest exists, else V(systemd).
    type: str
    choices: [auto, kubeadm, systemd]
    default: auto
  kubeadm_manifest:
    description: The kubeadm static pod manifest of kube-scheduler.
    type: path
    default: /etc/kubernetes/manifests/kube-scheduler.yaml
  systemd_unit:
    description: The systemd service that runs kube-scheduler.
    type: str
    default: kube-scheduler.service
  kubeconfig:
    description: The kubeconfig written into the config; empty is the unit's C(--kubeconfig) or the installer's default.
    type: str
    default: ""
  stacks:
    description: The GPU-sharing stacks whose extenders kube-scheduler calls.
    type: list
    elements: str
    default: []
  extra_extenders:
    description: More extenders in the neutral form.
    type: list
    elements: dict
    default: []
  url_mode:
    description: How kube-scheduler reaches each stack's extender Service.
    type: str
    choices: [auto, loopback, node_ip, cluster_ip, url]
    default: auto
  kube_proxy_mode:
    description: kube-proxy's mode for V(auto); V(detect) asks kube-proxy at C(http://127.0.0.1:10249/proxyMode).
    type: str
    choices: [detect, iptables, ipvs, nftables]
    default: detect
  node_ip:
    description: The node IP for V(node_ip) and V(auto); empty is the default route's address, else the first address.
    type: str
    default: ""
  cluster_ips:
    description: Stack to the ClusterIP of its extender Service (V(cluster_ip)).
    type: dict
    default: {}
  urls:
    description: Stack to the extender base URL; wins over O(url_mode).
    type: dict
    default: {}
  tls:
    description: Stack to the TLS settings of its extender.
    type: dict
    default: {}
  backup_dir:
    description: Where the backups go; refused inside the static pod folder.
    type: path
    default: /etc/kubernetes/kgn-backups
  health_timeout:
    description: Seconds to wait for the changed scheduler before rolling back.
    type: int
    default: 120
  prevalidate:
    description: Check a KubeSchedulerConfiguration with the host's scheduler binary first (systemd style).
    type: bool
    default: true
  allow_newer:
    description:
      - Run a Kubernetes minor newer than the newest this project knows with the newest known one's config variant
        (the inventory's C(kubernetes_version_allow_newer)); the run warns and the plan records it. Without it such
        a minor is refused, naming the newest known one.
    type: bool
    default: false
  observed:
    description: What the host shows, for a render (RV(observed) of an earlier run; C(kgn_observed_kube_scheduler)).
    type: dict
    default: {}
  assume:
    description:
      - For a render without a recorded observation; C(kubeadm_manifest) (a manifest text to patch; without it,
        kubeadm's own manifest of the version), C(systemd_exec_start) (the installer's ExecStart argv) and
        C(address) (the host's inventory address).
    type: dict
    default: {}
notes:
  - Check mode and diff mode tell what would change, including restarts and removals.
  - Needs PyYAML for the Python that runs it (python3-yaml, python3-pyyaml).
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Point kube-scheduler at the gpushare extender
  kgn.gpu_nodes.kube_scheduler_extender:
    kubernetes_version: "1.30.4"
    stacks: [gpushare]
"""

RETURN = r"""
plan:
  description: The kube_scheduler section of the host plan (action, style, version, variant, config, argv, health_url,
    extender_urls, extenders, files, remove, assumed).
  returned: always
  type: dict
observed:
  description: What the module read on the host before any change (the input of the plan).
  returned: always
  type: dict
live:
  description: What the running scheduler showed at the end (processes, healthy, health, stale_files, problems).
  returned: when not rendering
  type: dict
left_alone:
  description: True when nothing was wanted of the scheduler (no extender needed, not on this project's config).
  returned: always
  type: bool
left_alone_reason:
  description: Why the scheduler was left alone (empty otherwise).
  returned: always
  type: str
repaired:
  description: Live problems found and repaired in this run (for example a scheduler older than its config).
  returned: always
  type: list
"""

import glob  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import ssl  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.change import recorded  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_patch import (  # noqa: E402
    systemd_exec_start_files,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_plan import (  # noqa: E402
    PROXY_MODE_URL,
    restart_manifest,
    scheduler_health_url,
    scheduler_plan,
    scheduler_reads,
)

INPUTS = ("kubernetes_version", "style", "kubeadm_manifest", "systemd_unit", "kubeconfig", "stacks",
          "extra_extenders", "url_mode", "kube_proxy_mode", "node_ip", "cluster_ips", "urls", "tls", "backup_dir",
          "prevalidate", "allow_newer")
# Where the kubelet keeps each container's log (CRI format "<time> <stream> <tag> <line>"), read when the node has no
# crictl (kubernetes/kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go, BuildContainerLogsDirectory).
POD_LOGS = "/var/log/pods/kube-system_kube-scheduler-*/kube-scheduler/*.log"
# The lab's stand-in kubelet writes each static pod's output here (a real kubelet: crictl logs or POD_LOGS).
STANDIN_LOG = "/var/lib/kubelet-standin/kube-scheduler.log"


# --------------------------------------------------------------------------------------------------------------
# Reading the host


def scheduler_processes():
    """The kube-scheduler processes: pid, binary, args (after the binary) and start time (epoch seconds). The
    binary is argv[0], or argv[1] when an interpreter runs it (the lab's stand-in is a script)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "Z":
            continue
        index = next((i for i, a in enumerate(argv[:2]) if os.path.basename(a) == "kube-scheduler"), None)
        if index is None or "--version" in argv or any(a.startswith("--write-config-to") for a in argv):
            continue
        started = host.process_started(pid)
        if started is not None:
            found.append({"pid": int(pid), "binary": argv[index], "args": argv[index + 1:], "started": started})
    return found


def _get(url, timeout=3.0):
    """(status, body) of a GET (TLS not verified: kube-scheduler serves a self-signed certificate), or
    (None, error)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return response.status, response.read(200).decode("utf-8", "replace").strip()
    except urllib.error.HTTPError as err:
        return err.code, ""
    except (urllib.error.URLError, OSError, ValueError) as err:
        return None, str(getattr(err, "reason", err))


def check_health(url):
    status, body = _get(url)
    if status == 200 and body == "ok":
        return True, f"{url} answered ok"
    if status is None:
        return False, f"{url} did not answer: {body}"
    return False, f"{url} answered {status} {body!r}"


def _default_address():
    """The source address of the default route (no packet is sent), or None without one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: any off-link address takes the default route
        return probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()


def _set_by(module, plan):
    """Which file's command systemd runs for the unit now (the last file that sets ExecStart=), and the command
    as systemd shows it; for kubeadm, the manifest."""
    if plan["style"] != "systemd":
        return plan["manifest"], ""
    unit = host.systemd_unit(module, plan["unit"])
    paths = [unit["fragment"], *sorted(unit["dropins"], key=os.path.basename)]
    files = systemd_exec_start_files([(path, unit["texts"].get(path) or "") for path in paths if path])
    return (files[-1] if files else unit["fragment"]), unit["exec_start"]


def observe(module, inputs):
    manifest = inputs["kubeadm_manifest"]
    info = host.stat(os.path.realpath(manifest))  # a symlinked manifest: its target's mode (a link's own is 0777)
    rc, out, _ = host.run(module, ["hostname", "--all-ip-addresses"], timeout=10)
    observed = {
        "manifest": {"path": manifest, "text": host.read(manifest) if info and info["type"] == "file" else None,
                     "mode": info["mode"] if info else None},
        "unit": host.systemd_unit(module, inputs["systemd_unit"]),
        "addresses": (out or "").split() if rc == 0 else [],
        "default_address": _default_address(),
    }
    reads = scheduler_reads(inputs, observed)
    observed["files"] = {path: host.read(path) for path in reads["files"]}
    observed["exists"] = {path: os.path.exists(path) for path in reads["exists"]}
    if reads["version_argv"]:
        rc, out, err = host.run(module, reads["version_argv"], timeout=30)
        said = ((out or "") + (err or "")).strip()[:500]
        observed["version"] = {"argv": reads["version_argv"], "rc": rc, "output": said}
    if reads["kube_proxy"]:
        status, body = _get(PROXY_MODE_URL)
        observed["kube_proxy_mode"] = body if status == 200 else ""
    observed["processes"] = scheduler_processes()
    return observed


# --------------------------------------------------------------------------------------------------------------
# The live scheduler


def _flag_summary(expected, args):
    missing = [a for a in expected if a not in args]
    extra = [a for a in args if a not in expected]
    return "; ".join(part for part in (f"missing {' '.join(missing)}" if missing else "",
                                       f"not planned {' '.join(extra)}" if extra else "") if part) or "other order"


def live_state(module, plan):
    """What runs now, and what is wrong with it against the plan (``problems`` a restart repairs)."""
    procs = scheduler_processes()
    url = plan["health_url"]
    healthy, detail = check_health(url) if url else (False, "no health endpoint")
    expected = plan["argv"][1:]
    oldest = min(procs, key=lambda p: p["started"]) if procs else None
    stale = host.changed_since(plan["watch"], oldest["started"]) if oldest else []
    running = []
    if not procs:
        running.append("no kube-scheduler process runs")
    for proc in procs:
        if proc["args"] != expected:
            running.append(f"kube-scheduler pid {proc['pid']} runs other flags than planned "
                           f"({_flag_summary(expected, proc['args'])})")
    problems = list(running)
    if stale:
        problems.append(f"kube-scheduler pid {oldest['pid']} was started "
                        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(oldest['started']))}, before "
                        f"{', '.join(stale)} last changed (a change that never went live)")
    reload_pending = False
    if plan["style"] == "systemd":
        rc, out, _ = host.run(module, ["systemctl", "show", "--property=NeedDaemonReload", "--value", plan["unit"]],
                              timeout=20)
        reload_pending = rc == 0 and out.strip() == "yes"
        if reload_pending:
            problems.append(f"systemd has not loaded the changed files of {plan['unit']} (daemon-reload pending)")
    return {
        "processes": procs,
        "pid": oldest["pid"] if oldest else None,
        "argv": ([oldest["binary"], *oldest["args"]]) if oldest else [],
        "started": oldest["started"] if oldest else None,
        "healthy": healthy,
        "health": detail,
        "health_url": url,
        "stale_files": stale,
        "daemon_reload_pending": reload_pending,
        "runs_planned_flags": not running,
        "problems": problems,
        "process_problems": running,
    }


def _went_live(module, plan, old_pids):
    """(ok, detail): a new scheduler (none of old_pids) runs exactly the planned flags and answers."""
    live = live_state(module, plan)
    old = [p["pid"] for p in live["processes"] if p["pid"] in old_pids]
    if old:
        return False, f"kube-scheduler pid {old[0]} is still the one started before the change"
    if live["process_problems"]:
        return False, live["process_problems"][0]
    if not live["healthy"]:
        return False, live["health"]
    return True, live["health"]


def _log_size():
    try:
        return os.path.getsize(STANDIN_LOG)
    except OSError:
        return 0


def _own_words(module, plan, since, offset):
    """The scheduler's own error lines since the change: journal (systemd); crictl logs, else the kubelet's log file
    of the newest container written since, else the lab's stand-in kubelet log (kubeadm); [] when it logged none
    (a healthy start log is not an error)."""
    lines = []
    if plan["style"] == "systemd":
        lines = host.journal(module, plan["unit"], since)
    else:
        rc, out, _ = host.run(module, ["crictl", "ps", "-a", "--name", "kube-scheduler", "-q"], timeout=20)
        ids = (out or "").split() if rc == 0 else []
        pod_log = None if ids else _newest_pod_log(since)
        if ids:
            rc, out, err = host.run(module, ["crictl", "logs", "--tail", "40", ids[0]], timeout=20)
            lines = ((out or "") + (err or "")).splitlines()
        elif pod_log:
            lines = _pod_log_lines(pod_log)
        elif os.path.isfile(STANDIN_LOG):
            with open(STANDIN_LOG, "rb") as handle:
                handle.seek(offset)
                lines = handle.read().decode("utf-8", "replace").splitlines()[-80:]
    return _error_lines(lines, fallback=False)


def _newest_pod_log(since):
    """The kubelet's log file of the scheduler container written last, when written since ``since``; None when none
    was. The kubelet removes an old pod's folder when it replaces the pod: a file gone meanwhile is passed over."""
    written = []
    for path in glob.glob(POD_LOGS):
        try:
            written.append((os.path.getmtime(path), path))
        except OSError:
            continue
    newest = max(written, default=None)
    return newest[1] if newest and newest[0] >= since - 1 else None


def _pod_log_lines(path, tail=40):
    """The last lines a container wrote, from the kubelet's CRI log file (each line "<time> <stream> <P|F> <text>")."""
    try:
        with open(path, "rb") as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()[-tail:]
    except OSError:  # removed with its pod since it was found
        return []
    return [line.split(" ", 3)[3] if line.count(" ") >= 3 else line for line in lines]


def _error_lines(lines, fallback=True):
    """klog error lines (E0102 ...) first, then lines that say what failed; else the last lines (``fallback``)."""
    found = []
    for line in [ln.strip() for ln in lines if re.match(r"^\s*E\d{4}", ln)] + host.errors_in(lines, limit=10):
        if line not in found:
            found.append(line)
    return found[:3] or ([ln.strip() for ln in lines if ln.strip()][-5:] if fallback else [])


def _cause(module, plan, since, offset):
    """Why the changed scheduler did not go live, in the actual terms: the flags the process runs and the file that
    set them when they are not the planned ones, its own error lines when it logged any."""
    live = live_state(module, plan)
    parts = []
    if live["processes"] and not live["runs_planned_flags"]:
        source, shown = _set_by(module, plan)
        runs = " ".join(live["argv"]) or shown
        parts.append(f"kube-scheduler runs `{runs}`, set by {source}, not the planned "
                     f"`{' '.join(plan['argv'])}`")
    words = _own_words(module, plan, since, offset)
    if words:
        parts.append(f"the scheduler's own error: {' / '.join(words)}")
    elif not parts:
        parts.append("the scheduler logged no error")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------------------------
# Changing it


def _restart(module, plan):
    def restart():
        if plan["style"] != "systemd":
            return  # the kubelet recreates a static pod whose manifest changed
        host.run(module, ["systemctl", "daemon-reload"], timeout=60)
        host.run(module, ["systemctl", "reset-failed", plan["unit"]], timeout=20)
        rc, out, err = host.run(module, ["systemctl", "restart", plan["unit"]], timeout=120)
        if rc != 0:
            raise change.ChangeFailed(f"systemctl restart {plan['unit']} failed: {(err or out).strip()[:300]}")
    return restart


def _prevalidate(module, plan, fail):
    """Let the host's scheduler binary decode and validate the new config (--write-config-to exits before
    serving), in a network namespace of its own (``unshare --net``, util-linux) so that the ports it binds first do
    not collide with the running scheduler's; fail, changing nothing, when it refuses."""
    fd, candidate = tempfile.mkstemp(prefix=".kgn-scheduler-config-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(plan["config"]["text"])
        argv = [a.replace("%s", candidate) for a in plan["prevalidate"]]
        rc, out, err = host.run(module, argv, timeout=60)
    finally:
        for path in (candidate, candidate + ".out"):
            if os.path.exists(path):
                os.unlink(path)
    if rc != 0:
        said = ("it could not be run: unshare (util-linux) is not installed" if rc is None
                else " / ".join(_error_lines((err or out or "").splitlines())))
        variant = plan["variant"]
        fail(f"{argv[2]} (Kubernetes {plan['version']} variant {variant['api_version']}) refuses the new config, so "
             f"nothing was changed: {said}. Check kubernetes_version matches the scheduler binary and the extender "
             "settings")


def _what(plan):
    if plan["action"] == "remove":
        return "on the installer's own command (without this project's config)"
    variant = plan["variant"]
    return f"with the new {variant['api_version']} {variant['kind']} ({variant['flag']}={variant['path']})"


def _apply(module, p, plan, todo, restart_needed, live, fail):
    """Write, restart, wait for the new scheduler; on failure restore, restart, wait for the old one, fail."""
    if plan["prevalidate"] and any(f["path"] == plan["config"]["path"] for f in todo):
        _prevalidate(module, plan, fail)
    os.makedirs(p["backup_dir"], mode=0o700, exist_ok=True)
    os.chmod(p["backup_dir"], 0o700)
    since, offset = time.time(), _log_size()
    old_pids = [proc["pid"] for proc in live["processes"]]
    try:
        undo = change.write(todo, p["backup_dir"])
    except change.ChangeFailed as err:
        fail(str(err))
    if not restart_needed:
        return
    restart = _restart(module, plan)
    timeout = p["health_timeout"]
    try:
        restart()
        ok, detail = host.wait(lambda: _went_live(module, plan, old_pids), timeout)
        if not ok:
            raise change.ChangeFailed(detail)
    except change.ChangeFailed as err:
        cause = _cause(module, plan, since, offset)
        failed_pids = [proc["pid"] for proc in scheduler_processes()]
        change.restore(undo)
        before = {**plan, "argv": plan["current_argv"], "health_url": _health(plan["current_argv"], plan)}
        try:
            restart()
            back, back_detail = host.wait(lambda: _went_live(module, before, failed_pids), timeout)
        except change.ChangeFailed as again:
            back, back_detail = False, str(again)
        state = "is healthy again" if back else f"is STILL NOT healthy ({back_detail}): check it now"
        fail(f"kube-scheduler did not come back healthy {_what(plan)} within {timeout} s ({err}). The previous files "
             f"were restored from {p['backup_dir']} and the scheduler {state}. Cause: {cause}")


def _health(argv, plan):
    try:
        return scheduler_health_url(argv, plan["variant"])
    except KgnError:
        return None


# --------------------------------------------------------------------------------------------------------------


def main():
    module = host.NodeModule(
        argument_spec={
            "kubernetes_version": {"type": "str", "default": ""},
            "style": {"type": "str", "default": "auto", "choices": ["auto", "kubeadm", "systemd"]},
            "kubeadm_manifest": {"type": "path", "default": "/etc/kubernetes/manifests/kube-scheduler.yaml"},
            "systemd_unit": {"type": "str", "default": "kube-scheduler.service"},
            "kubeconfig": {"type": "str", "default": ""},
            "stacks": {"type": "list", "elements": "str", "default": []},
            "extra_extenders": {"type": "list", "elements": "dict", "default": []},
            "url_mode": {"type": "str", "default": "auto",
                         "choices": ["auto", "loopback", "node_ip", "cluster_ip", "url"]},
            "kube_proxy_mode": {"type": "str", "default": "detect",
                                "choices": ["detect", "iptables", "ipvs", "nftables"]},
            "node_ip": {"type": "str", "default": ""},
            "cluster_ips": {"type": "dict", "default": {}},
            "urls": {"type": "dict", "default": {}},
            "tls": {"type": "dict", "default": {}},
            "backup_dir": {"type": "path", "default": "/etc/kubernetes/kgn-backups"},
            "health_timeout": {"type": "int", "default": 120},
            "prevalidate": {"type": "bool", "default": True},
            "allow_newer": {"type": "bool", "default": False},
            "render_dir": {"type": "path"},
            "render_host": {"type": "str"},
            "observed": {"type": "dict", "default": {}},
            "assume": {"type": "dict", "default": {}},
        },
        required_together=[("render_dir", "render_host")],
        supports_check_mode=True,
    )
    host.run_locked(module, "kube_scheduler", run)


def run(module):
    p = module.params
    inputs = {key: p[key] for key in INPUTS}
    inputs["assume"] = p["assume"] if p["render_dir"] else {}
    rendering = bool(p["render_dir"])
    observed = {}
    try:
        observed = p["observed"] if rendering else observe(module, inputs)
        plan = scheduler_plan(inputs, observed or {})
    except KgnError as err:
        module.fail_json(msg=f"{err}. Nothing was changed.", observed=observed)
    result = {"plan": plan, "observed": observed, "left_alone": plan["left_alone"],
              "left_alone_reason": plan["reason"] if plan["left_alone"] else "", "repaired": []}
    if plan["version_note"]:
        module.warn(plan["version_note"])  # the opt-in for a newer minor is said on every run that uses it
    if rendering:
        written = change.render(p["render_dir"], p["render_host"], plan["files"], plan, "kube_scheduler")
        host.say(module, assumed=plan["assumed"])
        module.exit_json(changed=bool(written), msg=plan["reason"], **result)

    live = live_state(module, plan)
    files = change.pending(plan["files"])
    removals = change.pending(plan["remove"])
    # a live problem is a repair when the files were already as planned (a restart that never happened, a stopped
    # scheduler); when this run writes or removes them, the restart is part of that change (a first install, or the
    # extender taken back, is not a repair)
    problems = list(live["problems"]) if plan["action"] != "leave" else []
    repair = problems if not (files or removals) else [p for p in problems if "no kube-scheduler process runs" in p]
    restart_needed = bool(files or problems or (plan["action"] == "remove" and removals))
    if plan["style"] == "kubeadm" and restart_needed and not any(f["path"] == plan["manifest"] for f in files):
        # the manifest is right but the pod must read the files again: a new restart annotation
        files += change.pending([restart_manifest(plan, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))])
    todo = files + removals
    diff = change.diff(todo)
    linked = change.links(todo, module.check_mode)  # symlinked files, written through: said in msg and changes
    said = "; ".join(filter(None, [plan["reason"], *linked]))
    if restart_needed and plan["style"] == "systemd":
        diff.append({"prepared": f"{plan['unit']} is restarted (daemon-reload first)"
                                 + (f": {'; '.join(repair)}" if repair else "")})

    def fail(msg):
        # what the scheduler shows now stays with the host (the run_failures callback keeps these facts for the report)
        now = live_state(module, plan)
        module.fail_json(msg=msg, diff=diff, live=now, **result,
                         ansible_facts=recorded("kube_scheduler", observed, plan, now, False, module.check_mode))

    if plan["action"] == "leave" or not (todo or restart_needed):
        if plan["action"] != "leave" and not live["healthy"] and not module.check_mode:
            ok, detail = host.wait(lambda: check_health(plan["health_url"]), p["health_timeout"])
            if not ok:
                words = _own_words(module, plan, time.time() - 600, 0)
                fail(f"kube-scheduler runs the planned flags but does not answer its health endpoint ({detail}). "
                     f"Its own error: {' / '.join(words) or 'none logged'}")
            live = live_state(module, plan)
        elif plan["action"] == "leave" and live["processes"] and not live["healthy"]:
            module.warn(f"kube-scheduler (left alone) does not answer its health endpoint: {live['health']}")
        live["persisted_argv"] = plan["current_argv"]  # what the manifest or unit says (nothing was written)
        module.exit_json(changed=False, msg=plan["reason"], live=live, diff=[],
                         ansible_facts=recorded("kube_scheduler", observed, plan, live, False, module.check_mode),
                         **result)
    if module.check_mode:
        live["persisted_argv"] = plan["current_argv"]
        module.exit_json(changed=True, msg=said, live=live, diff=diff, would_repair=repair,
                         ansible_facts=recorded("kube_scheduler", observed, plan, live, True, True, changes=linked),
                         **result)

    _apply(module, p, plan, todo, restart_needed, live, fail)
    result["repaired"] = repair
    host.say(module, repaired=repair)
    changes = [f"wrote {f['path']}" for f in files if f.get("content") is not None] + [
        f"removed {f['path']}" for f in removals] + ([f"restarted kube-scheduler ({plan['style']})"]
                                                     if restart_needed else []) + linked
    live = live_state(module, plan)
    live["persisted_argv"] = plan["argv"]  # written by this run
    module.exit_json(changed=True, msg=said, live=live, diff=diff,
                     ansible_facts=recorded("kube_scheduler", observed, plan, live, True, False, repair, changes),
                     **result)


if __name__ == "__main__":
    main()
