"""The pod smoke: per GPU node and stack, a pod that asks for the stack's resource, pinned to the node through the
scheduler; what it must prove, when to stop waiting, and its verdict from the pod, its events and its log.

Pure (Python 3.6); the gpu_pod_smoke module runs it on the API host. What the pod's container prints and how that is
judged against the host is shared with the engine smoke (smoke.py).

Sources:
  [FIT]   kubernetes pkg/scheduler/framework/plugins/noderesources/fit.go: "Insufficient %v" (the FailedScheduling
          message when no node offers a resource); pkg/registry/core/pod/strategy.go PrepareForCreate: a new pod is
          Pending.
  [GPUSHARE] AliyunContainerService/gpushare-device-plugin pkg/gpu/nvidia/const.go and allocate.go (commit
          0f2eade8): ALIYUN_COM_GPU_MEM_CONTAINER (the memory given).
  [HAMI]  Project-HAMi/HAMi pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go (commit 057ea14b):
          CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m per GPU.
  [EGPU]  elastic-ai/elastic-gpu-agent pkg/plugins/gpushare.go (commit 294dd56f): env GPU=<hash> and
          NVIDIA_VISIBLE_DEVICES=none; the GPU is a device node of its own under /host/dev.
"""

import hashlib
import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke.smoke import (
    LABEL,
    NAME,
    NODE_LABEL,
    SCRIPT,
    choice,
    first_line,
    judge_output,
    parse_output,
    seen_summary,
    verdict,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import dra
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import STACKS, stack_catalog


def pod_spec(stack, entry, override=None, resource_api=""):
    """What the pod smoke of ``stack`` requests and what its log must prove: ``{limits, gpus, env, claim}``. From the
    stack catalog entry's ``smoke`` (``limits``; ``gpus``: required (nvidia-smi in the pod lists the GPU(s)) or
    optional; ``env``: {variable: value, or "*" for any}; ``claim``: a DRA claim ``{device_class, count}``, made in
    the cluster's ``resource_api`` version, e.g. resource.k8s.io/v1; "" when not known), else one of each
    resource the stack advertises, so that a new stack needs no code here. ``override`` (a dict of limits) replaces
    the limits (e.g. nvidia.com/mig-1g.10gb with the mixed MIG strategy)."""
    entry = entry if isinstance(entry, dict) else {}
    smoke = dict(entry.get("smoke") or {})
    limits = dict(smoke.get("limits") or {r: 1 for r in entry.get("allocatable") or entry.get("resources") or []})
    if override:
        if not isinstance(override, dict) or not override:
            raise KgnError(f"the pod smoke's limits for {stack} must be a mapping of resource -> amount, got "
                           f"{override!r}")
        limits = dict(override)
    if not limits and not smoke.get("claim"):
        raise KgnError(f"stack {stack} has no resource for a pod to request (its catalog entry names none)")
    gpus = smoke.get("gpus", "required")
    choice(gpus, ("required", "optional"), f"the smoke's gpus of stack {stack}")
    claim = dict(smoke["claim"], api_version=resource_api or "") if smoke.get("claim") else None
    return {"stack": stack, "limits": limits, "gpus": gpus, "env": dict(smoke.get("env") or {}), "claim": claim}


# The isolation probe's pod (docs/isolation.md): asks for no resource, sets the variable, judged by what it got.
PROBE = "isolation"


def probe_spec():
    """The pod-smoke spec of the isolation probe: no limits, the environment of smoke.LEGACY_ENV set in the pod."""
    return {"stack": PROBE, "limits": {}, "gpus": "optional", "env": {}, "claim": None, "probe": True,
            "set_env": dict(smoke.LEGACY_ENV)}


def judge_probe(pod, log="", judged=None):
    """The isolation probe's result from its pod: what its log shows when it ran (smoke.judge_isolation_output),
    else ``not_run`` with why the pod did not run (``judged``: judge_pod's verdict)."""
    seen = parse_output(log)
    if pod is None or pod_phase(pod) not in ("Succeeded", "Failed") or not seen["complete"]:
        return {"status": "not_run", "injected": [],
                "summary": f"not run: the probe pod {(judged or {}).get('summary') or 'did not run'}"}
    return smoke.judge_isolation_output(seen, "a pod")


def _dns_label(text, limit=63):
    text = re.sub(r"[^a-z0-9-]+", "-", str(text).lower()).strip("-")
    if len(text) <= limit:
        return text
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{text[:limit - 9].rstrip('-')}-{digest}"


def label_value(text):
    """A node name as a label value (63 characters at most, [A-Za-z0-9._-])."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-._")
    if len(text) <= 63:
        return text
    return f"{text[:54].rstrip('-._')}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def pod_name(node, stack):
    return _dns_label(f"{NAME}-{stack.replace('_', '-')}-{node}")


def pod_selector(*nodes):
    """The label selector of the smoke pods of ``nodes``: equality for one node, a set for several."""
    values = sorted({label_value(node) for node in nodes})
    return f"{LABEL}=pod,{NODE_LABEL}" + (f"={values[0]}" if len(values) == 1 else f" in ({','.join(values)})")


def pod_objects(node, spec, image, namespace="default", scheduler_name="", tolerations=None, deadline=300):
    """The objects of one pod smoke, in the order they are created: a ResourceClaimTemplate when the stack's smoke
    has a DRA ``claim`` (``{api_version, device_class, count}``; the request in that version's shape,
    dra.device_request), then the pod. The pod runs SCRIPT once
    (restartPolicy Never), is pinned to ``node`` through the scheduler (nodeAffinity on metadata.name, so the
    scheduler, its extenders and the stack's own scheduler decide as for any pod), asks for ``spec['limits']``,
    tolerates ``tolerations`` and is stopped by the kubelet after ``deadline`` seconds."""
    if not node:
        raise KgnError("the pod smoke needs the node's name in the API")
    name = pod_name(node, spec["stack"])
    labels = {LABEL: "pod", NODE_LABEL: label_value(node)}
    container = {
        "name": "smoke",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", SCRIPT],
        "resources": {"limits": {k: str(v) for k, v in sorted(spec["limits"].items())}},
    }
    if spec.get("set_env"):
        container["env"] = [{"name": k, "value": v} for k, v in sorted(spec["set_env"].items())]
    pod_spec_ = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": int(deadline),
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
        "tolerations": list(tolerations or []),
        "containers": [container],
    }
    if scheduler_name:
        pod_spec_["schedulerName"] = scheduler_name
    objects = []
    claim = spec.get("claim")
    if claim:
        template = {"apiVersion": claim["api_version"], "kind": "ResourceClaimTemplate",
                    "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
                    "spec": {"spec": {"devices": {"requests": [
                        dra.device_request(claim["api_version"], "gpu", claim["device_class"],
                                           count=int(claim.get("count", 1)))]}}}}
        objects.append(template)
        pod_spec_["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": name}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    objects.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}, "spec": pod_spec_})
    return objects


def scheduler_name(stack, schedulers):
    """The schedulerName a pod of ``stack`` needs, from the stacks plan's ``hami`` and ``secondary`` (``schedulers``):
    HAMi's own scheduler for hami (its webhook would set it; set here so that no webhook is needed), the second
    kube-scheduler of a managed control plane for a stack with an extender, else the default ("")."""
    schedulers = schedulers if isinstance(schedulers, dict) else {}
    own = schedulers.get("hami") or {}
    if stack == "hami" and own.get("enabled", True) and own.get("name"):
        return own["name"]
    secondary = schedulers.get("secondary") or {}
    entry = stack_catalog([stack])[stack] if stack in STACKS else {}
    if secondary.get("enabled") and entry.get("extender") and secondary.get("name"):
        return secondary["name"]
    return ""


# Container waiting reasons after which a pod will not get further on its own (kubelet's reasons).
FINAL_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                 "CreateContainerConfigError", "CreateContainerError", "RunContainerError")


def _conditions(pod):
    return {c.get("type"): c for c in ((pod.get("status") or {}).get("conditions") or []) if isinstance(c, dict)}


def _container_state(pod):
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return (statuses[0].get("state") or {}) if statuses else {}


def pod_phase(pod):
    """The pod's phase; a pod the API server stored without one is Pending (what the API server sets on create)."""
    return ((pod or {}).get("status") or {}).get("phase") or "Pending"


def pod_done(pod, host_has_gpu=True, stack_resources=()):
    """Whether waiting longer cannot change the pod's outcome: it ended, a container is stuck in a final waiting
    reason, or (on a node without a GPU) the scheduler found no room for the stack's resource."""
    if pod is None or pod_phase(pod) in ("Succeeded", "Failed"):
        return True
    waiting = _container_state(pod).get("waiting") or {}
    if waiting.get("reason") in FINAL_WAITING:
        return True
    scheduled = _conditions(pod).get("PodScheduled") or {}
    if not host_has_gpu and scheduled.get("status") == "False":
        message = str(scheduled.get("message") or "")
        return any(f"Insufficient {r}" in message for r in stack_resources)
    return False


def event_texts(events, reasons=None):
    texts = []
    for event in sorted(events or [], key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or "")):
        if reasons is None or event.get("reason") in reasons:
            texts.append(f"{event.get('reason')}: {first_line(event.get('message'))}")
    return texts


def _proof(seen, spec, host_uuids):
    """What the log proves about the GPU and the limit: ``(cause, problems, shown)``."""
    problems, shown = [], []
    gpus = seen["smi"]["gpus"]
    devices = [m["uuid"] for g in gpus for m in g["mig"]] or [g["uuid"] for g in gpus]
    if gpus:
        shown.append(seen_summary(seen))
        foreign = sorted({g["uuid"] for g in gpus} - set(host_uuids)) if host_uuids else []
        if foreign:
            problems.append(f"GPU(s) not on the host: {', '.join(foreign)}")
        whole = spec["limits"].get("nvidia.com/gpu")
        if spec["stack"] == "nvidia_device_plugin" and whole and str(whole).isdigit() and len(devices) != int(whole):
            problems.append(f"{len(devices)} device(s) seen for nvidia.com/gpu: {whole}")
    elif spec["gpus"] == "required":
        problems.append("nvidia-smi listed no GPU")
    cause = "pod_no_gpu" if problems else ""
    for key, value in sorted(spec["env"].items()):
        found = seen["env"].get(key)
        if found is None or (value != "*" and str(found) != str(value)):
            problems.append(f"{key}={found if found is not None else '(unset)'} (want {value})")
            cause = cause or "pod_limit_missing"
        else:
            shown.append(f"{key}={found}")
    return cause, problems, shown


def judge_pod(pod, spec, events=None, log="", host=None, waited=0, timeout=0, lease=None, create_error=""):
    """One pod smoke's result: ``{status, cause, summary, phase}``. ``pod``: the pod as the API showed it last (None
    when it could not be created or is gone); ``events``: its events; ``log``: what it printed; ``host``: host_view
    of its node (None: unknown, not compared); ``lease``: the default scheduler's leader lease when no scheduler acted
    (``{holder, renewed_ago}``, or {} when there is none)."""
    host = host or {"present": True, "gpus": [], "listed": False, "smi_found": True, "pci_gpus": 0, "error": ""}
    if pod is None:
        if create_error:
            return verdict("failed", "pod_create_failed", f"not created: {first_line(create_error)}", phase="")
        return verdict("failed", "pod_failed", "the pod disappeared before it finished", phase="")
    phase = pod_phase(pod)
    status = pod.get("status") or {}
    conditions = _conditions(pod)
    state = _container_state(pod)
    scheduled = conditions.get("PodScheduled") or {}
    failed_scheduling = event_texts(events, ("FailedScheduling",))
    if phase == "Succeeded" or (phase == "Failed" and parse_output(log)["started"]):
        seen = parse_output(log)
        cause, problems, shown = _proof(seen, spec, [g["uuid"] for g in host.get("gpus") or []])
        if phase == "Succeeded" and not problems:
            return verdict("ok", "", f"Succeeded; saw {'; '.join(shown) or 'its resource'}", phase=phase)
        judged, judged_cause, words = judge_output(seen, host)
        if judged != "ok" and (judged_cause != "gpu_mismatch"):
            return verdict(judged, judged_cause, f"{phase}: {words}", phase=phase)
        return verdict("failed", cause or "pod_failed", f"{phase}, but {'; '.join(problems)}", phase=phase)
    if phase == "Failed":
        terminated = state.get("terminated") or {}
        reason = status.get("reason") or terminated.get("reason") or "Failed"
        message = first_line(status.get("message") or terminated.get("message"))
        cause = "pod_admission_failed" if reason == "UnexpectedAdmissionError" else "pod_failed"
        tail = f"; log: {first_line(log)}" if first_line(log) else ""
        return verdict("failed", cause, f"Failed: {reason}{': ' + message if message else ''}{tail}", phase=phase)
    waiting = state.get("waiting") or {}
    if waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"):
        return verdict("failed", "pod_image_pull",
                       f"{phase}: {waiting['reason']}: {first_line(waiting.get('message'))}", phase=phase)
    if waiting.get("reason") in FINAL_WAITING:
        return verdict("failed", "pod_sandbox_failed",
                       f"{phase}: {waiting['reason']}: {first_line(waiting.get('message'))}", phase=phase)
    sandbox = event_texts(events, ("FailedCreatePodSandBox", "FailedCreatePodContainer", "Failed"))
    if sandbox and phase == "Pending" and scheduled.get("status") == "True":
        return verdict("failed", "pod_sandbox_failed", f"{phase}: {sandbox[-1]}", phase=phase)
    message = ""
    if scheduled.get("status") == "False":
        message = first_line(scheduled.get("message")) or (failed_scheduling[-1] if failed_scheduling else "")
    elif failed_scheduling and scheduled.get("status") != "True":
        message = failed_scheduling[-1]
    if message:
        wanted = [r for r in spec["limits"] if f"Insufficient {r}" in message]
        if wanted:
            if not host.get("present"):
                return verdict("no_gpu", "no_gpu_visible", f"no GPU visible: Pending, {message} (the node has no GPU, "
                                                           "so no device plugin offers it)", phase=phase)
            return verdict("failed", "pod_insufficient", f"Pending: {message}", phase=phase)
        if "extender" in message.lower() or re.search(r"(Post|Get) \"?https?://", message):
            return verdict("failed", "pod_extender_error", f"Pending: {message}", phase=phase)
        return verdict("failed", "pod_unschedulable", f"Pending: {message}", phase=phase)
    if phase == "Pending" and scheduled.get("status") != "True" and not (pod.get("spec") or {}).get("nodeName"):
        who = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        if who == "default-scheduler" and lease is not None:
            holder = (f"the lease kube-system/kube-scheduler was last renewed {lease['renewed_ago']} s ago by "
                      f"{lease.get('holder') or '?'}" if lease.get("holder") else
                      "no kube-scheduler holds the lease kube-system/kube-scheduler")
        else:
            holder = f"is {who} running?"
        return verdict("failed", "pod_not_scheduled", f"Pending after {int(waited)} s: not scheduled, no condition "
                                                      f"and no event from {who} ({holder})", phase=phase)
    if phase in ("Pending", "Running"):
        last = event_texts(events)
        return verdict("failed", "pod_timeout", f"{phase} after {int(waited)} s (limit {int(timeout)} s)"
                                                f"{': ' + last[-1] if last else ''}", phase=phase)
    return verdict("failed", "pod_failed", f"phase {phase}", phase=phase)
