"""The one path to the Kubernetes API: kubectl, run by a module on the host that holds the cluster's kubeconfig.

Why kubectl and not the API directly: kubectl reads every kubeconfig a cluster hands out, exec credential plugins
included (aws eks get-token, gke-gcloud-auth-plugin, kubelogin for AKS, OCI's `oci ce cluster generate-token`), so
a managed control plane works with the kubeconfig its provider writes, and the lab's stand-in API server answers the
real kubectl. A Python client would need the kubernetes package on every API host and would have to run those
plugins itself. kubectl also owns two behaviours the project relies on: `kubectl apply` (the last-applied
annotation, three-way merge) and `kubectl drain` (evictions that respect PodDisruptionBudgets, see ``drain``).

What is decided here, once:
  DEFAULT_KUBECONFIG  the kubeconfig when the inventory names none (kube_api_kubeconfig), kubeadm's admin.conf
  kube_api            which host runs kubectl for a host, where Ansible delegates to, and with which kubeconfig
                      (the API host of api.api_host; "" = the control machine, for a managed control plane)
  Kubectl             the client every module uses: get (objects, parsed), raw (discovery, /readyz), apply,
                      patch, delete, cordon / drain / uncordon, with the host it runs on in every message

Node side (modules) except kube_api, which the filter kgn.gpu_nodes.kube_api exposes to the roles.
"""

import json

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import api_host
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

DEFAULT_KUBECONFIG = "/etc/kubernetes/admin.conf"
# The options of every module that talks to the API server (doc fragment kgn.gpu_nodes.kubectl).
CLIENT_ARGS = {
    "kubectl": {"type": "str", "default": "kubectl"},
    "kubeconfig": {"type": "str", "default": ""},
    "request_timeout": {"type": "int", "default": 10},
    "api_host": {"type": "str", "default": ""},
}


def where(api_host_name):
    """How the messages name the host kubectl runs on."""
    return f"kubectl on {api_host_name}" if api_host_name else "kubectl on the control machine"


def kube_api(host_name, groups, hostvars, api_host_name=None, kubeconfig=None):
    """How ``host_name`` reaches its cluster's API: ``{host, delegate_to, kubeconfig, where}``.

    ``host`` is the API host (``api_host_name`` when given, e.g. a role's ``<role>_api_host``, else the contract
    rule of api.api_host); "" means the control machine (a managed control plane: no control-plane host in the
    inventory), so ``delegate_to`` is ``localhost`` then. ``kubeconfig``: the one given; "" is DEFAULT_KUBECONFIG
    (a role's ``<role>_kubeconfig`` defaults to the host's kube_api_kubeconfig, else ""); None reads the host's
    kube_api_kubeconfig from ``hostvars``, else DEFAULT_KUBECONFIG. Given both, nothing is read from ``hostvars``.
    """
    if api_host_name is None:
        api_host_name = api_host(host_name, groups, hostvars)
    if not isinstance(api_host_name, str):
        raise KgnError(f"kube_api: the API host of {host_name} must be an inventory host name or \"\", "
                       f"got {api_host_name!r}")
    if kubeconfig is None:
        own = hostvars[host_name] if host_name in hostvars else {}  # noqa: SIM401 (Ansible's hostvars)
        kubeconfig = own.get("kube_api_kubeconfig") if hasattr(own, "get") else None
    kubeconfig = kubeconfig or DEFAULT_KUBECONFIG
    if not isinstance(kubeconfig, str):
        raise KgnError(f"kube_api: kube_api_kubeconfig of {host_name} must be a path, got {kubeconfig!r}")
    return {"host": api_host_name, "delegate_to": api_host_name or "localhost", "kubeconfig": kubeconfig,
            "where": where(api_host_name)}


def kube_api_targets(hosts, groups, hostvars, role=""):
    """The distinct API targets (kube_api) of ``hosts``, for a read made once per API server: a role's
    ``<role>_api_host`` / ``<role>_kubeconfig`` set in the inventory (or with -e) win over the contract's."""
    if not isinstance(hosts, (list, tuple)):
        raise KgnError(f"kube_api_targets: hosts must be a list of inventory host names, got {hosts!r}")
    targets = []
    for name in hosts:
        # one read of each host (a hostvars[name] builds all its variables)
        own = hostvars[name] if name in hostvars else {}  # noqa: SIM401 (Ansible's hostvars)
        own = own if hasattr(own, "get") else {}
        chosen = own.get(f"{role}_api_host") if role else None
        if chosen is None:
            chosen = api_host(name, groups, hostvars, own.get("kube_api_host") or "")
        config = (own.get(f"{role}_kubeconfig") if role else None) or own.get("kube_api_kubeconfig") or ""
        target = kube_api(name, groups, hostvars, chosen, config)
        if target not in targets:
            targets.append(target)
    return targets


class KubeError(KgnError):
    """kubectl did not do what was asked; the message names the command, the host and kubectl's words."""


def first_line(rc, out, err, limit=300):
    text = (err or out or "").strip()
    if rc is None:
        return text or "kubectl not found"
    return text.splitlines()[0][:limit] if text else f"kubectl exited {rc}"


