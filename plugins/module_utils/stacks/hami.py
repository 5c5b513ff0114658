"""HAMi (Project-HAMi/HAMi): the facts of the pinned release the hami stack deploys.

HAMi shares NVIDIA GPUs by memory and cores. It always runs its own kube-scheduler: a Deployment whose pod holds
a kube-scheduler container and HAMi's extender (filter + bind) on https://127.0.0.1:443, a mutating webhook that
sends every pod asking for a HAMi resource to that scheduler, and a device plugin DaemonSet on the nodes
labelled gpu=on. This project renders the kube-scheduler's config with its own per-version code
(scheduler.scheduler_config, the variant each Kubernetes version reads) instead of the chart's coarse rule.

Pinned releases, one per Kubernetes range (the newest release the cluster's version supports; docs/versions.md,
"Pinned components"):

- v2.10.0 (2026-08-21) for Kubernetes 1.23 and newer: the newest release; its chart and files were read as one set
  at the tag (Project-HAMi/HAMi, tag v2.10.0, commit 4707fb02). README.md "Prerequisites": "Kubernetes >= 1.23",
  NVIDIA driver >= 440. charts/hami/Chart.yaml still says kubeVersion ">= 1.18.0-0" and the chart keeps its
  pre-1.22 Policy branch; the project follows the README and keeps v2.6.0 below 1.23.
- v2.6.0 for 1.18-1.22, the release this project pinned before (README "Kubernetes version >= 1.18").

What v2.10.0 changes against v2.6.0, at the tag (charts/hami/templates/...):

  scheduler/deployment.yaml  the extender runs with leader election (--leader-elect=true
      --leader-elect-resource-name=<schedulerName> --leader-elect-resource-namespace=<namespace>, values
      scheduler.leaderElect true) and gets POD_NAME/POD_NAMESPACE: it watches the leases of its namespace and counts
      itself leader when the kube-scheduler of its own pod holds the lease (pkg/util/leaderelection), then labels its
      pod hami.io/scheduler-role=leader (pkg/scheduler/scheduler.go, updateSchedulerLabel); readiness is /readyz.
  scheduler/service.yaml  the Service selects hami.io/scheduler-role: leader too.
  scheduler/clusterrole.yaml  adds resourcequotas get/list/watch (the extender's quota informer). A read-only rule
      for resource.k8s.io deviceclasses, resourceclaims, resourceclaimtemplates and resourceslices was added by
      commit 20280b74 (#1917, 2026-06-03: "On Kubernetes 1.34+, the embedded kube-scheduler starts DRA informers
      ... If the cluster's system:kube-scheduler ClusterRole lacks these permissions, the scheduler container
      continuously emits reflector errors") and removed again by 4e237790 (#2038 "remove dra from charts",
      2026-07-09), so it is NOT in the chart at v2.10.0. This project keeps that rule from Kubernetes 1.34
      (DRA_RBAC_FROM_MINOR): read-only, and it ends the reflector errors wherever the cluster's role lacks it.
  scheduler/role.yaml, rolebinding.yaml  leases: create, list, watch, get, update, patch in the namespace (the chart
      binds cluster-admin in v2.6.0's rolebinding.yaml; this project never did).
  scheduler/device-configmap.yaml  new NVIDIA keys (preConfiguredDeviceMemory, memoryFactor, enableNumaTopology,
      migProfileAllowlist) and other vendors' sections: roles/gpu_sharing_stacks/files/hami-device-config-v2.10.0.yaml
      is that template rendered with the chart's default values.
  device-plugin/daemonsetnvidia.yaml  hostNetwork false (values devicePlugin.hostNetwork), DEVICE_LIST_STRATEGY
      envvar, a hostPath /var/run/cdi (DirectoryOrCreate) on /var/run/cdi; vgpu-monitor exposes metrics on 9394.
  device-plugin/monitorrole.yaml  adds events list/create/update.
  Unchanged: the kube-scheduler config (configmap.yaml: urlPrefix https://127.0.0.1:443, filter, bind, weight 1,
      httpTimeout 30s, nodeCacheCapable, enableHTTPS, tlsConfig insecure, the NVIDIA managedResources with
      ignoredByScheduler true; this project lists NVIDIA's only, the chart also other vendors'), the webhook
      (webhook.yaml), the certgen Jobs and their images (values scheduler.patch.image/imageNew), the Service ports,
      the node label gpu=on (values devicePlugin.nvidiaNodeSelector), the device plugin's command.

The facts of v2.6.0, from the copies read then (commits in brackets):

  README.md [f4099f5]  "Prerequisites": NVIDIA drivers >= 440, Kubernetes version >= 1.18; "Install": label
      the GPU nodes gpu=on ("Without this label, the nodes cannot be managed by our scheduler"); pods request
      nvidia.com/gpu (physical GPUs) and nvidia.com/gpumem (MiB per GPU).
  charts/hami/Chart.yaml [f23d1f5]  kubeVersion ">= 1.18.0-0".
  charts/hami/values.yaml [06e9e80]  global.imageTag v2.6.0; image docker.io/projecthami/hami (extender, device
      plugin and monitor); schedulerName hami-scheduler; resource names nvidia.com/gpu, nvidia.com/gpumem,
      nvidia.com/gpumem-percentage, nvidia.com/gpucores, nvidia.com/priority; scheduler.service NodePort 31998 ->
      443 and monitor 31993 -> 9395; admissionWebhook failurePolicy Ignore, reinvocationPolicy Never;
      scheduler.nodeLockExpire 5m; defaultSchedulerPolicy binpack (nodes) / spread (GPUs); certgen images
      jettech/kube-webhook-certgen:v1.5.2 (patch.image) and liangjw/kube-webhook-certgen:v1.1.1 (patch.imageNew);
      devicePlugin deviceSplitCount 10, deviceMemoryScaling 1, deviceCoreScaling 1, migStrategy none,
      nvidianodeSelector gpu: "on".
  charts/hami/templates/scheduler/deployment.yaml [5c93276]  the pod: kube-scheduler container (Policy flags
      before 1.22, --config from 1.22) and vgpu-scheduler-extender (scheduler --http_bind=0.0.0.0:443
      --cert_file=/tls/tls.crt --key_file=/tls/tls.key ...), Secret hami-scheduler-tls on /tls, device config on
      /device-config.yaml, liveness /healthz on 443 over HTTPS, label hami.io/webhook: ignore.
  charts/hami/templates/scheduler/configmap.yaml [2ccf412] (Policy, before 1.22) and configmapnew.yaml
      [75cf53b] (v1beta2 up to 1.25, v1 after): the extender urlPrefix https://127.0.0.1:443, filterVerb filter,
      bindVerb bind, weight 1, httpTimeout 30s, nodeCacheCapable true, enableHTTPS true, tlsConfig insecure true,
      managedResources with ignoredByScheduler true. (The chart's Policy spells "ignoreable", which kube-scheduler
      ignores; false is the default either way.)
  charts/hami/templates/scheduler/webhook.yaml [86cf3df]  MutatingWebhookConfiguration hami-webhook, webhook
      vgpu.hami.io, Service hami-scheduler path /webhook, pods CREATE, objectSelector and namespaceSelector
      hami.io/webhook NotIn [ignore], sideEffects None, timeoutSeconds 10, admissionReviewVersions [v1beta1].
  charts/hami/templates/scheduler/job-patch/job-createSecret.yaml [86cf3df], job-patchWebhook.yaml [0af9235],
      clusterrole.yaml [218ff38], role.yaml [2a82cec]  TLS: kube-webhook-certgen "create" writes Secret
      hami-scheduler-tls for hosts hami-scheduler.<ns>.svc and 127.0.0.1 (so the kube-scheduler reaches the
      extender at 127.0.0.1 and the API server the webhook through the Service); "patch" puts its CA into the
      webhook; the chart's Jobs use the 1.5.2 image before 1.22 and 1.1.1 from 1.22.
  charts/hami/templates/scheduler/clusterrole.yaml [422ba0d], clusterrolebinding.yaml [29a80d7]  the
      scheduler's rules, bound with system:kube-scheduler and system:volume-scheduler.
  charts/hami/templates/scheduler/device-configmap.yaml [75cf53b]  device-config.yaml (nvidia section).
  charts/hami/templates/device-plugin/daemonsetnvidia.yaml [06e9e80], monitorrole.yaml [c45c5b5]  the device
      plugin DaemonSet (device-plugin and vgpu-monitor containers, host paths) and its ClusterRole.
  pkg/device/nvidia/device.go [024910e]  RegisterAnnos "hami.io/node-nvidia-register": the node annotation in
      which HAMi's device plugin registers each GPU (memory, cores); nvidia.com/gpumem and nvidia.com/gpucores
      are not node allocatable resources, only nvidia.com/gpu is (the vGPU count, deviceSplitCount per GPU).
      The webhook (MutateAdmission) claims every container that limits nvidia.com/gpu, gpumem, gpumem-percentage
      or gpucores.
"""

