"""kube-scheduler: the config variant each Kubernetes version needs (scheduler), the config APIs (scheduler_api), the
extender entries (scheduler_extender), kubeadm's own static pod (scheduler_kubeadm), the patch of the unit or static
pod (scheduler_patch) and the host plan's scheduler section (scheduler_plan). Imports the shared ground and the
stacks' catalog (which stacks need an extender)."""
