#!/usr/bin/python
"""Make nvidia the (default) runtime of the engine kubelet uses, and keep it live."""

DOCUMENTATION = r"""
---
module: nvidia_container_runtime
short_description: Wire the NVIDIA runtime into Docker, containerd or CRI-O, safely and live
description:
  - Reads the node (engine versions, cri-dockerd, the runtime config files, containerd's built-in default),
    plans on the control machine with the same code as the render (the runtime section of the host plan; its
    action plugin, which reads and writes TOML with tomllib and tomli-w), and when the plan or the
    live engine differs from the node, validates the new files, backs them up, writes them, restarts the
    engine and checks the running engine; when it does not come back healthy the files are restored, the
    engine restarted and the module fails with the engine's own error.
  - Live, every run, changed or not, the engine answers (C(docker info), C(ctr version), C(crio status config)),
    runs nvidia as its default runtime, was started after its config files last changed (a change interrupted
    before its restart is finished by the next run), and the runtime binary it is told to use executes.
    A stopped engine is started again. A missing runtime binary fails with its cause and fix.
  - Drop-ins of an engine the node no longer uses (for example the containerd drop-in after a switch back to
    Docker) are removed, with the same backup, restart and health check.
  - A file of the node that the engine reads after this project's and that sets another default runtime (a
    containerd import, imports of imports and globs included, or a CRI-O drop-in that sorts later), or a dockerd
    flag in docker's unit that daemon.json cannot live with (C(--default-runtime), another C(--config-file)), is
    refused before anything is written or restarted, naming the file, what it sets and the choices; the file is left
    as it is. In check mode it is a warning, and the live state records it (C(default_set_by)) for verify.
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
  mode:
    description:
      - How GPUs reach containers. V(cdi) generates the node's CDI spec (C(nvidia-ctk cdi generate)), keeps it fresh
        (the toolkit's nvidia-cdi-refresh units, else a trigger of ours), turns CDI on in the engine and sets the
        toolkit's C(nvidia-container-runtime.mode) to C(cdi); V(legacy) keeps the runtime hook
        (C(mode = "legacy")); V(auto) is CDI where the installed toolkit (1.18+) and the engine (containerd 1.7,
        CRI-O 1.23, Docker 25) support it (P(kgn.gpu_nodes.runtime_mode#filter) decides).
    type: str
    choices: [auto, cdi, legacy]
    default: auto
  toolkit_version:
    description: The pinned container toolkit version (the mode is decided on the installed one when it answers).
    type: str
    default: "1.20.0"
  cdi_spec_path:
    description: The CDI spec the node generates (JSON; the toolkit's refresh service is pointed at it).
    type: path
    default: /var/run/cdi/nvidia.json
  toolkit_config:
    description:
      - The toolkit's config file, whose C(nvidia-container-runtime.mode) follows the mode and whose
        C(accept-nvidia-visible-devices-envvar-when-unprivileged) follows O(envvar_unprivileged).
    type: path
    default: /etc/nvidia-container-runtime/config.toml
  envvar_unprivileged:
    description:
      - Whether a container without C(CAP_SYS_ADMIN) may take GPUs by setting C(NVIDIA_VISIBLE_DEVICES) (any pod on
        the node could, past the device plugin). V(auto) refuses it unless one of O(stacks) hands GPUs out by
        nothing else (gpushare, nano-gpu, elastic-gpu, HAMi before Kubernetes 1.23), and then accepts volume-mount
        requests (the device plugin's C(volume-mounts) strategy); V(refuse) refuses it always (an error with such a
        stack); V(accept) is the old behaviour, the toolkit's default.
    type: str
    choices: [auto, refuse, accept]
    default: auto
  stacks:
    description: The GPU-sharing stacks of the node's cluster (C(gpu_sharing_stacks)), read by O(envvar_unprivileged).
    type: list
    elements: str
    default: []
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
  phase:
    description:
      - The step of the task the action plugin asks for (set by it; module_utils/runtime/runtime_steps.py). The plan
        is made on the control machine, which reads and writes TOML with maintained libraries (tomllib, tomli-w),
        between V(observe) (what the node runs and its files), V(read) (the files containerd's config imports,
        O(paths)), V(migrate) (containerd's own migration of O(text)) and V(apply) (O(plan)).
    type: str
    choices: [observe, read, migrate, apply]
    default: apply
  paths:
    description: For V(read), the files to read; a path with C(*) is expanded as containerd expands an import.
    type: list
    elements: str
    default: []
  text:
    description: For V(migrate), a version 2 config.toml without its imports.
    type: str
  plan:
    description: For V(apply), the runtime section of the host plan the action plugin made.
    type: dict
  judged:
    description:
      - For V(apply), what the action plugin judged from the observation (our containerd drop-in and whether
        config.toml imports it, what the change puts back, the toolkit config's earlier answer to the variable).
    type: dict
    default: {}
notes:
  - Check mode and diff mode tell what would change, including a restart the live engine needs.
  - The node reads TOML only for the engine's answer after a restart (C(crio status config); C(containerd config dump)
    where crictl is missing), with Python's tomllib (3.11 and later) or the OS package python3-tomli or python3-toml
    (python36-toml from EPEL on EL 7); without one of them such a run is refused before it changes anything.
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Make nvidia the default runtime of the node's engine
  kgn.gpu_nodes.nvidia_container_runtime:
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
runtime_mode:
  description: The runtime mode the node runs (cdi or legacy) and why.
  returned: always
  type: str
"""

