"""The engine smoke on the live node (I/O only): what to run, and what it means, is decided in smoke.py.

The gpu_smoke module is run_engine_smoke behind an argument spec; gpu_node_verify runs it the same way. The pod
smoke, through the API server, is smoke_pod_live.py.
"""

import json
import time

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu, host
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime import toml_parse
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke

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


def ensure_image(module, plan, pull, timeout):
    """Whether the image is there, pulled when it is not and pulling is on (never in check mode)."""
    rc, out, _ = host.run(module, plan["image_present"], timeout=60)
    if smoke.image_present(rc, out):
        return {"present": True, "pulled": False}
    if module.check_mode or not pull:
        return {"present": False, "check_mode": module.check_mode,
                "error": "" if module.check_mode else "pulling is off"}
    rc, out, err = host.run(module, plan["pull"], timeout=max(timeout, 300))
    if rc != 0:
        return {"present": False, "error": (err or out or f"exit code {rc}").strip()}
    return {"present": True, "pulled": True}


def _run_container(module, plan, state, timeout):
    """Run the plan's container and remove it: ``(run, runtime, removed, errors)``; ``runtime`` is what the engine
    ran it with (Docker's inspect, containerd's CRI handler)."""
    run, runtime, removed, errors = None, {}, False, []
    try:
        rc, out, err = host.run(module, plan["run"], timeout=timeout)
        run = {"rc": rc, "stdout": out or "", "stderr": err or "", "timeout": timeout,
               "timed_out": rc in (124, 137) and smoke.MARK + " end" not in (out or "")}
        if plan["engine"] == "docker":
            irc, iout, _ = host.run(module, ["docker", "inspect", "--format", "{{.HostConfig.Runtime}}",
                                             plan["name"]], timeout=30)
            runtime = {"name": (iout or "").strip() if irc == 0 else ""}
        else:
            runtime = dict(state["cri"])
    finally:
        removed, errors = cleanup(module, plan)
    return run, runtime, removed, errors


def run_isolation_probe(module, engine, mode="legacy", image=smoke.DEFAULT_IMAGE, pull=True, namespace="k8s.io",
                        cri_plugin="", timeout=90):
    """The isolation probe on this node (docs/isolation.md): a container through the engine kubelet uses that asks
    for no GPU and sets NVIDIA_VISIBLE_DEVICES=all; what the runtime injected (smoke.judge_isolation). Check mode
    starts no container."""
    state = engine_state(module, engine, cri_plugin)
    plan = smoke.engine_plan(engine, mode, image, state["version"], state["cri"], namespace, probe=True)
    if plan["skip"] or not state["answered"]:
        return smoke.judge_isolation(plan, engine_state=state)
    if module.check_mode:
        return {"status": "not_run", "injected": [], "summary": "not run: a check-mode run starts no container"}
    cleanup(module, plan)
    found = ensure_image(module, plan, pull, timeout)
    run, runtime, _, errors = _run_container(module, plan, state, timeout) if found["present"] else \
        (None, {}, False, [])
    result = smoke.judge_isolation(plan, run, found, state)
    result.update(engine=engine, mode=mode, argv=plan["run"], runtime=runtime)
    if errors or present(module, plan):
        result["summary"] += f"; the container {plan['name']} could not be removed ({'; '.join(errors)})"
    return result


def run_engine_smoke(module, engine, mode="legacy", image=smoke.DEFAULT_IMAGE, pull=True, namespace="k8s.io",
                     cri_plugin="", timeout=90):
    """The engine smoke on this node: ``(result, changed)``; ``result`` as the gpu_smoke module returns it, changed
    when the image was pulled. Check mode starts no container."""
    started = time.time()
    view = host_gpus(module)
    state = engine_state(module, engine, cri_plugin)
    plan = smoke.engine_plan(engine, mode, image, state["version"], state["cri"], namespace)
    base = {"engine": engine, "mode": mode, "image": plan["image"], "host": view, "engine_version": state["version"]}
    if plan["skip"] or not state["answered"]:
        return dict(base, **smoke.judge_engine(plan, view, engine_state=state)), False
    if module.check_mode:
        return dict(base, status="skipped", cause="", summary="skipped: a check-mode run starts no container"), False
    leftover, _ = cleanup(module, plan)
    found = ensure_image(module, plan, pull, timeout)
    run, runtime, removed, errors = _run_container(module, plan, state, timeout) if found["present"] else \
        (None, {}, False, [])
    result = smoke.judge_engine(plan, view, run, found, state)
    result.update(base)
    if run is not None:
        result.update(argv=plan["run"], exit_code=run["rc"], stdout=run["stdout"][-TAIL:],
                      stderr=run["stderr"][-TAIL:], runtime=runtime,
                      cleanup={"leftover": leftover, "removed": removed, "gone": not present(module, plan),
                               "error": "; ".join(errors)})
        if not result["cleanup"]["gone"]:
            result["summary"] += f"; the container {plan['name']} could not be removed ({result['cleanup']['error']})"
            if result["status"] == "ok":
                result.update(status="failed", cause="container_failed")
    result["seconds"] = round(time.time() - started, 1)
    return result, bool(found.get("pulled"))
