"""The smoke tests on the live system: the engine smoke on a node, the pod smoke through the API server.

Node and API side (I/O only): what to run, and what it means, is decided in smoke.py and smoke_pod.py. The
gpu_smoke and gpu_pod_smoke modules are these two functions behind an argument spec; a module that verifies a
host in one call runs them the same way (run_engine_smoke, run_pod_smoke with its own API client).
"""

import datetime
import json
import time

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu, host, smoke, smoke_pod
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import toml_parse
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stack_catalog

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
    run, runtime, removed, errors = None, {}, False, []
    if found["present"]:
        try:
            rc, out, err = host.run(module, plan["run"], timeout=timeout)
            run = {"rc": rc, "stdout": out or "", "stderr": err or "", "timeout": timeout,
                   "timed_out": rc in (124, 137) and smoke.MARK + " end" not in (out or "")}
            if engine == "docker":
                irc, iout, _ = host.run(module, ["docker", "inspect", "--format", "{{.HostConfig.Runtime}}",
                                                 plan["name"]], timeout=30)
                runtime = {"name": (iout or "").strip() if irc == 0 else ""}
            else:
                runtime = dict(state["cri"])
        finally:
            removed, errors = cleanup(module, plan)
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



# --- the pod smoke ---------------------------------------------------------------------------------

POLL = 2
TAIL = 2000
POD_RANK = {"failed": 3, "no_gpu": 2, "ok": 1, "skipped": 0}


def _json(text):
    try:
        return json.loads(text)
    except ValueError:
        return {}


def _words(rc, out, err):
    text = (err or out).strip()
    return text.splitlines()[0][:300] if text else ("kubectl not found" if rc is None else f"exit code {rc}")


def _kinds(specs):
    return "pods" + (",resourceclaimtemplates.resource.k8s.io" if any(s["claim"] for s in specs) else "")


def delete(api, p, selector, specs):
    """Delete the smoke objects of the node and wait for them to go: ``(ok, error)``."""
    rc, out, err = api(["delete", _kinds(specs), "-n", p["namespace"], "-l", selector,
                                       "--ignore-not-found", "--wait=true", "--timeout=60s"])
    return rc == 0, "" if rc == 0 else _words(rc, out, err)


def read_pods(api, p, selector):
    rc, out, _ = api(["get", "pods", "-n", p["namespace"], "-l", selector, "--output=json"])
    return {i["metadata"]["name"]: i for i in (_json(out).get("items") or [])} if rc == 0 else None


def remaining(api, p, selector, specs):
    """The names of the node's smoke objects still in the API (None when the API did not answer)."""
    rc, out, _ = api(["get", _kinds(specs), "-n", p["namespace"], "-l", selector, "--output=name"])
    return [line for line in out.splitlines() if line.strip()] if rc == 0 else None


def events_of(api, p, name):
    rc, out, _ = api(["get", "events", "-n", p["namespace"], "--field-selector",
                                     f"involvedObject.kind=Pod,involvedObject.name={name}", "--output=json"])
    return _json(out).get("items") or [] if rc == 0 else []


def log_of(api, p, name):
    rc, out, _ = api(["logs", "-n", p["namespace"], name, "--tail=400"])
    return out if rc == 0 else ""


def lease(api):
    """The default scheduler's leader lease: ``{holder, renewed_ago}``, or {} when there is none."""
    rc, out, _ = api(["get", "leases.coordination.k8s.io", "-n", "kube-system", "kube-scheduler",
                                     "--output=json"])
    spec = _json(out).get("spec") or {} if rc == 0 else {}
    if not spec.get("holderIdentity"):
        return {}
    stamp = str(spec.get("renewTime") or "")
    try:
        renewed = datetime.datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
        ago = int((datetime.datetime.now(datetime.timezone.utc) - renewed).total_seconds())
    except ValueError:
        ago = None
    return {"holder": spec["holderIdentity"], "renewed_ago": ago}


def _moment(pod):
    """What changed about a pod worth recording: its phase, the PodScheduled condition, a container state."""
    status = (pod or {}).get("status") or {}
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    state = ((status.get("containerStatuses") or [{}])[0].get("state") or {})
    container = next(iter(state), "")
    reason = (state.get(container) or {}).get("reason") or ""
    condition = f"{scheduled.get('status', '')} {scheduled.get('reason', '')}".strip()
    return {"phase": smoke_pod.pod_phase(pod), "scheduled": condition,
            "node": (pod.get("spec") or {}).get("nodeName") or "", "container": f"{container} {reason}".strip()}


