"""Checks of a control plane: kube-scheduler given the extenders (config, flag, health, the extenders answer) and
the stacks deployed as they must run (a DaemonSet's arguments, a stack's own scheduler and webhook)
(plugins/module_utils/verify/checks.py says how a check is written)."""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import (
    CONTROL_PLANE,
    NOT_READ,
    api_view,
    cause,
    check,
    failed,
    ok,
    skipped,
)

SCHEDULER = ("kube_scheduler",)
FIX_SCHEDULER = "re-run playbooks/kube_scheduler_extender.yml"
FIX_STACKS = "re-run playbooks/gpu_sharing_stacks.yml"
NO_EXTENDER = "no chosen stack needs a scheduler extender, so kube-scheduler keeps its own configuration"


def _scheduler(seen, want):
    """(what the scheduler shows, what it should, the config evidence)."""
    sched = seen.get("scheduler") or {}
    return sched, want["scheduler"], sched.get("config") or {}


SCHEDULER_CONFIG_CAUSES = [
    cause("scheduler_config_missing", when={"exists": False},
          cause="{path} does not exist: it was removed, or the scheduler play never ran on this host",
          fix=("re-run playbooks/kube_scheduler_extender.yml (writes it, patches the scheduler, health-checks, "
               "rolls back on failure)"),
          source=("docs/field-notes.md, kubeasz 1.23 with Aliyun gpushare; "
                  "https://kubernetes.io/docs/reference/scheduling/config/")),
    cause("scheduler_config_extenders", fallback=True,
          cause=("{path} does not list the extender(s) ending in {expected_paths} (has: "
                 "{extender_urls}): edited by hand or replaced"),
          fix=FIX_SCHEDULER,
          source=("docs/field-notes.md, kubeasz 1.23 with Aliyun gpushare; "
                  "https://github.com/AliyunContainerService/gpushare-scheduler-extender/blob/master/docs/install.md")),
]


@check("scheduler_config", "scheduler-policy-config present with the extenders", kinds=(CONTROL_PLANE,),
       concerns=SCHEDULER, causes=SCHEDULER_CONFIG_CAUSES, applies="scheduler")
def scheduler_config(seen, want, done):
    sched, wanted, config = _scheduler(seen, want)
    path = wanted.get("config_path") or ""
    extenders = list(config.get("extender_urls") or [])
    # each stack's extender is recognised by its URL path (/gpushare-scheduler, /scheduler), so a user's own
    # host/port choice does not matter here
    paths = list(wanted.get("extender_paths") or [])
    evidence = {"path": path, "exists": bool(config.get("exists")), "extender_urls": extenders,
                "expected_paths": paths, "error": config.get("error") or ""}
    if not paths:
        return skipped(NO_EXTENDER, **evidence)
    if sched.get("config") is None:
        return skipped(NOT_READ, **evidence)
    absent = [p for p in paths if not any(u.rstrip("/").endswith(p) for u in extenders)]
    if not config.get("exists"):
        return failed(f"{path} does not exist", **evidence)
    if absent:
        return failed(f"{path} lacks the extender(s) {', '.join(absent)}", **evidence)
    return ok(f"{path} ({len(extenders)} extender(s))", **evidence)


