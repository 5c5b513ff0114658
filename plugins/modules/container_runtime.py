#!/usr/bin/python
"""Make nvidia the (default) runtime of the engine kubelet uses, and keep it live."""

DOCUMENTATION = r"""
---
module: container_runtime
short_description: Wire the NVIDIA runtime into Docker, containerd or CRI-O, safely and live
description:
  - Reads the node (engine versions, cri-dockerd, the runtime config files, containerd's built-in default),
    plans with the same code as the render (the runtime section of the host plan), and when the plan or the
    live engine differs from the node, validates the new files, backs them up, writes them, restarts the
    engine and checks the running engine; when it does not come back healthy the files are restored, the
    engine restarted and the module fails with the engine's own error.
  - Live, every run, changed or not, the engine answers (C(docker info), C(ctr version), C(crio status config)),
    runs nvidia as its default runtime, was started after its config files last changed (a change interrupted
    before its restart is finished by the next run), and the runtime binary it is told to use executes.
    A stopped engine is started again. A missing runtime binary fails with its cause and fix.
  - Drop-ins of an engine the node no longer uses (for example the containerd drop-in after a switch back to
    Docker) are removed, with the same backup, restart and health check.
  - With O(render_dir) it contacts no node; it plans from O(observed) and writes the files under
    C(<render_dir>/<render_host>/<path>), with the plan in C(_plan/container_runtime.json).
extends_documentation_fragment:
  - kgn.gpu_nodes.render
options:
  engine:
    description:
      - The engine kubelet uses; V(auto) decides from what is installed
        (P(kgn.gpu_nodes.container_runtime_choice#filter)).
    type: str
    choices: [auto, docker, containerd, crio]
    default: auto
  kubernetes_version:
    description: The cluster's Kubernetes version (decides whether kubelet can use Docker through dockershim).
    type: str
    required: true
  set_default:
    description: Make nvidia the default runtime (the device plugin's pods cannot ask for it otherwise).
    type: bool
    default: true
  binary:
    description: The runtime binary containerd and CRI-O run (absolute path).
    type: path
    default: /usr/bin/nvidia-container-runtime
  docker_config:
    description: Docker's daemon.json.
    type: path
    default: /etc/docker/daemon.json
  docker_runtime_path:
    description: The runtime path written into daemon.json (Docker resolves a bare name in PATH).
    type: str
    default: nvidia-container-runtime
  docker_runtime_args:
    description: runtimeArgs of the nvidia runtime in daemon.json.
    type: list
    elements: str
    default: []
  containerd_config:
    description: containerd's config.toml.
    type: path
    default: /etc/containerd/config.toml
  containerd_dropin:
    description: The drop-in config.toml imports (containerd 1.4 and later); empty writes the runtime into config.toml.
    type: str
    default: /etc/containerd/conf.d/99-nvidia.toml
  crio_config:
    description: CRI-O's main config, read for the options of its default runtime.
    type: path
    default: /etc/crio/crio.conf
  crio_dropin:
    description: The CRI-O drop-in written.
    type: path
    default: /etc/crio/crio.conf.d/99-nvidia.conf
  dev_char_links:
    description:
      - Before any restart, give every NVIDIA device node its /dev/char/<major>:<minor> link and install NVIDIA's
        udev rule that keeps them; without the links a systemd reload takes the GPUs away from running
        containers. Nothing to do on a node without /dev/nvidia* devices.
    type: bool
    default: true
  health_timeout:
    description: Seconds to wait for the engine to answer after a restart.
    type: int
    default: 30
  observed:
    description:
      - What the node shows, for a render (the RV(observed) of an earlier run, or written in the inventory as
        C(kgn_observed_container_runtime)); what is missing is assumed, and the assumptions are returned.
    type: dict
    default: {}
notes:
  - Check mode and diff mode tell what would change, including a restart the live engine needs.
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Make nvidia the default runtime of the node's engine
  kgn.gpu_nodes.container_runtime:
    kubernetes_version: "1.30.4"
    engine: auto
"""

RETURN = r"""
engine:
  description: The engine the plan is for.
  returned: always
  type: str
plan:
  description: The runtime section of the host plan (engine, service, files with content and mode, remove, assumed).
  returned: always
  type: dict
live:
  description: What the running engine and the runtime binary showed at the end (not in render mode).
  returned: when not rendering
  type: dict
observed:
  description: What the module read on the node before any change (the input of the plan).
  returned: always
  type: dict
repaired:
  description: Live problems found and repaired in this run (for example "containerd was not running").
  returned: always
  type: list
"""