import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.change import recorded  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import cdi, devices, runtime, tomlio  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime_args import (  # noqa: E402
    ARGUMENT_SPEC,
    REQUIRED_TOGETHER,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime_live import (  # noqa: E402
    MAX_CONFIG_FILES,
    binary_state,
    cdi_state,
    crio_dropin_texts,
    go_glob,
    live_state,
)

REFRESH_UNIT_DIRS = ("/lib/systemd/system", "/usr/lib/systemd/system")


def observe(module, p):
    versions = {}
    for name, argv in (("docker", ["dockerd", "--version"]), ("containerd", ["containerd", "--version"]),
                       ("crio", ["crio", "--version"])):
        rc, out, err = host.run(module, argv, timeout=20)
        versions[name] = host.version_of(out + err) if rc == 0 else None
    paths = [p["docker_config"], p["containerd_config"], p["containerd_dropin"], p["crio_config"], p["crio_dropin"],
             p["toolkit_config"], runtime.REFRESH_ENV,
             *[f["path"] for f in runtime.own_refresh_units(p["cdi_spec_path"])]]
    observed = {
        "versions": versions,
        "cri_dockerd": bool(module.get_bin_path("cri-dockerd")),
        "files": {path: host.read(path) for path in paths if path},
        "cdi_refresh_unit": any(os.path.exists(f"{d}/{runtime.REFRESH_UNIT}") for d in REFRESH_UNIT_DIRS),
    }
    # the engines' other files, where a file read after ours may set the default runtime (runtime_plan names it;
    # containerd's imports are followed by the action plugin, which reads TOML, with the read phase)
    files = observed["files"]
    if versions["crio"] and p["crio_dropin"]:
        for path, text in crio_dropin_texts(os.path.dirname(p["crio_dropin"])).items():
            files.setdefault(path, text)
    if versions["docker"]:
        unit = host.systemd_unit(module, f"{runtime.SERVICE['docker']}.service")
        observed["docker_unit"] = {"paths": [p for p in [unit["fragment"], *unit["dropins"]] if p],
                                   "texts": unit["texts"]}
    if versions["containerd"]:
        rc, out, _ = host.run(module, ["containerd", "config", "default"], timeout=20)
        observed["containerd_default"] = out if rc == 0 else None
    rc, out, err = host.run(module, ["nvidia-ctk", "--version"], timeout=20)
    observed["toolkit_version"] = host.version_of(out + err) if rc == 0 else None
    rc, out, _ = host.run(module, ["nvidia-ctk", "config", "default"], timeout=20)
    observed["toolkit_default"] = out if rc == 0 else None
    return observed


def node_readers(module):
    """What the engines' answers can be read with on this node: its TOML reader ("" when none), its Python and
    crictl."""
    return {"toml_reader": tomlio.reader(), "python": ".".join(str(n) for n in sys.version_info[:3]),
            "crictl": bool(module.get_bin_path("crictl"))}


def read_paths(paths):
    """``{globs: {pattern: [paths]}, texts: {path: text or None}}`` for the files the action plugin names (a
    containerd import with ``*`` expanded as containerd does: runtime_live.go_glob)."""
    globs, texts = {}, {}
    for path in paths:
        if "*" in path:
            globs[path] = go_glob(path)
        for match in globs.get(path, [path]):
            if len(texts) < MAX_CONFIG_FILES:
                texts[match] = host.read(match)
    return {"globs": globs, "texts": texts}


def migrate(module, text):
    """containerd's own migration of a version 2 config.toml, ``text`` being the file without its imports (the
    action plugin takes them out: `config migrate` would fold the imported files in), or None when containerd
    refuses it."""
    fd, path = tempfile.mkstemp(prefix="kgn-containerd-", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        rc, out, _ = host.run(module, ["containerd", "--config", path, "config", "migrate"], timeout=30)
        return out if rc == 0 and out.strip() else None
    finally:
        os.unlink(path)


def generate_spec(module, plan):
    """``(text, error)``: what `nvidia-ctk cdi generate` writes for this node now (into a temporary file: the
    spec on disk changes only through change.write, with a backup)."""
    folder = tempfile.mkdtemp(prefix="kgn-cdi-")
    candidate = os.path.join(folder, "nvidia.json")
    try:
        argv = [a.replace("%s", candidate) for a in plan["cdi"]["generate"]]
        rc, out, err = host.run(module, argv, timeout=120)
        text = host.read(candidate)
        if rc != 0 or text is None:
            words = host.errors_in(((err or "") + "\n" + (out or "")).splitlines()) or [(err or out).strip()]
            return None, f"{' '.join(argv[:3])} failed: {' | '.join(words)[:400]}"
        return text, ""
    finally:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)


def _unit_state(module, unit):
    rc, _, _ = host.run(module, ["systemctl", "is-enabled", "--quiet", unit])
    active = host.service(module, unit)["active"]
    return rc == 0, active


class Cdi:
    """The CDI part of a run: the spec regenerated when it differs from what the generator says now, the toolkit's
    config and the refresh units written, the refresh unit enabled. Each step goes into ``done`` before it runs;
    a decision the inventory changed (who may ask for GPUs by the variable) also into ``changes``, which the run's
    report prints."""

    def __init__(self, module, plan, envvar_was):
        self.module, self.plan, self.envvar_was = module, plan, envvar_was
        self.done, self.repaired, self.problems, self.changes = [], [], [], []
        self.spec_todo, self.files_todo, self.unit_todo, self.why = [], [], [], []

    def read(self):
        self.files_todo = change.pending(self.plan["toolkit_files"])
        section = self.plan["cdi"]
        if section is None:
            return
        path = section["spec_path"]
        before = host.read(path)
        candidate, error = generate_spec(self.module, self.plan)
        if candidate is None:
            self.problems.append(error)
        elif candidate != before:
            self.why = [cdi.why_regenerated(before, candidate)] if before is not None else []
            self.spec_todo = [{"path": path, "content": candidate, "mode": "0644", "before": before}]
        enabled, active = _unit_state(self.module, section["refresh"]["unit"])
        if not (enabled and active):
            self.unit_todo = [section["refresh"]["unit"]]

    @property
    def due(self):
        return bool(self.spec_todo or self.files_todo or self.unit_todo)

    def diff(self):
        return change.diff(self.files_todo + self.spec_todo)

    def apply(self, wired_before):
        if self.files_todo:
            self.done.append(f"write {', '.join(f['path'] for f in self.files_todo)}")
            change.write(self.files_todo)
            toolkit_config = self.plan["toolkit_files"][0]["path"]
            before = next((f["before"] for f in self.files_todo if f["path"] == toolkit_config), None)
            if before is not None:
                refuse = self.plan["isolation"]["refuse"]
                said = (f"{toolkit_config}: nvidia-container-runtime.mode set to {self.plan['runtime_mode']}; "
                        f"NVIDIA_VISIBLE_DEVICES from unprivileged containers {'refused' if refuse else 'accepted'} "
                        "(no restart: the runtime reads the file for each new container, running containers keep "
                        "their devices)")
                # a decision that changed (kgn_gpu_envvar_unprivileged, the stacks) is done; the same one put back
                # after the file drifted is a repair
                was = self.envvar_was
                kept = was == (not refuse)
                if wired_before and kept:
                    self.repaired.append(said)
                else:
                    self.done.append(said)
                    if was is not None and not kept:
                        self.changes.append(said)
        if self.spec_todo:
            path = self.spec_todo[0]["path"]
            had = self.spec_todo[0]["before"] is not None
            self.done.append(f"write the CDI spec {path} (nvidia-ctk cdi generate)")
            change.write(self.spec_todo)
            words = "; ".join(self.why) or "regenerated"
            if had:
                self.repaired.append(f"CDI spec {path} regenerated ({words})")
            elif wired_before:
                self.repaired.append(f"CDI spec {path} was missing: generated")
        if self.unit_todo:
            unit = self.unit_todo[0]
            self.done.append(f"enable and start {unit}")
            host.run(self.module, ["systemctl", "daemon-reload"])
            rc, out, err = host.run(self.module, ["systemctl", "enable", "--now", unit], timeout=60)
            if rc != 0:
                self.problems.append(f"systemctl enable --now {unit} failed: {(err or out).strip()[:300]}")


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
    dispatch(host.NodeModule(argument_spec=ARGUMENT_SPEC, required_together=REQUIRED_TOGETHER,
                             supports_check_mode=True))


def dispatch(module):
    """The phase the action plugin asks for (module_utils/runtime/runtime_steps.py)."""
    p = module.params
    if p["phase"] == "observe":
        module.exit_json(changed=False, observed=observe(module, p), node=node_readers(module))
    if p["phase"] == "read":
        module.exit_json(changed=False, **read_paths(p["paths"]))
    if p["phase"] == "migrate":
        module.exit_json(changed=False, migrated=migrate(module, p["text"] or ""))
    if not p["plan"]:
        module.fail_json(msg="phase apply needs the plan the action plugin makes (run the module as a task: "
                             "kgn.gpu_nodes.nvidia_container_runtime)")
    host.run_locked(module, "container_runtime", run)


def run(module):
    p = module.params
    rendering = bool(p["render_dir"])
    observed, plan, judged = p["observed"], p["plan"], p["judged"]
    # a file of the node read after ours decides the default runtime: a run refuses it before any change
    refusal = runtime.default_refusal(plan)
    if refusal and rendering:
        module.fail_json(msg=f"{refusal}. Nothing was rendered.", plan=plan, observed=observed)
    if rendering:
        written = change.render(p["render_dir"], p["render_host"], plan["files"] + plan["toolkit_files"], plan,
                                "container_runtime")
        host.say(module, assumed=plan["assumed"])
        module.exit_json(changed=bool(written), engine=plan["engine"], plan=plan, observed=observed, repaired=[],
                         runtime_mode=plan["runtime_mode"])

    facts = {"kgn_observed_container_runtime": observed}  # what a failure still records
    guard = _dev_char_guard(module, p)
    todo = change.pending(plan["files"])
    stale = change.pending(plan["remove"])
    live = live_state(module, plan, p["set_default"])
    live.update(dropin=judged["dropin"], dropin_orphaned=judged["dropin_orphaned"])
    if refusal and not module.check_mode:
        # before anything is written or restarted: a restart cannot make nvidia the default while that file wins,
        # so a change would only restart the engine, fail its check and restore the files (docs/versions.md, B3b)
        module.fail_json(msg=f"{refusal}. Nothing was changed.", plan=plan, live=live, observed=observed,
                         ansible_facts=recorded("container_runtime", observed, plan, live, False, False))
    side = Cdi(module, plan, judged["toolkit_envvar_was"])
    side.read()
    engine_due = bool(todo or stale or live["problems"] or guard["links"] or guard["rule"])
    due = engine_due or side.due
    diff = change.diff(todo + stale) + side.diff()
    # a symlinked file is edited through its link (change.py): the run says so in its recorded changes
    linked = change.links(todo + stale + side.files_todo + side.spec_todo + guard["rule"], module.check_mode)
    live["binary"] = _binary(module, p, plan["engine"])
    live["runtime_mode"] = plan["runtime_mode"]
    if plan["cdi"]:
        live["cdi"] = cdi_state(module, plan, live)
    if not module.check_mode and not live["binary"]["executes"]:
        _fail_binary(module, plan, live, observed, diff, facts)
    if module.check_mode or not due:
        host.say(module, problems=side.problems + ([f"a run would refuse: {refusal}"] if refusal else []),
                 linked=linked)
        module.exit_json(changed=due, engine=plan["engine"], plan=plan, live=live, observed=observed,
                         repaired=[], would_repair=live["problems"] + side.why, diff=diff,
                         runtime_mode=plan["runtime_mode"],
                         ansible_facts=recorded("container_runtime", observed, plan, live, due, module.check_mode,
                                                changes=linked))

    # a live problem is a repair when the files were right; otherwise it is what this change sets up
    repaired = [p for p in live["problems"] if not todo or "not running" in p or "does not answer" in p]
    repaired += judged["file_repairs"]
    # the engine already had our files: what the CDI side finds missing was there before, so it is a repair
    wired_before = not todo
    started = time.time()
    try:
        # the spec and the toolkit's mode first: the engine restarted below finds them in place
        side.apply(wired_before)
        devices.create_links(guard["links"])
        change.write(guard["rule"])
        if stale:
            _remove_stale(module, p, plan["remove"])
        if engine_due:
            change.apply(module, todo, _restart(module, plan["service"]), lambda: _healthy(module, p, plan),
                         p["health_timeout"])
    except change.ChangeFailed as err:
        words = host.errors_in(host.journal(module, plan["service"], started))
        files = ", ".join(f["path"] for f in todo) or "no file changed"
        module.fail_json(msg=f"{plan['engine']} with the nvidia runtime ({files}): {err}."
                             + (f" {plan['service']} said: {' | '.join(words)}" if words else ""),
                         plan=plan, observed=observed, diff=diff)
    live = live_state(module, plan, p["set_default"])
    live.update(dropin=judged["dropin"], dropin_orphaned=False)
    live["binary"] = _binary(module, p, plan["engine"])
    live["runtime_mode"] = plan["runtime_mode"]
    if plan["cdi"]:
        live["cdi"] = cdi_state(module, plan, live)
    if not live["binary"]["executes"]:
        _fail_binary(module, plan, live, observed, diff, facts, changed=True)
    repaired += side.repaired
    host.say(module, repaired=repaired, problems=side.problems, linked=linked)
    module.exit_json(changed=True, engine=plan["engine"], plan=plan, live=live, observed=observed,
                     repaired=repaired, done=side.done, diff=diff, runtime_mode=plan["runtime_mode"],
                     ansible_facts=recorded("container_runtime", observed, plan, live, True, False, repaired,
                                            [*linked, *side.changes]))


if __name__ == "__main__":
    main()