SCHEDULER_FLAG_CAUSES = [
    cause("scheduler_not_running", when={"running": False},
          cause=("kube-scheduler is not running: it refuses to start on a config its version does not "
                 "serve (apiVersion removed, `enableHttps` instead of `enableHTTPS` in a "
                 "KubeSchedulerConfiguration) or its unit/pod failed"),
          fix=("read `journalctl -u kube-scheduler` or the static pod's log; re-run "
               "playbooks/kube_scheduler_extender.yml"),
          source=("docs/versions.md Observed and A3 [PR-91625] (strict decoding, enableHTTPS and never"
                  " enableHttps)")),
    cause("scheduler_never_configured", when={"persisted_ok": False, "config_exists": False, "running": True},
          cause=("kube-scheduler runs without {flag} and the config file does not exist either: the "
                 "scheduler play has not run on this host yet (or both were removed), so the extender "
                 "is unknown to the scheduler"),
          fix="run playbooks/kube_scheduler_extender.yml (site.yml) for this host",
          source=("https://kubernetes.io/docs/reference/scheduling/config/ (extenders); "
                  "docs/scheduler-versions.md")),
    cause("scheduler_flag_removed_systemd", when={"persisted_ok": False, "style": "systemd", "config_exists": True},
          cause=("{flag} is no longer in {persisted_path}: the file was edited or deleted by hand, or "
                 "the unit was regenerated (a kubeasz `ezctl setup`/upgrade rewrites "
                 "kube-scheduler.service); kube-scheduler ignores the extender from its next restart "
                 "on"),
          fix=("re-run playbooks/kube_scheduler_extender.yml (patches the unit, daemon-reload, restart, health "
               "check, rollback on failure)"),
          source=("docs/field-notes.md, kubeasz 1.23 with Aliyun gpushare; docs/versions.md A5 "
                  "[KUBEASZ]")),
    cause("scheduler_flag_removed_kubeadm", when={"persisted_ok": False, "style": "kubeadm", "config_exists": True},
          cause=("{flag} was removed from {persisted_path}: edited by hand, or `kubeadm upgrade` "
                 "regenerated the static pod manifest (it only keeps flags given in "
                 "ClusterConfiguration scheduler.extraArgs)"),
          fix=("re-run playbooks/kube_scheduler_extender.yml; to survive upgrades also put the flag and its "
               "volume in kubeadm's ClusterConfiguration (scheduler.extraArgs / extraVolumes)"),
          source=("docs/versions.md A5 [WEB-KUBEADM-FLAGS], "
                  "https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/control-plane-flags/")),
    cause("scheduler_flag_not_applied", when={"persisted_ok": True, "process_ok": False},
          cause=("{persisted_path} has {flag} but the running kube-scheduler was started without it "
                 "(not restarted)"),
          fix=("`systemctl daemon-reload && systemctl restart kube-scheduler` (systemd) or let kubelet"
               " recreate the static pod"),
          source=("systemctl daemon-reload, "
                  "https://www.freedesktop.org/software/systemd/man/latest/systemctl.html; static "
                  "pods, https://kubernetes.io/docs/tasks/configure-pod-container/static-pod/")),
    cause("scheduler_flag_other", fallback=True,
          cause="kube-scheduler does not run with {flag}: {summary}",
          fix=FIX_SCHEDULER,
          source="docs/versions.md A5"),
]


@check("scheduler_flag", "kube-scheduler started with the config flag", kinds=(CONTROL_PLANE,), concerns=SCHEDULER,
       causes=SCHEDULER_FLAG_CAUSES, applies="scheduler")
def scheduler_flag(seen, want, done):
    """The config flag on the running scheduler and in its unit/manifest."""
    sched, wanted, config = _scheduler(seen, want)
    if not wanted.get("extender_paths"):
        return skipped(NO_EXTENDER, path=wanted.get("config_path") or "")
    flag, path = (wanted.get("flag") or "").lstrip("-"), wanted.get("config_path") or ""
    process = sched.get("process") or {}
    persisted = sched.get("persisted") or {}
    in_process = (process.get("flags") or {}).get(flag)
    in_persisted = (persisted.get("flags") or {}).get(flag)
    evidence = {"flag": f"--{flag}={path}", "running": bool(process.get("running")),
                "process_value": in_process, "persisted_value": in_persisted,
                "process_ok": in_process == path, "persisted_ok": in_persisted == path,
                "style": persisted.get("style") or "unknown", "persisted_path": persisted.get("path") or "",
                "config_exists": bool(config.get("exists"))}
    where = evidence["persisted_path"] or "the unit/manifest"
    if not process.get("running"):
        return failed("kube-scheduler is not running", **evidence)
    if evidence["process_ok"] and evidence["persisted_ok"]:
        return ok(f"--{flag}={path} on the process and in {where}", **evidence)
    if not evidence["persisted_ok"]:
        return failed(f"--{flag}={path} missing from {where} (found {in_persisted or 'no such flag'})", **evidence)
    return failed(f"the running kube-scheduler lacks --{flag}={path} (found {in_process or 'no such flag'}), though "
                  f"{where} has it", **evidence)