def run_pod_smoke(module, p, api):
    """The pod smoke of one GPU node (the gpu_pod_smoke module's options in ``p``); ``api(args, data=None)`` answers
    ``(rc, stdout, stderr)`` for kubectl's arguments: the one way to the API server, passed in. Returns the
    module's result."""
    where = f"kubectl on {p['api_host']}" if p["api_host"] else "kubectl on the control machine"
    base = {"node_name": p["node_name"], "api_host": p["api_host"], "pods": [], "deleted": True}
    catalog = stack_catalog(p["stacks"])
    specs = [smoke_pod.pod_spec(name, entry, p["limits"].get(name), p.get("resource_api") or "")
             for name, entry in catalog.items()]
    if not specs:
        return dict(base, status="skipped", summary="skipped: no GPU-sharing stack on this node")
    if module.check_mode:
        return dict(base, status="skipped", summary="skipped: a check-mode run creates no pod")
    # a DRA stack's pod asks for its GPU through a claim in the cluster's resource.k8s.io version: unknown, no pod
    unready = [dict(stack=s["stack"], status="skipped", cause="", lifecycle=[],
                    summary="skipped: the cluster's resource.k8s.io version is not recorded (the stacks plan's dra)")
               for s in specs if s["claim"] and not s["claim"].get("api_version")]
    specs = [s for s in specs if not (s["claim"] and not s["claim"].get("api_version"))]
    if not specs:
        return dict(base, status="skipped", pods=unready, summary="; ".join(f"{e['stack']}: {e['summary']}"
                                                                            for e in unready))
    view = p["host"] or None
    host_present = bool((view or {}).get("present", True))
    resources = sorted({r for s in specs for r in s["limits"]})
    selector = smoke_pod.pod_selector(p["node_name"])
    ok, error = delete(api, p, selector, specs)  # a leftover of an interrupted run
    if not ok:
        return dict(base, status="skipped", summary=f"skipped: no API ({where}): {error}")
    started = time.time()
    pods = []
    for spec in specs:
        objects = smoke_pod.pod_objects(p["node_name"], spec, p["image"], p["namespace"],
                                        smoke_pod.scheduler_name(spec["stack"], p["schedulers"]), p["tolerations"],
                                        p["timeout"])
        rc, out, err = api(["create", "-f", "-", "--output=name"],
                           data=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        pods.append({"stack": spec["stack"], "spec": spec, "name": objects[-1]["metadata"]["name"],
                     "create_error": "" if rc == 0 else _words(rc, out, err),
                     "lifecycle": [{"t": round(time.time() - started, 1), "what": "created"}] if rc == 0 else []})
    last, seen = {}, {}
    while True:
        current = read_pods(api, p, selector) or {}
        now = round(time.time() - started, 1)
        for entry in pods:
            obj = current.get(entry["name"])
            if obj is not None:
                last[entry["name"]] = obj
                moment = _moment(obj)
                if moment != seen.get(entry["name"]):
                    seen[entry["name"]] = moment
                    entry["lifecycle"].append(dict(moment, t=now))
        done = all(e["create_error"] or smoke_pod.pod_done(last.get(e["name"]), host_present, resources) for e in pods)
        if done or time.time() - started >= p["timeout"]:
            break
        time.sleep(POLL)
    waited = time.time() - started
    held = None
    for entry in pods:
        obj = last.get(entry["name"]) if not entry["create_error"] else None
        events = events_of(api, p, entry["name"]) if obj is not None else []
        ran = obj is not None and (smoke_pod.pod_phase(obj) in ("Succeeded", "Failed") or any(
            "terminated" in (s.get("state") or {}) for s in (obj.get("status") or {}).get("containerStatuses") or []))
        log = log_of(api, p, entry["name"]) if ran else ""
        unscheduled = (obj is not None and smoke_pod.pod_phase(obj) == "Pending" and not (obj.get("spec") or {}).get(
            "nodeName") and not (obj.get("spec") or {}).get("schedulerName"))
        if unscheduled and held is None:
            held = lease(api)
        judged = smoke_pod.judge_pod(obj, entry["spec"], events, log, view, waited, p["timeout"],
                                     held if unscheduled else None, entry["create_error"])
        entry.update(judged, log=log[-TAIL:], events=smoke_pod.event_texts(events)[-10:])
        entry.pop("spec")
        entry.pop("create_error")
    ok, error = delete(api, p, selector, specs)
    left = remaining(api, p, selector, specs)
    deleted = ok and left == []
    end = round(time.time() - started, 1)
    for entry in pods:
        entry["lifecycle"].append({"t": end, "what": "deleted" if deleted else f"not deleted: {error}"})
    pods += unready
    status = max((e["status"] for e in pods), key=POD_RANK.get)
    summary = "; ".join(f"{e['stack']}: {e['summary']}" for e in pods)
    if not deleted:
        status = "failed"
        summary += f"; the smoke pods could not be deleted ({error or ', '.join(left or []) or 'no answer'})"
    return dict(base, status=status, summary=summary, pods=pods, deleted=deleted,
                cause="" if deleted else "pod_not_deleted")