# (release, oldest Kubernetes minor): the newest release whose range holds the cluster's minor is deployed.
RELEASES = (("v2.6.0", 18), ("v2.10.0", 23))
RELEASE = RELEASES[-1][0]  # the newest pin
# The embedded kube-scheduler starts DRA informers from Kubernetes 1.34 (commit 20280b74, #1917).
DRA_RBAC_FROM_MINOR = 34
DRA_RULE = {"apiGroups": ["resource.k8s.io"],
            "resources": ["deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"],
            "verbs": ["get", "list", "watch"]}
SCHEDULER_NAME = "hami-scheduler"
WEBHOOK_NAME = "hami-webhook"
TLS_SECRET = "hami-scheduler-tls"
NODE_LABELS = {"gpu": "on"}
# What a pod asks for (README); the node advertises only nvidia.com/gpu, the rest is in REGISTER_ANNOTATION.
RESOURCES = ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"]
ALLOCATABLE = ["nvidia.com/gpu"]
REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
# The chart's managedResources for NVIDIA GPUs (values.yaml resource names), all ignoredByScheduler.
MANAGED_RESOURCES = ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage",
                     "nvidia.com/priority"]
# Kubernetes 1.18 is HAMi's oldest (README, Chart.yaml kubeVersion).
OLDEST_MINOR = 18
# kube-webhook-certgen image key per Kubernetes minor, as the chart's Jobs choose (patch.image before 1.22).
CERTGEN_NEW_FROM_MINOR = 22
EXTENDER_URL = "https://127.0.0.1:443"
SERVICE = {"name": SCHEDULER_NAME, "port": 443, "target_port": 443, "node_port": 31998,
           "monitor_port": 31993, "monitor_target_port": 9395}