SCHEDULER_HEALTH_CAUSES = [
    cause("scheduler_unhealthy",
          cause=("kube-scheduler does not answer {url} ({error}): not running, or serving another "
                 "port/scheme than its version's (https 10259 from 1.23, where the insecure http 10251"
                 " is gone)"),
          fix=("check the scheduler's --secure-port/--bind-address and its log; re-run "
               "playbooks/kube_scheduler_extender.yml"),
          source=("docs/versions.md A5, health ports per version [PR-69663] [CHANGELOG-1.23] "
                  "[CHANGELOG-1.24]")),
]


@check("scheduler_health", "kube-scheduler healthy", kinds=(CONTROL_PLANE,), concerns=SCHEDULER,
       causes=SCHEDULER_HEALTH_CAUSES, applies="scheduler")
def scheduler_health(seen, want, done):
    sched, wanted, _ = _scheduler(seen, want)
    health = sched.get("health") or {}
    evidence = {"url": health.get("url") or wanted.get("health_url") or "", "status": health.get("status"),
                "body": (health.get("body") or "")[:200], "error": health.get("error") or ""}
    if health.get("status") == 200:
        return ok(f"{evidence['url']} -> 200 {evidence['body'].strip()}", **evidence)
    return failed(f"{evidence['url']}: {evidence['error'] or 'HTTP ' + str(evidence['status'])}", **evidence)


EXTENDER_REACHABLE_CAUSES = [
    cause("extender_ipvs_loopback", when={"loopback": True, "kube_proxy_mode": "ipvs"},
          cause=("the extender URL {url} is a NodePort on 127.0.0.1, but kube-proxy runs in IPVS mode,"
                 " which does not serve NodePorts on the loopback address"),
          fix=("point the extender at the node's own IP (http://<node-ip>:32766/gpushare-scheduler, as"
               " the kubeasz reference cluster does) or at the Service's cluster IP, then re-run "
               "playbooks/kube_scheduler_extender.yml"),
          source=("https://github.com/kubernetes/kubernetes/issues/56320; docs/field-notes.md, kubeasz"
                  " 1.23 with Aliyun gpushare (extender at the node IP)")),
    cause("extender_loopback_localnet", when={"loopback": True, "route_localnet": False},
          cause=("the extender URL {url} is a NodePort on 127.0.0.1 and "
                 "net.ipv4.conf.all.route_localnet is 0 on this host, so kube-proxy (iptables mode) "
                 "cannot forward loopback traffic to the NodePort"),
          fix=("use the node's IP in the extender URL, or let kube-proxy serve localhost NodePorts "
               "(--iptables-localhost-nodeports, which sets route_localnet=1)"),
          source=("https://kubernetes.io/docs/reference/networking/virtual-ips/ (NodePorts on "
                  "localhost need route_localnet)")),
    cause("extender_unreachable", fallback=True,
          cause=("kube-scheduler cannot reach its extender at {url} ({error}): the extender "
                 "Deployment/Service is not running, or its NodePort differs from the URL; pods asking"
                 " for the stack's resource stay Pending"),
          fix=("`kubectl -n kube-system get pods,svc -o wide | grep -e schd-extender -e "
               "gpu-scheduler`; re-run playbooks/gpu_sharing_stacks.yml; check the NodePort matches the URL in"
               " the scheduler config"),
          source=("docs/field-notes.md, gpushare design with a Policy file and MPS; "
                  "https://github.com/AliyunContainerService/gpushare-scheduler-extender/issues/22")),
]


