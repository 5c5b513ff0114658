#!/usr/bin/python
"""gpu_smoke: a short-lived GPU container through the engine kubelet uses, compared with the host's GPUs."""

DOCUMENTATION = r"""
---
module: gpu_smoke
short_description: Run a short-lived GPU container through the node's engine and compare what it sees with the host
description:
  - Proves the GPU works with a workload, the way kubelet's containers get it. Runs one container through the
    engine kubelet uses, with the GPUs asked for the way the node is configured, and lists the GPUs it sees
    (C(nvidia-smi -L) injected by the runtime, C(/dev/nvidia*), C(/proc/driver/nvidia/gpus)); compares them with
    the host's C(nvidia-smi -L) (same count, same UUIDs; the MIG devices it lists must be the host's).
  - Docker, C(docker run) with Docker's default runtime; legacy mode C(NVIDIA_VISIBLE_DEVICES=all), cdi mode
    C(--device nvidia.com/gpu=all) (Docker 25 and later). containerd, C(ctr run) in the CRI's namespace with
    the CRI's default runtime handler (its runtime type and C(BinaryName), read from C(crictl info) or
    C(containerd config dump)), so the container gets what kubelet's pods get; cdi mode C(--device
    nvidia.com/gpu=all) from containerd 2.0. CRI-O runs containers only through the CRI, skipped (the pod smoke
    covers it).
  - The container (a fixed name) is removed afterwards, also on failure, and a leftover of an interrupted run is
    removed first. The image is pulled when missing (not in check mode).
  - Returns a status (ok, no_gpu, failed, skipped) with the cause when it fails (runtime not found, nothing injected,
    driver/library mismatch, image missing, ...), decided by the project's smoke code (module_utils/smoke.py).
  - Check mode starts no container (skipped); the module never changes the node's configuration.
options:
  engine:
    description: The engine kubelet uses (the container_runtime concern's plan records it).
    type: str
    required: true
    choices: [docker, containerd, crio]
  mode:
    description: How the GPUs are handed to containers on this node, V(legacy) (the nvidia runtime) or V(cdi).
    type: str
    default: legacy
    choices: [legacy, cdi]
  image:
    description: The image to run; it needs C(sh) and a full glibc for the injected nvidia-smi.
    type: str
    default: ubuntu:24.04
  pull:
    description: Pull the image when the node lacks it.
    type: bool
    default: true
  namespace:
    description: containerd namespace (the CRI's, where kubelet's images are).
    type: str
    default: k8s.io
  cri_plugin:
    description: The CRI plugin's name in containerd's config (the runtime plan's); empty looks for each.
    type: str
    default: ""
  timeout:
    description: Seconds the container (and a pull) may take.
    type: int
    default: 90
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Run a GPU container through the engine
  kgn.gpu_nodes.gpu_smoke:
    engine: "{{ kgn_state_container_runtime.plan.engine }}"
  register: smoke
"""

RETURN = r"""
status:
  description: V(ok), V(no_gpu) (no GPU visible, on the host either), V(failed) or V(skipped).
  returned: always
  type: str
cause:
  description: Why it failed (the cause ids of docs/smoke.md), empty when it did not.
  returned: always
  type: str
summary:
  description: One line that says what was seen, or why not.
  returned: always
  type: str
host:
  description: The host's GPUs (listed, gpus, error, pci_gpus, smi_found, present).
  returned: always
  type: dict
exit_code:
  description: The exit code of that command (C(rc) is not used, Ansible would fail the task on it).
  returned: when a container was run
  type: int
argv:
  description: The command that ran the container.
  returned: when a container was run
  type: list
runtime:
  description: The runtime the container ran with (docker inspect's HostConfig.Runtime; the CRI's handler).
  returned: when a container was run
  type: dict
cleanup:
  description: leftover (a container of an earlier run was removed first), removed, gone (checked after), error.
  returned: when a container was run
  type: dict
"""

import json  # noqa: E402  (Ansible modules keep DOCUMENTATION first)
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu, host, smoke  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import toml_parse  # noqa: E402

TAIL = 4000


def host_gpus(module):
    """The host's own ``nvidia-smi -L``; when it cannot answer, the GPUs lspci sees."""
    smi = module.get_bin_path("nvidia-smi")
    rc, out, err = (host.run(module, [smi, "-L"], timeout=60) if smi else (127, "", "nvidia-smi: not found"))
    pci = 0
    if rc != 0 and module.get_bin_path("lspci"):
        lrc, lout, _ = host.run(module, ["lspci", "-nn"], timeout=30)
        pci = len(gpu.parse_lspci(lout)) if lrc == 0 else 0
    return smoke.host_view(rc, (out or "") + (err or "") if rc != 0 else out, pci, bool(smi))