def extender():
    """HAMi's extender in the neutral form of scheduler.scheduler_config (configmap.yaml / configmapnew.yaml)."""
    return {
        "url_prefix": EXTENDER_URL,
        "filter_verb": "filter",
        "bind_verb": "bind",
        "weight": 1,
        "enable_https": True,
        # the chart's choice: the certificate is self-signed, for 127.0.0.1 and the Service name
        "tls": {"insecure": True},
        "http_timeout": 30,
        "node_cache_capable": True,
        "managed_resources": [{"name": name, "ignored_by_scheduler": True} for name in MANAGED_RESOURCES],
        "ignorable": False,
    }


def release(minor):
    """The HAMi release deployed on Kubernetes 1.``minor`` (RELEASES)."""
    return [name for name, oldest in RELEASES if minor >= oldest][-1]


def release_facts(minor):
    """What the templates need to know of the release for Kubernetes 1.``minor``."""
    chosen = release(minor)
    newer = chosen != RELEASES[0][0]
    return {
        "release": chosen,
        "layout": "v2.10" if newer else "v2.6",  # the chart layout the templates follow
        "hami_image": f"projecthami/hami:{chosen}",
        # v2.10.0: the extender follows its pod's kube-scheduler lease and labels the leader; the Service selects it
        "leader_election": newer,
        "device_plugin_host_network": not newer,
        "dra_rbac": minor >= DRA_RBAC_FROM_MINOR,
    }


def certgen_image_key(minor):
    """gpu_sharing_stacks_images key of the kube-webhook-certgen image for a Kubernetes minor."""
    return "hami_certgen" if minor >= CERTGEN_NEW_FROM_MINOR else "hami_certgen_legacy"