@check("extender_reachable", "scheduler extender reachable at its URL", kinds=(CONTROL_PLANE,),
       concerns=("kube_scheduler", "stacks"), causes=EXTENDER_REACHABLE_CAUSES, applies="scheduler")
def extender_reachable(seen, want, done):
    sched = _scheduler(seen, want)[0]
    results = []
    for probe in sched.get("extenders") or []:
        evidence = {"url": probe.get("url"), "error": probe.get("error") or "", "loopback": bool(probe.get("loopback")),
                    "kube_proxy_mode": sched.get("kube_proxy_mode") or "unknown",
                    "route_localnet": sched.get("route_localnet")}
        if probe.get("reachable"):
            results.append(ok(f"{probe.get('url')} answers", **evidence))
        else:
            results.append(failed(f"{probe.get('url')}: {evidence['error']}", **evidence))
    return results


STACK_ARGS_CAUSES = [
    cause("memory_unit_missing", when={"arg": "--memory-unit", "deployed": True},
          cause=("{daemonset} runs without {arg}: the unit of aliyun.com/gpu-mem is then the plugin's "
                 "built-in default instead of the GiB the extender and the samples use (the reference "
                 "cluster runs it with --memory-unit=GiB)"),
          fix=("add `--memory-unit=GiB` to the DaemonSet's args (playbooks/gpu_sharing_stacks.yml renders it) "
               "and re-apply"),
          source=("https://github.com/AliyunContainerService/gpushare-scheduler-extender/issues/141; "
                  "docs/field-notes.md, gpushare design with a Policy file and MPS")),
    cause("stack_not_deployed", fallback=True,
          cause="the {stack} DaemonSet {daemonset} is not deployed",
          fix=FIX_STACKS,
          source="docs/stacks.md (what each stack deploys)"),
]


@check("stack_args", "GPU-sharing stack deployed with the required arguments", kinds=(CONTROL_PLANE,),
       concerns=("stacks",), causes=STACK_ARGS_CAUSES, applies="stack_args", reads=("api",))
def stack_args(seen, want, done):
    wanted, api = want["stack_args"], api_view(seen)
    daemonsets = {d.get("name"): d for d in api.get("daemonsets") or []}
    results = []
    for item in wanted:
        ds = daemonsets.get(item.get("daemonset"))
        evidence = {"stack": item.get("stack"), "daemonset": item.get("daemonset"), "arg": item.get("arg"),
                    "deployed": ds is not None, "args": list((ds or {}).get("args") or [])}
        if ds is None:
            results.append(failed(f"DaemonSet {item.get('daemonset')} not deployed", **evidence))
        elif any(a == item.get("arg") or a.startswith(f"{item.get('arg')}=") for a in evidence["args"]):
            results.append(ok(f"{item.get('daemonset')} has {item.get('arg')}", **evidence))
        else:
            results.append(failed(f"{item.get('daemonset')} lacks {item.get('arg')}", **evidence))
    return results


OWN_SCHEDULER_READY_CAUSES = [
    cause("own_scheduler_missing", when={"deployed": False},
          cause=("the {stack} scheduler Deployment {deployment} is not deployed, so no pod asking for "
                 "its resources is placed"),
          fix=FIX_STACKS,
          source="docs/stacks.md (hami)"),
    cause("own_scheduler_not_ready", fallback=True,
          cause=("{namespace}/{deployment} has no ready pod: its extender does not answer /healthz on "
                 "https://127.0.0.1:443 (the Secret hami-scheduler-tls is missing because the "
                 "hami-admission-create Job has not run, the image cannot be pulled) or its "
                 "kube-scheduler does not start on the config"),
          fix=("`kubectl -n {namespace} describe deploy {deployment}` and the logs of its "
               "kube-scheduler and vgpu-scheduler-extender containers; `kubectl -n {namespace} get job"
               " hami-admission-create,secret hami-scheduler-tls`"),
          source="HAMi charts/hami/templates/scheduler/deployment.yaml; docs/stacks.md (hami)"),
]