import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, devices, host, runtime  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import host_plan, recorded  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime_live import binary_state, live_state  # noqa: E402

INPUTS = ("engine", "kubernetes_version", "set_default", "binary", "docker_config", "docker_runtime_path",
          "docker_runtime_args", "containerd_config", "containerd_dropin", "crio_config", "crio_dropin")


def observe(module, p):
    versions = {}
    for name, argv in (("docker", ["dockerd", "--version"]), ("containerd", ["containerd", "--version"]),
                       ("crio", ["crio", "--version"])):
        rc, out, err = host.run(module, argv, timeout=20)
        versions[name] = host.version_of(out + err) if rc == 0 else None
    paths = [p["docker_config"], p["containerd_config"], p["containerd_dropin"], p["crio_config"], p["crio_dropin"]]
    observed = {
        "versions": versions,
        "cri_dockerd": bool(module.get_bin_path("cri-dockerd")),
        "files": {path: host.read(path) for path in paths if path},
    }
    if versions["containerd"]:
        rc, out, _ = host.run(module, ["containerd", "config", "default"], timeout=20)
        observed["containerd_default"] = out if rc == 0 else None
    return observed


def _dropin(p, plan, observed):
    """Our containerd drop-in, and whether config.toml still imports it (what verify diagnoses)."""
    path = p["containerd_dropin"] if any(f["path"] == p["containerd_dropin"] for f in plan["files"]) else ""
    files = observed.get("files") or {}
    return {"dropin": path, "dropin_orphaned": runtime.dropin_orphaned(files.get(p["containerd_config"]), path,
                                                                       files.get(path))}


def _binary(module, p, engine):
    return binary_state(module, p["docker_runtime_path"] if engine == "docker" else p["binary"])


def _dev_char_guard(module, p):
    """The /dev/char links and the udev rule still missing (none without NVIDIA device nodes)."""
    nodes = devices.nvidia_device_nodes() if p["dev_char_links"] else []
    if not nodes:
        return {"links": [], "rule": []}
    rule = [{"path": devices.UDEV_RULE, "content": devices.UDEV_TEXT, "mode": "0644"}]
    return {"links": devices.missing_links(nodes), "rule": change.pending(rule)}


def _healthy(module, p, plan):
    problems = live_state(module, plan, p["set_default"])["problems"]
    return not problems, "; ".join(problems)


def _fail_binary(module, plan, live, observed, diff, facts, changed=False):
    binary = live["binary"]
    module.fail_json(
        msg=f"{plan['engine']} is told to run {binary['path']}, which "
            f"{'does not exist' if not binary['exists'] else 'fails: ' + binary['error']}: every GPU container "
            "on this node would fail to start. The NVIDIA container toolkit package provides it: run the "
            "nvidia_container_toolkit role (it reinstalls a package whose files are missing), or reinstall "
            "the package by hand.",
        plan=plan, live=live, observed=observed, changed=changed, diff=diff,
        ansible_facts=recorded("container_runtime", observed, plan, live, changed, module.check_mode))


def _restart(module, unit):
    def restart():
        host.run(module, ["systemctl", "reset-failed", f"{unit}.service"])  # clear systemd's start limit
        rc, out, err = host.run(module, ["systemctl", "restart", f"{unit}.service"], timeout=120)
        if rc != 0:
            raise change.ChangeFailed(f"systemctl restart {unit} failed: {(err or out).strip()[:300]}")
    return restart


def _remove_stale(module, p, stale):
    """Remove the drop-ins of engines the node no longer uses; restart such an engine only when it runs."""
    for unit in sorted({s["service"] for s in stale}):
        todo = change.pending([s for s in stale if s["service"] == unit])
        if not todo:
            continue
        if host.service(module, unit)["active"]:
            check = ["ctr", "--timeout", "5s", "version"] if unit == "containerd" else ["crio", "status", "config"]

            def answers(check=check):
                return host.run(module, check, timeout=20)[0] == 0, f"{check[0]} does not answer"

            change.apply(module, todo, _restart(module, unit), answers, p["health_timeout"])
        else:
            change.write(todo)


