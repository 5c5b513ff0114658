"""The kubectl options of the modules that talk to the API server (their argument spec: api.KUBECTL_ARGS)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubectl:
    description: kubectl command.
    type: str
    default: kubectl
  kubeconfig:
    description: kubeconfig kubectl uses.
    type: path
    default: /etc/kubernetes/admin.conf
  request_timeout:
    description: Seconds kubectl waits for each answer of the API server.
    type: int
    default: 10
"""