class Kubectl:
    """kubectl with the module's settings (CLIENT_ARGS): ``Kubectl(module)`` or ``Kubectl(module, **settings)``."""

    def __init__(self, module, kubectl=None, kubeconfig=None, request_timeout=None, api_host_name=None):
        params = getattr(module, "params", None) or {}
        self.module = module
        self.kubectl = kubectl or params.get("kubectl") or "kubectl"
        self.kubeconfig = kubeconfig or params.get("kubeconfig") or DEFAULT_KUBECONFIG
        self.timeout = int(request_timeout or params.get("request_timeout") or 10)
        self.where = where(params.get("api_host") if api_host_name is None else api_host_name)

    def run(self, args, data=None, timeout=None):
        """``(rc, stdout, stderr)``; rc is None when kubectl is not installed."""
        argv = [self.kubectl, "--kubeconfig", self.kubeconfig, f"--request-timeout={self.timeout}s", *args]
        rc, out, err = host.run(self.module, argv, timeout=timeout or max(60, 3 * self.timeout), data=data)
        return rc, out or "", err or ""

    def fail_words(self, args, rc, out, err):
        return (f"`kubectl {' '.join(str(a) for a in args[:3])}` failed ({self.where}, kubeconfig {self.kubeconfig}): "
                f"{first_line(rc, out, err)}")

    def check(self, args, data=None, timeout=None):
        """Run and return stdout; a non-zero exit raises KubeError with kubectl's first line."""
        rc, out, err = self.run(args, data=data, timeout=timeout)
        if rc != 0:
            raise KubeError(self.fail_words(args, rc, out, err))
        return out

    def server(self):
        """The API server's URL in the kubeconfig ("" when kubectl cannot say): read locally, no request is made."""
        rc, out, _ = self.run(["config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"])
        return out.strip() if rc == 0 else ""

    def ready(self):
        """``(True, "")`` when the API server says it is ready, else ``(False, why)``."""
        rc, out, err = self.run(["get", "--raw", "/readyz"])
        if rc != 0:
            return False, self.fail_words(["get", "--raw", "/readyz"], rc, out, err)
        return True, ""

    def get(self, resources, name=None, namespace=None, all_namespaces=False, selector=None, field_selector=None):
        """The parsed answer of ``kubectl get`` (a List with ``items``, or one object when ``name`` is given and
        found; None when ``name`` is not found)."""
        args = ["get", resources if isinstance(resources, str) else ",".join(resources)]
        args += [name] if name else []
        args += ["--namespace", namespace] if namespace else []
        args += ["--all-namespaces"] if all_namespaces and not namespace else []
        args += ["--selector", selector] if selector else []
        args += ["--field-selector", field_selector] if field_selector else []
        args += ["--ignore-not-found"] if name else []
        out = self.check([*args, "--output=json"])
        if name and not out.strip():
            return None
        try:
            return json.loads(out)
        except ValueError as err:
            raise KubeError(f"`kubectl {' '.join(args[:2])}` ({self.where}) did not answer with JSON ({err})") from None

    def patch(self, resource, name, patch, dry_run=False, namespace=None, patch_type="merge"):
        args = ["patch", resource, name, "--type", patch_type, "-p", json.dumps(patch, sort_keys=True),
                f"--dry-run={'server' if dry_run else 'none'}"]
        args += ["--namespace", namespace] if namespace else []
        return self.check(args)

    def apply(self, path=None, text=None, dry_run=False):
        args = ["apply", f"--dry-run={'server' if dry_run else 'none'}", "-f", "-" if text is not None else path]
        return self.check(args, data=text)

    def delete(self, resource, name, namespace=None, dry_run=False, timeout=60):
        args = ["delete", f"{resource}/{name}", "--ignore-not-found", f"--timeout={timeout}s",
                f"--dry-run={'server' if dry_run else 'none'}"]
        args += ["--namespace", namespace] if namespace else []
        return self.check(args)

    def cordon(self, node, dry_run=False):
        return self.check(["cordon", node] + (["--dry-run=server"] if dry_run else []))

    def uncordon(self, node, dry_run=False):
        return self.check(["uncordon", node] + (["--dry-run=server"] if dry_run else []))

    def drain(self, node, timeout, dry_run=False):
        """Evict every pod of ``node`` but DaemonSet pods. kubectl drain evicts through the Eviction API, which
        refuses an eviction that a PodDisruptionBudget forbids (HTTP 429); kubectl retries it every 5 s until
        ``--timeout`` and then fails naming the pod (kubernetes/kubectl pkg/drain/drain.go, evictPods, commit
        97f0e10); against a server without the eviction subresource it deletes the pods instead. The kubectl
        timeout runs inside the module's own, a minute longer."""
        args = ["drain", node, "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={int(timeout)}s"]
        args += ["--dry-run=server"] if dry_run else []
        return self.check(args, timeout=int(timeout) + 60)


def not_served(message):
    """Whether kubectl's error says the server does not serve the kind (a CRD not installed, a removed API)."""
    text = str(message)
    return "doesn't have a resource type" in text or "the server could not find the requested resource" in text