def main():
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "default": "auto", "choices": ["auto", *runtime.RUNTIMES]},
            "kubernetes_version": {"type": "str", "required": True},
            "set_default": {"type": "bool", "default": True},
            "binary": {"type": "path", "default": "/usr/bin/nvidia-container-runtime"},
            "docker_config": {"type": "path", "default": "/etc/docker/daemon.json"},
            "docker_runtime_path": {"type": "str", "default": "nvidia-container-runtime"},
            "docker_runtime_args": {"type": "list", "elements": "str", "default": []},
            "containerd_config": {"type": "path", "default": "/etc/containerd/config.toml"},
            "containerd_dropin": {"type": "str", "default": "/etc/containerd/conf.d/99-nvidia.toml"},
            "crio_config": {"type": "path", "default": "/etc/crio/crio.conf"},
            "crio_dropin": {"type": "path", "default": "/etc/crio/crio.conf.d/99-nvidia.conf"},
            "dev_char_links": {"type": "bool", "default": True},
            "health_timeout": {"type": "int", "default": 30},
            "render_dir": {"type": "path"},
            "render_host": {"type": "str"},
            "observed": {"type": "dict", "default": {}},
        },
        required_together=[("render_dir", "render_host")],
        supports_check_mode=True,
    )
    host.run_locked(module, "container_runtime", run)


def run(module):
    p = module.params
    inputs = {key: p[key] for key in INPUTS}
    rendering = bool(p["render_dir"])
    observed = p["observed"] if rendering else observe(module, p)
    try:
        plan = host_plan({"container_runtime": inputs}, {"container_runtime": observed})["container_runtime"]
    except KgnError as err:
        module.fail_json(msg=f"{err}. Nothing was changed.", observed=observed)
    if rendering:
        written = change.render(p["render_dir"], p["render_host"], plan["files"], plan, "container_runtime")
        host.say(module, assumed=plan["assumed"])
        module.exit_json(changed=bool(written), engine=plan["engine"], plan=plan, observed=observed, repaired=[])

    facts = {"kgn_observed_container_runtime": observed}  # what a failure still records
    guard = _dev_char_guard(module, p)
    todo = change.pending(plan["files"])
    stale = change.pending(plan["remove"])
    live = live_state(module, plan, p["set_default"])
    live.update(_dropin(p, plan, observed))
    due = bool(todo or stale or live["problems"] or guard["links"] or guard["rule"])
    diff = change.diff(todo + stale)
    live["binary"] = _binary(module, p, plan["engine"])
    if not module.check_mode and not live["binary"]["executes"]:
        _fail_binary(module, plan, live, observed, diff, facts)
    if module.check_mode or not due:
        module.exit_json(changed=due, engine=plan["engine"], plan=plan, live=live, observed=observed,
                         repaired=[], would_repair=live["problems"], diff=diff,
                         ansible_facts=recorded("container_runtime", observed, plan, live, due, module.check_mode))

    # a live problem is a repair when the files were right; otherwise it is what this change sets up
    repaired = [p for p in live["problems"] if not todo or "not running" in p or "does not answer" in p]
    started = time.time()
    try:
        devices.create_links(guard["links"])
        change.write(guard["rule"])
        if stale:
            _remove_stale(module, p, plan["remove"])
        change.apply(module, todo, _restart(module, plan["service"]), lambda: _healthy(module, p, plan),
                     p["health_timeout"])
    except change.ChangeFailed as err:
        words = host.errors_in(host.journal(module, plan["service"], started))
        files = ", ".join(f["path"] for f in todo) or "no file changed"
        module.fail_json(msg=f"{plan['engine']} with the nvidia runtime ({files}): {err}."
                             + (f" {plan['service']} said: {' | '.join(words)}" if words else ""),
                         plan=plan, observed=observed, diff=diff)
    live = live_state(module, plan, p["set_default"])
    live.update(dropin=_dropin(p, plan, observed)["dropin"], dropin_orphaned=False)
    live["binary"] = _binary(module, p, plan["engine"])
    if not live["binary"]["executes"]:
        _fail_binary(module, plan, live, observed, diff, facts, changed=True)
    host.say(module, repaired=repaired)
    module.exit_json(changed=True, engine=plan["engine"], plan=plan, live=live, observed=observed,
                     repaired=repaired, diff=diff,
                     ansible_facts=recorded("container_runtime", observed, plan, live, True, False, repaired))


if __name__ == "__main__":
    main()
