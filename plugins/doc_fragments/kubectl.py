"""The options of the modules that talk to the API server (their argument spec: kube.CLIENT_ARGS)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubectl:
    description: kubectl command on the host the module runs on (the API host).
    type: str
    default: kubectl
  kubeconfig:
    description:
      - kubeconfig kubectl uses; empty means /etc/kubernetes/admin.conf (kube.DEFAULT_KUBECONFIG, the contract's
        kube_api_kubeconfig default).
    type: str
    default: ""
  request_timeout:
    description: Seconds kubectl waits for each answer of the API server.
    type: int
    default: 10
  api_host:
    description: The inventory host the module runs on (the API host), for its messages; empty for the control machine.
    type: str
    default: ""
notes:
  - Every call goes through kubectl (plugins/module_utils/kube.py), so exec credential plugins and the kubeconfig a
    managed cluster's provider writes work as they do for kubectl.
"""
