"""kubeadm's own kube-scheduler static pod, as kubeadm of each Kubernetes minor writes it.

A render with nothing recorded about a kubeadm control plane patches this manifest (scheduler_plan's assumption),
so it carries only the fields the minor's kubeadm writes, all of which that minor's API knows. Sources
(docs/versions.md A5, "kubeadm's static pod per minor"):

- command, the kubeconfig volume and mount, ``hostNetwork``, ``resources.requests.cpu: 100m``: kubeadm's
  control-plane manifests [KUBEADM-MANIFESTS];
- liveness probe on 10259 over HTTPS from 1.17, 10251 over HTTP before [PR-85043];
- ``--port=0`` from 1.19 to 1.22 [PR-92720], [PR-105034];
- startup probe from 1.19 [PR-91179], which also changed the liveness probe's initial delay;
- ``priorityClassName: system-node-critical`` from 1.19, ``system-cluster-critical`` before [PR-90063];
- ``securityContext.seccompProfile: RuntimeDefault`` from 1.22 [PR-100234] (the field exists from 1.19);
- ``priority: 2000001000`` from 1.27 (also in later 1.25 and 1.26 patch releases) [PR-114338];
- images from registry.k8s.io from 1.25, k8s.gcr.io before [KUBEADM-REGISTRY].
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import kubernetes_minor, parse_version

KUBECONFIG = "/etc/kubernetes/scheduler.conf"


def _probe(minor: int, failure_threshold: int) -> dict:
    secure = minor >= 17
    probe = {
        "failureThreshold": failure_threshold,
        "httpGet": {"host": "127.0.0.1", "path": "/healthz", "port": 10259 if secure else 10251,
                    "scheme": "HTTPS" if secure else "HTTP"},
        "initialDelaySeconds": 10 if minor >= 19 else 15,
        "timeoutSeconds": 15,
    }
    if minor >= 19:
        probe["periodSeconds"] = 10
    return dict(sorted(probe.items()))


def kubeadm_scheduler_pod(kubernetes_version: object) -> dict:
    """The static pod manifest kubeadm writes for kube-scheduler of ``kubernetes_version`` (its image tag is the
    version's x.y.z). A minor newer than the newest known one gets the newest known one's fields."""
    minor = kubernetes_minor(kubernetes_version, "kubernetes_version", newest=False)
    major, _, patch = parse_version(kubernetes_version, "kubernetes_version")
    command = ["kube-scheduler", f"--authentication-kubeconfig={KUBECONFIG}",
               f"--authorization-kubeconfig={KUBECONFIG}", "--bind-address=127.0.0.1",
               f"--kubeconfig={KUBECONFIG}", "--leader-elect=true"]
    if 19 <= minor <= 22:
        command.append("--port=0")
    container = {
        "command": command,
        "image": f"{'registry.k8s.io' if minor >= 25 else 'k8s.gcr.io'}/kube-scheduler:v{major}.{minor}.{patch}",
        "imagePullPolicy": "IfNotPresent",
        "livenessProbe": _probe(minor, 8),
        "name": "kube-scheduler",
        "resources": {"requests": {"cpu": "100m"}},
    }
    if minor >= 19:
        container["startupProbe"] = _probe(minor, 24)
    container["volumeMounts"] = [{"mountPath": KUBECONFIG, "name": "kubeconfig", "readOnly": True}]
    spec = {"containers": [container], "hostNetwork": True}
    if minor >= 27:
        spec["priority"] = 2000001000
    spec["priorityClassName"] = "system-node-critical" if minor >= 19 else "system-cluster-critical"
    if minor >= 22:
        spec["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
    spec["volumes"] = [{"hostPath": {"path": KUBECONFIG, "type": "FileOrCreate"}, "name": "kubeconfig"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        # kubeadm's file also has "creationTimestamp: null" and "status: {}", artifacts of its serializer with no
        # meaning, which the OpenAPI schemas up to 1.24 refuse (a null date): left out
        "metadata": {"labels": {"component": "kube-scheduler", "tier": "control-plane"}, "name": "kube-scheduler",
                     "namespace": "kube-system"},
        "spec": spec,
    }