def engine_state(module, engine, cri_plugin):
    """``{answered, error, version, cri}`` of the running engine (containerd: the CRI's default handler)."""
    if engine == "docker":
        rc, out, err = host.run(module, ["docker", "version", "--format", "{{.Server.Version}}"], timeout=30)
        return {"answered": rc == 0, "error": "" if rc == 0 else (err or out), "version": (out or "").strip(),
                "cri": {}}
    if engine == "containerd":
        rc, out, err = host.run(module, ["ctr", "--timeout", "10s", "version"], timeout=30)
        version = ""
        for line in (out or "").splitlines()[::-1]:  # the Server's "Version:" comes last
            if line.strip().startswith("Version:"):
                version = line.split(":", 1)[1].strip()
                break
        state = {"answered": rc == 0, "error": "" if rc == 0 else (err or out), "version": version, "cri": {}}
        crc, cout, _ = host.run(module, ["crictl", "info"], timeout=30)
        config = {}
        if crc == 0:
            try:
                config = (json.loads(cout) or {}).get("config") or {}
            except ValueError:
                config = {}
        if not config:
            drc, dout, _ = host.run(module, ["containerd", "config", "dump"], timeout=30)
            try:
                config = toml_parse(dout, "containerd config dump") if drc == 0 else {}
            except KgnError:
                config = {}
        state["cri"] = smoke.cri_runtime(config, cri_plugin)
        return state
    return {"answered": True, "error": "", "version": "", "cri": {}}


def present(module, plan):
    """Whether the smoke container exists (the engine knows it)."""
    rc, _, _ = host.run(module, plan["exists"], timeout=30)
    return rc == 0


def cleanup(module, plan):
    """Remove the smoke container when it exists: ``(was there, errors)``."""
    if not present(module, plan):
        return False, []
    errors = []
    for argv in plan["cleanup"]:
        rc, out, err = host.run(module, argv, timeout=60)
        words = (err or out or "").strip()
        if rc != 0 and words and "no such" not in words.lower() and "not found" not in words.lower():
            errors.append(words.splitlines()[0])
    return True, errors


def ensure_image(module, plan, p):
    rc, out, _ = host.run(module, plan["image_present"], timeout=60)
    if smoke.image_present(rc, out):
        return {"present": True, "pulled": False}
    if module.check_mode or not p["pull"]:
        return {"present": False, "check_mode": module.check_mode,
                "error": "" if module.check_mode else "pulling is off"}
    rc, out, err = host.run(module, plan["pull"], timeout=max(p["timeout"], 300))
    if rc != 0:
        return {"present": False, "error": (err or out or f"exit code {rc}").strip()}
    return {"present": True, "pulled": True}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "required": True, "choices": list(smoke.ENGINES)},
            "mode": {"type": "str", "default": "legacy", "choices": list(smoke.MODES)},
            "image": {"type": "str", "default": smoke.DEFAULT_IMAGE},
            "pull": {"type": "bool", "default": True},
            "namespace": {"type": "str", "default": "k8s.io"},
            "cri_plugin": {"type": "str", "default": ""},
            "timeout": {"type": "int", "default": 90},
        },
        supports_check_mode=True,
    )
    p = module.params
    started = time.time()
    view = host_gpus(module)
    state = engine_state(module, p["engine"], p["cri_plugin"])
    try:
        plan = smoke.engine_plan(p["engine"], p["mode"], p["image"], state["version"], state["cri"], p["namespace"])
    except KgnError as err:
        module.fail_json(msg=str(err))
    base = {"engine": p["engine"], "mode": p["mode"], "image": plan["image"], "host": view,
            "engine_version": state["version"]}
    if plan["skip"] or not state["answered"]:
        module.exit_json(changed=False, **base, **smoke.judge_engine(plan, view, engine_state=state))
    if module.check_mode:
        module.exit_json(changed=False, **base, status="skipped", cause="",
                         summary="skipped: a check-mode run starts no container")
    leftover, _ = cleanup(module, plan)
    image = ensure_image(module, plan, p)
    run, runtime, removed, errors = None, {}, False, []
    if image["present"]:
        try:
            rc, out, err = host.run(module, plan["run"], timeout=p["timeout"])
            run = {"rc": rc, "stdout": out or "", "stderr": err or "", "timeout": p["timeout"],
                   "timed_out": rc in (124, 137) and smoke.MARK + " end" not in (out or "")}
            if p["engine"] == "docker":
                irc, iout, _ = host.run(module, ["docker", "inspect", "--format", "{{.HostConfig.Runtime}}",
                                                 plan["name"]], timeout=30)
                runtime = {"name": (iout or "").strip() if irc == 0 else ""}
            else:
                runtime = dict(state["cri"])
        finally:
            removed, errors = cleanup(module, plan)
    result = smoke.judge_engine(plan, view, run, image, state)
    result.update(base)
    if run is not None:
        result.update(argv=plan["run"], exit_code=run["rc"], stdout=run["stdout"][-TAIL:], stderr=run["stderr"][-TAIL:],
                      runtime=runtime,
                      cleanup={"leftover": leftover, "removed": removed, "gone": not present(module, plan),
                               "error": "; ".join(errors)})
        if not result["cleanup"]["gone"]:
            result["summary"] += f"; the container {plan['name']} could not be removed ({result['cleanup']['error']})"
            if result["status"] == "ok":
                result.update(status="failed", cause="container_failed")
    result["seconds"] = round(time.time() - started, 1)
    module.exit_json(changed=bool(image.get("pulled")), **result)


if __name__ == "__main__":
    main()