@check("own_scheduler_ready", "the stack's own scheduler ready (its extender answers)", kinds=(CONTROL_PLANE,),
       concerns=("stacks",), causes=OWN_SCHEDULER_READY_CAUSES, applies="own_schedulers", reads=("api",))
def own_scheduler_ready(seen, want, done):
    """A stack's own scheduler Deployment: ready means its extender's readiness probe answers."""
    wanted, api = want["own_schedulers"], api_view(seen)
    deployments = {d.get("name"): d for d in api.get("deployments") or []}
    results = []
    for item in wanted:
        found = deployments.get(item.get("deployment"))
        evidence = {"stack": item.get("stack"), "deployment": item.get("deployment"), "deployed": found is not None,
                    "namespace": (found or {}).get("namespace") or "", "desired": (found or {}).get("desired", 0),
                    "ready": (found or {}).get("ready", 0)}
        name = f"{evidence['namespace']}/{item.get('deployment')}"
        if found is None:
            results.append(failed(f"Deployment {item.get('deployment')} not deployed", **evidence))
        elif evidence["ready"] >= 1:
            results.append(ok(f"{name} {evidence['ready']}/{evidence['desired']} ready", **evidence))
        else:
            results.append(failed(f"{name} 0/{evidence['desired']} ready", **evidence))
    return results


WEBHOOK_REGISTERED_CAUSES = [
    cause("webhook_missing", when={"registered": False},
          cause=("the MutatingWebhookConfiguration {webhook} is not registered: pods asking for the "
                 "stack's resources keep the default scheduler and are not placed by the stack's "
                 "scheduler"),
          fix=FIX_STACKS,
          source="HAMi charts/hami/templates/scheduler/webhook.yaml; docs/stacks.md (hami)"),
    cause("webhook_no_ca", fallback=True,
          cause=("{webhook} has no caBundle, so the API server cannot call it and (failurePolicy "
                 "Ignore) creates pods unchanged: the hami-admission-patch Job has not run since the "
                 "webhook was (re)created"),
          fix=("`kubectl -n kube-system delete job hami-admission-patch` and re-run "
               "playbooks/gpu_sharing_stacks.yml (the Job runs again and patches the CA in)"),
          source=("HAMi charts/hami/templates/scheduler/job-patch/job-patchWebhook.yaml; "
                  "docs/stacks.md (hami)")),
]


@check("webhook_registered", "the stack's mutating webhook registered with its CA", kinds=(CONTROL_PLANE,),
       concerns=("stacks",), causes=WEBHOOK_REGISTERED_CAUSES, applies="own_schedulers", reads=("api",))
def webhook_registered(seen, want, done):
    wanted, api = want["own_schedulers"], api_view(seen)
    webhooks = {w.get("name"): w for w in api.get("webhooks") or []}
    results = []
    for item in wanted:
        hook = webhooks.get(item.get("webhook"))
        entries = (hook or {}).get("webhooks") or []
        evidence = {"stack": item.get("stack"), "webhook": item.get("webhook"), "registered": hook is not None,
                    "ca_bundle": bool(entries) and all(e.get("ca_bundle") for e in entries),
                    "services": [e.get("service") for e in entries]}
        if hook is None:
            results.append(failed(f"MutatingWebhookConfiguration {item.get('webhook')} not registered", **evidence))
        elif not evidence["ca_bundle"]:
            results.append(failed(f"{item.get('webhook')} has no caBundle: the API server cannot call it",
                                  **evidence))
        else:
            results.append(ok(f"{item.get('webhook')} -> {', '.join(e['service'] for e in entries)}", **evidence))
    return results

