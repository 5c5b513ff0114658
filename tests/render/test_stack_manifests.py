"""Every manifest of every GPU-sharing stack, rendered for each Kubernetes version, validated offline.

One ansible-playbook run renders the gpu_sharing_stacks role (render entry point) for a generated
inventory with one host per (Kubernetes version x stack configuration). Each rendered object is
then checked against the OpenAPI schema of that Kubernetes version in strict mode (unknown fields
rejected) by tests/kubernetes_schemas.py: kubernetes-validate 1.37.x for 1.25+, the schema folders of
kubernetes-validate 1.24.1 for 1.24 and older; a missing schema and an apiVersion the version no longer
serves are failures. Custom resources (the elastic-gpu samples) are validated against the CRD this project renders.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import kubernetes_schemas
import pytest
import yaml
from kubernetes_schemas import NEWEST, check_objects
from playbook_runner import render_ok, run_playbook

TOP = Path(__file__).resolve().parents[2]
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.manifests import manifest_objects  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import MANAGED_BY, STACK_LABEL  # noqa: E402

VERSIONS = ["1.16.15", "1.20.15", "1.22.17", "1.24.17", "1.27.16", "1.30.4", NEWEST]

CONFIGS = {  # a cluster runs several stacks on different nodes; together these reach every template
    "dp-egpu": {"gpu_sharing_stacks": ["nvidia_device_plugin", "elastic_gpu"],
                "gpu_sharing_stacks_samples_enabled": True},
    "dp-ts-gs": {"gpu_sharing_stacks": ["nvidia_device_plugin", "gpushare"],
                 "device_plugin_sharing": "time-slicing", "device_plugin_mig_strategy": "mixed",
                 "gpu_sharing_stacks_namespace": "gpu-system",
                 "gpu_sharing_stacks_registry_mirror": "mirror.local:5000", "gpu_sharing_stacks_samples_enabled": True},
    "dp-mps-nano": {"gpu_sharing_stacks": ["nvidia_device_plugin", "nano_gpu"],
                    "device_plugin_sharing": "mps", "gpu_sharing_stacks_device_plugin_replicas": 8,
                    "gpu_sharing_stacks_samples_enabled": True},
    "dp-v011-gs-mps": {"gpu_sharing_stacks": ["nvidia_device_plugin", "gpushare"],
                       "gpu_sharing_stacks_device_plugin_release": "v0.11.0", "gpushare_mps": True,
                       "device_plugin_mig_strategy": "single"},
}
HOSTS = {f"k{v.replace('.', '-')}-{c}": (v, c) for v in VERSIONS for c in CONFIGS}
# Managed control plane (OKE reference cluster): no kube_control_plane host, so a second kube-scheduler with the
# extender is rendered (gpu_sharing_stacks_secondary_scheduler auto). Only KubeSchedulerConfiguration versions.
MANAGED = {"managed-egpu": {"gpu_sharing_stacks": ["elastic_gpu"], "gpu_sharing_stacks_samples_enabled": True},
           "managed-gs": {"gpu_sharing_stacks": ["gpushare"], "gpu_sharing_stacks_samples_enabled": True,
                          "gpu_sharing_stacks_namespace": "gpu-system",
                          "gpu_sharing_stacks_registry_mirror": "mirror.local:5000"}}
MANAGED_VERSIONS = ["1.25.16", "1.30.4"]
CONFIGS.update(MANAGED)
HOSTS.update({f"k{v.replace('.', '-')}-{c}": (v, c) for v in MANAGED_VERSIONS for c in MANAGED})
# HAMi runs its own kube-scheduler everywhere: 1.18 (its oldest, a Policy file) and the versions of each variant.
HAMI = {"hami": {"gpu_sharing_stacks": ["hami"], "gpu_sharing_stacks_samples_enabled": True},
        "hami-mirror": {"gpu_sharing_stacks": ["hami"], "gpu_sharing_stacks_namespace": "gpu-system",
                        "gpu_sharing_stacks_registry_mirror": "mirror.local:5000"}}
HAMI_VERSIONS = ["1.18.20", "1.20.15", "1.22.17", "1.23.17", "1.25.16", "1.29.10", "1.35.0", NEWEST]
CONFIGS.update(HAMI)
HOSTS.update({f"k{v.replace('.', '-')}-hami": (v, "hami") for v in HAMI_VERSIONS})
HOSTS["k1-29-10-hami-mirror"] = ("1.29.10", "hami-mirror")
# NVIDIA's DRA driver: every minor from 1.32 (beta) to the newest schemas; GPUs with ComputeDomains (the chart's
# default), GPUs only with the sharing gates on, and the extended resource turned on where it is still opt-in.
DRA = {"dra": {"gpu_sharing_stacks": ["nvidia_dra"], "gpu_sharing_stacks_samples_enabled": True},
       "dra-shared": {"gpu_sharing_stacks": ["nvidia_dra"], "gpu_sharing_stacks_samples_enabled": True,
                      "gpu_sharing_stacks_dra_compute_domains": False, "gpu_sharing_stacks_namespace": "gpu-system",
                      "gpu_sharing_stacks_registry_mirror": "mirror.local:5000",
                      "gpu_sharing_stacks_dra_feature_gates": {"TimeSlicingSettings": True, "MPSSupport": True}},
       "dra-extended": {"gpu_sharing_stacks": ["nvidia_dra"], "gpu_sharing_stacks_dra_extended_resource": True}}
DRA_VERSIONS = {"1.32.9": "v1beta1", "1.33.5": "v1beta2", "1.34.1": "v1", "1.35.0": "v1", "1.36.0": "v1",
                NEWEST: "v1"}
CONFIGS.update(DRA)
DRA_SHARED_VERSIONS = ("1.32.9", "1.33.5", "1.35.0")
HOSTS.update({f"k{v.replace('.', '-')}-dra": (v, "dra") for v in DRA_VERSIONS})
HOSTS.update({f"k{v.replace('.', '-')}-dra-shared": (v, "dra-shared") for v in DRA_SHARED_VERSIONS})
HOSTS["k1-34-1-dra-extended"] = ("1.34.1", "dra-extended")
# The GPU nodes' MIG layouts the DRA samples read (not rendered themselves).
GPU_NODES = {"gpu-a": {"nvidia_mig_layout": "all-1g.10gb"},
             "gpu-b": {"nvidia_mig_layout": [{"devices": "all", "profiles": ["3g.40gb", "2g.20gb"]}]}}
CHART = TOP / "tests" / "render" / "fixtures" / "dra-driver-nvidia-gpu-v0.4.1"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("stacks")
    inventory = {"all": {"hosts": {host: {"kubernetes_version": v, **CONFIGS[c]} for host, (v, c) in HOSTS.items()},
                         # render_stacks.yml reads kube_control_plane: the managed hosts set the setting instead
                         "children": {"kube_control_plane": {"hosts": {h: None for h, (_, c) in HOSTS.items()
                                                                       if c not in MANAGED}},
                                      "gpu_nodes": {"hosts": GPU_NODES}}},
                 }
    for host, (_, config) in HOSTS.items():
        if config in MANAGED:
            inventory["all"]["hosts"][host]["gpu_sharing_stacks_secondary_scheduler"] = True
    (work / "inventory.yml").write_text(yaml.safe_dump(inventory))
    render_ok("-i", str(work / "inventory.yml"), "tests/render/render_stacks.yml", "-e", f"render_dir={work / 'out'}",
              "--limit", "all:!gpu_nodes")
    return work / "out"


def _documents(rendered: Path, host: str) -> list[tuple[Path, dict]]:
    files = sorted((rendered / host).rglob("*.yml"))
    assert files, f"nothing rendered for {host}"
    return [(f, d) for f in files for d in yaml.safe_load_all(f.read_text()) if d]


def _stored_differently(document: dict) -> list[str]:
    """What a real API server stores differently from the manifest in lists that client-side `kubectl apply` replaces
    whole or cannot match: each such field makes every later apply "configure" the object (seen on a real
    Kubernetes 1.36.3: the nvidia_dra stack was never idempotent against it)."""
    found = []

    def walk(value, path):
        if isinstance(value, dict):
            if path.endswith(".env[]") and value.get("value") == "":
                found.append(f"{path} {value.get('name')}: value \"\" (stored as no value)")
            if (path.endswith(".resourceRules[]") or path.endswith(".rules[]")) and "operations" in value \
                    and "scope" not in value:
                found.append(f"{path}: no scope (stored as \"*\")")
            for key, child in value.items():
                walk(child, f"{path}.{key}")
        elif isinstance(value, list):
            for child in value:
                walk(child, f"{path}[]")

    walk(document, document.get("kind", "?"))
    return found


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_every_manifest_is_written_as_the_api_server_stores_it(rendered, host):
    found = [f"{path.name}: {problem}" for path, document in _documents(rendered, host)
             for problem in _stored_differently(document)]
    assert found == []


def test_the_stored_differently_check_finds_what_it_looks_for():
    bad = {"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
        {"env": [{"name": "A", "value": ""}, {"name": "B", "value": "x"}, {"name": "C"}]}]}}}}
    rules = {"kind": "ValidatingAdmissionPolicy", "spec": {"matchConstraints": {"resourceRules": [
        {"operations": ["CREATE"], "resources": ["pods"]}]}}}
    assert _stored_differently(bad) == ['Deployment.spec.template.spec.containers[].env[] A: value "" '
                                        '(stored as no value)']
    assert _stored_differently(rules) == ["ValidatingAdmissionPolicy.spec.matchConstraints.resourceRules[]: no scope "
                                          '(stored as "*")']


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_every_manifest_is_valid_for_its_kubernetes_version(rendered, host):
    version, _ = HOSTS[host]
    egpu_host = f"k{version.replace('.', '-')}-dp-egpu"
    custom = kubernetes_schemas.crd_schemas(_documents(rendered, egpu_host)) if (rendered / egpu_host).exists() else {}
    assert check_objects(_documents(rendered, host), version, rendered, custom) > 0


def _stack_of(rendered: Path, host: str, path: Path) -> str:
    relative = path.relative_to(rendered / host / "etc/kubernetes/kube-gpu-nodes/stacks")
    return relative.stem if relative.parts[0] == "samples" else relative.parts[0]


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_every_object_carries_the_project_labels_and_its_stack(rendered, host):
    """What pruning lists by: app.kubernetes.io/managed-by, and the stack (its folder; samples: their stack)."""
    for path, doc in _documents(rendered, host):
        labels = doc["metadata"].get("labels") or {}
        where = f"{path.relative_to(rendered)} {doc['kind']} {doc['metadata']['name']}"
        assert all(labels.get(k) == v for k, v in MANAGED_BY.items()), f"{where}: {labels}"
        assert labels.get(STACK_LABEL) == _stack_of(rendered, host, path), f"{where}: {labels}"


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_the_module_reads_the_objects_a_yaml_parser_reads(rendered, host):
    """k8s_manifests finds the objects of a manifest without a YAML library on the node: same answer as PyYAML."""
    for path in sorted((rendered / host).rglob("*.yml")):
        text = path.read_text()
        expected = [{"group": d["apiVersion"].rpartition("/")[0], "version": d["apiVersion"].rpartition("/")[2],
                     "kind": d["kind"], "name": d["metadata"]["name"],
                     "namespace": d["metadata"].get("namespace", "")}
                    for d in yaml.safe_load_all(text) if d]
        assert manifest_objects(text, str(path)) == expected, path


def test_strict_validation_rejects_a_misspelled_field():
    _validate = kubernetes_schemas.validate
    bad = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
               "metadata": {"labels": {"a": "b"}},
               "spec": {"containers": [{"name": "c", "image": "i", "imagePullpolicy": "Always"}]}}}}
    for version in ("1.16.15", NEWEST):
        with pytest.raises(AssertionError, match="imagePullpolicy"):
            _validate(bad, version)


def test_unknown_kind_is_a_failure_not_a_warning():
    with pytest.raises(AssertionError, match="Couldn't find schema"):
        kubernetes_schemas.validate({"apiVersion": "example.com/v1", "kind": "Nope", "metadata": {"name": "x"}},
                                    NEWEST)
    with pytest.raises(AssertionError, match="Couldn't find schema"):
        kubernetes_schemas.validate_old({"apiVersion": "example.com/v1", "kind": "Nope", "metadata": {"name": "x"}},
                                        "1.20.0")


def test_a_removed_api_version_is_a_failure_even_where_the_old_schema_still_describes_it():
    daemonset = {"apiVersion": "extensions/v1beta1", "kind": "DaemonSet", "metadata": {"name": "x"}}
    with pytest.raises(AssertionError, match=r"no longer served by Kubernetes 1\.16\.15"):
        kubernetes_schemas.validate(daemonset, "1.16.15")


def _by_kind(rendered, host, kind, name):
    return next(d for _, d in _documents(rendered, host) if d["kind"] == kind and d["metadata"]["name"] == name)


def test_gpushare_device_plugin_uses_gib_and_mps_only_when_asked(rendered):
    plain = _by_kind(rendered, "k1-24-17-dp-ts-gs", "DaemonSet", "gpushare-device-plugin-ds")
    mps = _by_kind(rendered, "k1-24-17-dp-v011-gs-mps", "DaemonSet", "gpushare-device-plugin-ds")
    plain_cmd = plain["spec"]["template"]["spec"]["containers"][0]["command"]
    mps_cmd = mps["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--memory-unit=GiB" in plain_cmd and "--memory-unit=GiB" in mps_cmd
    assert "--mps=true" not in plain_cmd and "--mps=true" in mps_cmd
    assert plain["spec"]["template"]["spec"]["nodeSelector"] == {"gpushare": "true"}
    assert plain["metadata"]["namespace"] == "gpu-system"
    assert plain["spec"]["template"]["spec"]["containers"][0]["image"].startswith("mirror.local:5000/acs/")


def test_gpushare_service_matches_the_scheduler_extender_url(rendered):
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import stack_extenders

    service = _by_kind(rendered, "k1-30-4-dp-v011-gs-mps", "Service", "gpushare-schd-extender")
    node_port = service["spec"]["ports"][0]["nodePort"]
    [ext] = stack_extenders(["gpushare"], {"gpushare": f"http://127.0.0.1:{node_port}"})
    assert ext["url_prefix"] == "http://127.0.0.1:32766/gpushare-scheduler"
    deployment = _by_kind(rendered, "k1-30-4-dp-v011-gs-mps", "Deployment", "gpushare-schd-extender")
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PORT"] == str(service["spec"]["ports"][0]["targetPort"])


@pytest.mark.parametrize(("version", "keys"), [
    ("1.16.15", ["node-role.kubernetes.io/master"]),
    ("1.24.17", ["node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane"]),
    ("1.30.4", ["node-role.kubernetes.io/control-plane"]),
])
def test_extender_tolerates_the_control_plane_taints_of_the_version(rendered, version, keys):
    deployment = _by_kind(rendered, f"k{version.replace('.', '-')}-dp-mps-nano", "Deployment", "nano-gpu-scheduler")
    tolerated = [t["key"] for t in deployment["spec"]["template"]["spec"]["tolerations"]]
    assert [k for k in tolerated if k.startswith("node-role")] == keys


def test_no_critical_pod_annotation_and_priority_class_everywhere(rendered):
    for host in HOSTS:
        for _, doc in _documents(rendered, host):
            if doc["kind"] in ("DaemonSet", "Deployment") and doc["metadata"]["namespace"] != "default":
                pod = doc["spec"]["template"]
                assert "scheduler.alpha.kubernetes.io/critical-pod" not in pod["metadata"].get("annotations", {})
                assert pod["spec"]["priorityClassName"].startswith("system-")


def test_device_plugin_variants(rendered):
    legacy = _by_kind(rendered, "k1-30-4-dp-v011-gs-mps", "DaemonSet", "nvidia-device-plugin-daemonset")
    assert legacy["spec"]["template"]["spec"]["containers"][0]["args"] == ["--fail-on-init-error=false",
                                                                        "--mig-strategy=single"]
    assert legacy["spec"]["template"]["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.11.0"
    config = _by_kind(rendered, "k1-30-4-dp-mps-nano", "ConfigMap", "nvidia-device-plugin-config")
    sharing = yaml.safe_load(config["data"]["config.yaml"])["sharing"]
    assert sharing == {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 8}]}}
    names = {d["metadata"]["name"] for _, d in _documents(rendered, "k1-30-4-dp-mps-nano")}
    assert "nvidia-device-plugin-mps-control-daemon" in names
    ts = _by_kind(rendered, "k1-30-4-dp-ts-gs", "ConfigMap", "nvidia-device-plugin-config")
    assert "timeSlicing" in yaml.safe_load(ts["data"]["config.yaml"])["sharing"]
    assert yaml.safe_load(ts["data"]["config.yaml"])["flags"]["migStrategy"] == "mixed"


def test_elastic_gpu_has_four_crds_and_the_reference_agent_placement(rendered):
    docs = _documents(rendered, "k1-22-17-dp-egpu")
    assert sorted(d["metadata"]["name"] for _, d in docs if d["kind"] == "CustomResourceDefinition") == [
        "elasticgpuclaims.elasticgpu.io", "elasticgpuclasses.elasticgpu.io", "elasticgpus.elasticgpu.io",
        "gpus.elasticgpu.io"]
    agent = _by_kind(rendered, "k1-22-17-dp-egpu", "DaemonSet", "elastic-gpu-agent")["spec"]["template"]["spec"]
    assert agent["nodeSelector"] == {"gpu-node": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in agent["tolerations"]


def _in_cluster_scheduler_schema(name: str = "v1") -> dict:
    """tests/schemas/kube-scheduler/<name>.json, except that clientConnection may be absent: an in-cluster
    kube-scheduler has no kubeconfig (client-go uses the pod's service account); everything else stays strict."""
    schema = json.loads((TOP / "tests" / "schemas" / "kube-scheduler" / f"{name}.json").read_text())
    schema["required"] = [r for r in schema.get("required", []) if r != "clientConnection"]
    return schema


@pytest.mark.parametrize("version", MANAGED_VERSIONS)
@pytest.mark.parametrize(("config", "stack", "namespace", "image"), [
    ("managed-egpu", "elastic_gpu", "kube-system", "registry.k8s.io/kube-scheduler:v"),
    ("managed-gs", "gpushare", "gpu-system", "mirror.local:5000/kube-scheduler:v"),
])
def test_managed_control_plane_gets_a_second_scheduler_with_the_extender(rendered, version, config, stack,
                                                                         namespace, image):
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import stack_catalog

    host = f"k{version.replace('.', '-')}-{config}"
    service = stack_catalog([stack])[stack]["service"]
    rendered_service = _by_kind(rendered, host, "Service", service["name"])
    assert rendered_service["spec"]["ports"][0]["port"] == service["port"]
    deployment = _by_kind(rendered, host, "Deployment", "kgn-gpu-scheduler")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == image + version
    assert "--config=/etc/kubernetes/kgn-gpu-scheduler/config.yaml" in pod["containers"][0]["command"]
    assert pod["serviceAccountName"] == "kgn-gpu-scheduler" and deployment["metadata"]["namespace"] == namespace
    bindings = {d["roleRef"]["name"] for _, d in _documents(rendered, host)
                if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].startswith("kgn-gpu-scheduler")}
    assert bindings == {"system:kube-scheduler", "system:volume-scheduler"}
    scheduler = yaml.safe_load(_by_kind(rendered, host, "ConfigMap", "kgn-gpu-scheduler-config")["data"]["config.yaml"])
    jsonschema.Draft202012Validator(_in_cluster_scheduler_schema()).validate(scheduler)
    assert "clientConnection" not in scheduler
    assert scheduler["profiles"] == [{"schedulerName": "kgn-gpu-scheduler"}]
    assert scheduler["leaderElection"]["resourceName"] == "kgn-gpu-scheduler"
    [extender] = scheduler["extenders"]
    assert extender["urlPrefix"].startswith(f"http://{service['name']}.{namespace}.svc:{service['port']}/")
    pods = [d for _, d in _documents(rendered, host) if d["kind"] in ("Pod", "Deployment")
            and d["metadata"]["namespace"] == "default"]
    assert pods and all((p["spec"].get("template", {}).get("spec") or p["spec"])["schedulerName"]
                        == "kgn-gpu-scheduler" for p in pods)


def test_in_cluster_schema_still_rejects_a_misspelled_field():
    with pytest.raises(jsonschema.ValidationError, match="schedulername"):
        jsonschema.Draft202012Validator(_in_cluster_scheduler_schema()).validate(
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
             "profiles": [{"schedulername": "x"}]})


def test_self_managed_control_plane_gets_no_second_scheduler(rendered):
    docs = _documents(rendered, "k1-30-4-dp-egpu")
    assert not [d for _, d in docs if d["metadata"]["name"].startswith("kgn-gpu-scheduler")]
    assert not [d for _, d in docs if d["kind"] == "Pod" and "schedulerName" in d["spec"]]


HAMI_KINDS = {  # file -> kinds, in order
    "hami/rbac.yml": ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ClusterRoleBinding",
                      "Role", "RoleBinding", "RoleBinding", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"],
    "hami/certgen-create.yml": ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Job"],
    "hami/scheduler-config.yml": ["ConfigMap", "ConfigMap"],
    "hami/scheduler.yml": ["Deployment", "Service"],
    "hami/device-plugin.yml": ["ConfigMap", "DaemonSet"],
    "hami/webhook.yml": ["MutatingWebhookConfiguration"],
    "hami/certgen-patch.yml": ["Job"],
    "samples/hami.yml": ["Pod"],
}


def _hami_docs(rendered, host):
    folder = rendered / host / "etc/kubernetes/kube-gpu-nodes/stacks"
    return {str(f.relative_to(folder)): [d for d in yaml.safe_load_all(f.read_text()) if d]
            for f in sorted(folder.rglob("*.yml"))}


@pytest.mark.parametrize("version", HAMI_VERSIONS)
def test_hami_manifests_parse_with_the_expected_kinds(rendered, version):
    docs = _hami_docs(rendered, f"k{version.replace('.', '-')}-hami")
    assert {path: [d["kind"] for d in found] for path, found in docs.items()} == HAMI_KINDS


@pytest.mark.parametrize("version", HAMI_VERSIONS)
def test_hamis_scheduler_config_is_the_variant_its_kubernetes_version_reads(rendered, version):
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler import scheduler_variant

    host = f"k{version.replace('.', '-')}-hami"
    variant = scheduler_variant(version)
    data = _by_kind(rendered, host, "ConfigMap", "hami-scheduler-config")["data"]
    if variant["format"] == "policy":
        config = json.loads(data["config.json"])
        enable_https, timeout = "enableHttps", 30 * 10**9
    else:
        config = yaml.safe_load(data["config.yaml"])
        enable_https, timeout = "enableHTTPS", "30s"
        assert config["profiles"] == [{"schedulerName": "hami-scheduler"}] and "clientConnection" not in config
        assert config["leaderElection"]["resourceName"] == "hami-scheduler"
    assert (config["apiVersion"], config["kind"]) == (variant["api_version"], variant["kind"])
    schema = "policy-v1" if variant["format"] == "policy" else variant["api_version"].rsplit("/", 1)[1]
    jsonschema.Draft202012Validator(_in_cluster_scheduler_schema(schema)).validate(config)  # strict per apiVersion
    [extender] = config["extenders"]
    assert extender["urlPrefix"] == "https://127.0.0.1:443" and extender[enable_https] is True
    assert (extender["filterVerb"], extender["bindVerb"], extender["httpTimeout"]) == ("filter", "bind", timeout)
    assert "prioritizeVerb" not in extender and extender["tlsConfig"] == {"insecure": True}
    assert [r["name"] for r in extender["managedResources"]] == [
        "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage",
        "nvidia.com/priority"]
    assert all(r["ignoredByScheduler"] for r in extender["managedResources"])

    pod = _by_kind(rendered, host, "Deployment", "hami-scheduler")["spec"]["template"]["spec"]
    scheduler, extender_container = pod["containers"]
    assert scheduler["image"] == f"registry.k8s.io/kube-scheduler:v{version}"
    config_file = "config.json" if variant["format"] == "policy" else "config.yaml"
    assert f"{variant['flag']}=/etc/kubernetes/kgn-gpu-scheduler/{config_file}" in scheduler["command"]
    minor = int(version.split(".")[1])
    release = "v2.10.0" if minor >= 23 else "v2.6.0"  # hami.py: v2.10.0 from 1.23 (its README), v2.6.0 before
    assert extender_container["image"] == f"projecthami/hami:{release}"
    assert "--http_bind=0.0.0.0:443" in extender_container["command"]
    leader = ["--leader-elect=true", "--leader-elect-resource-name=hami-scheduler",
              "--leader-elect-resource-namespace=kube-system"]
    assert all(f in extender_container["command"] for f in leader) is (minor >= 23)
    assert extender_container["readinessProbe"]["httpGet"]["path"] == ("/readyz" if minor >= 23 else "/healthz")
    service = _by_kind(rendered, host, "Service", "hami-scheduler")["spec"]["selector"]
    assert service == {"app.kubernetes.io/component": "hami-scheduler",
                       **({"hami.io/scheduler-role": "leader"} if minor >= 23 else {})}
    role = _by_kind(rendered, host, "ClusterRole", "hami-scheduler")["rules"]
    assert {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "list", "watch"]} in role
    dra = {"apiGroups": ["resource.k8s.io"], "verbs": ["get", "list", "watch"],
           "resources": ["deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"]}
    assert (dra in role) is (minor >= 34)  # the embedded kube-scheduler's DRA informers from 1.34
    device_config = yaml.safe_load(_by_kind(rendered, host, "ConfigMap", "hami-scheduler-device")["data"][
        "device-config.yaml"])
    assert device_config["nvidia"]["resourceCountName"] == "nvidia.com/gpu"
    assert ("migProfileAllowlist" in device_config["nvidia"]) is (minor >= 23)
    assert {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v} == {"hami-scheduler-tls"}
    create = _by_kind(rendered, host, "Job", "hami-admission-create")["spec"]["template"]["spec"]["containers"][0]
    assert "--host=hami-scheduler.kube-system.svc,127.0.0.1" in create["args"]
    legacy = int(version.split(".")[1]) < 22
    assert create["image"] == ("jettech/kube-webhook-certgen:v1.5.2" if legacy
                               else "liangjw/kube-webhook-certgen:v1.1.1")
    webhook = _by_kind(rendered, host, "MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0]
    assert webhook["clientConfig"]["service"] == {"name": "hami-scheduler", "namespace": "kube-system",
                                                  "path": "/webhook", "port": 443}
    plugin = _by_kind(rendered, host, "DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]
    assert plugin["nodeSelector"] == {"gpu": "on"}
    sample = _by_kind(rendered, host, "Pod", "hami-pod")["spec"]
    assert sample["schedulerName"] == "hami-scheduler"
    assert set(sample["containers"][0]["resources"]["limits"]) == {"nvidia.com/gpu", "nvidia.com/gpumem",
                                                                    "nvidia.com/gpucores"}


def test_hami_namespace_and_mirror_reach_every_image_and_reference(rendered):
    docs = [d for found in _hami_docs(rendered, "k1-29-10-hami-mirror").values() for d in found]
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "DaemonSet", "Job")]
    images = {c["image"] for pod in pods for c in pod["containers"]}
    assert images == {"mirror.local:5000/kube-scheduler:v1.29.10", "mirror.local:5000/projecthami/hami:v2.10.0",
                      "mirror.local:5000/liangjw/kube-webhook-certgen:v1.1.1"}
    webhook = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")
    assert webhook["webhooks"][0]["clientConfig"]["service"]["namespace"] == "gpu-system"
    assert not [d for d in docs if d["kind"] == "Pod"]  # samples off


BAD = {
    "two-binders": ({"kubernetes_version": "1.23.1", "gpu_sharing_stacks": ["gpushare", "nano_gpu"]},
                    "stacks gpushare and nano_gpu both bind pods"),
    "too-old": ({"kubernetes_version": "1.15.0", "gpu_sharing_stacks": ["gpushare"]},
                "outside the supported range 1.x from 1.16"),
    "mps-old-plugin": ({"kubernetes_version": "1.30.0", "gpu_sharing_stacks": ["nvidia_device_plugin"],
                        "gpu_sharing_stacks_device_plugin_release": "v0.11.0",
                        "device_plugin_sharing": "mps"},
                       "NVIDIA device plugin v0.11.0 does not support mps sharing"),
    "sharing-without-plugin": ({"kubernetes_version": "1.30.0", "gpu_sharing_stacks": ["gpushare"],
                                "device_plugin_sharing": "time-slicing"},
                               "but nvidia_device_plugin is not in gpu_sharing_stacks"),
    "unknown-stack": ({"kubernetes_version": "1.30.0", "gpu_sharing_stacks": ["hamy"]}, "unknown stack(s) 'hamy'"),
    "hami-too-old": ({"kubernetes_version": "1.17.17", "gpu_sharing_stacks": ["hami"]},
                     "HAMi supports Kubernetes 1.18 and newer"),
    "managed-policy-era": ({"kubernetes_version": "1.18.20", "gpu_sharing_stacks": ["nano_gpu"],
                            "gpu_sharing_stacks_secondary_scheduler": True},
                           "which takes extenders from a Policy file only"),
}


def test_bad_input_fails_before_anything_is_written(tmp_path):
    inventory = {"all": {"hosts": {host: hostvars for host, (hostvars, _) in BAD.items()}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    result = run_playbook("-i", str(tmp_path / "inventory.yml"), "tests/render/render_stacks.yml",
                          "-e", f"render_dir={tmp_path / 'out'}",
                          env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    assert result.returncode != 0
    failures = {host: res.get("msg", "") for play in json.loads(result.stdout)["plays"] for task in play["tasks"]
                for host, res in task["hosts"].items() if res.get("failed")}
    for host, (_, message) in BAD.items():
        assert message in " ".join(str(failures.get(host, "did not fail")).split()), (host, failures.get(host))
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.yml"))


# --- NVIDIA's DRA driver -------------------------------------------------------------------------------------

def _dra_hosts(config="dra"):
    return [(f"k{v.replace('.', '-')}-{config}", v, api) for v, api in DRA_VERSIONS.items()
            if config == "dra" or v in DRA_SHARED_VERSIONS]


@pytest.mark.parametrize(("host", "version", "api"), _dra_hosts() + _dra_hosts("dra-shared"))
def test_dra_objects_use_the_resource_api_version_of_their_kubernetes_minor(rendered, host, version, api):
    docs = [d for _, d in _documents(rendered, host)]
    resource = [d for d in docs if d["apiVersion"].startswith("resource.k8s.io/")]
    assert {d["kind"] for d in resource} == {"DeviceClass", "ResourceClaimTemplate"}
    assert {d["apiVersion"] for d in resource} == {f"resource.k8s.io/{api}"}
    policies = [d for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")]
    assert [d["apiVersion"] for d in policies] == ["admissionregistration.k8s.io/v1"] * 2


def _chart_cel() -> dict:
    """The DeviceClass name -> CEL expression of the chart's templates (verbatim copies)."""
    found = {}
    for path in sorted(CHART.glob("deviceclass-*.yaml")):
        text = path.read_text()
        name = re.search(r"^  name: (\S+)$", text, re.M).group(1)
        found[name] = re.search(r'^      expression: "(.*)"$', text, re.M).group(1)
    return found


@pytest.mark.parametrize("host", [h for h, _, _ in _dra_hosts()])
def test_dra_device_classes_carry_the_charts_cel_exactly(rendered, host):
    classes = {d["metadata"]["name"]: d for _, d in _documents(rendered, host) if d["kind"] == "DeviceClass"}
    chart = _chart_cel()
    assert set(classes) == set(chart) and len(chart) == 5
    for name, doc in classes.items():
        assert [s["cel"]["expression"] for s in doc["spec"]["selectors"]] == [chart[name]], name


def test_dra_admission_policy_is_the_charts(rendered):
    def chart(name: str, namespace: str) -> dict:
        text = (CHART / name).read_text()
        text = text.replace('{{ include "dra-driver-nvidia-gpu.name" . }}', "dra-driver-nvidia-gpu")
        text = text.replace('{{ include "dra-driver-nvidia-gpu.namespace" . }}', namespace)
        text = text.replace('{{ include "dra-driver-nvidia-gpu.serviceAccountName" . }}',
                            "dra-driver-nvidia-gpu-service-account")
        assert "{{" not in text, name
        document = yaml.safe_load(text)
        # as the API server stores it: the rule's scope defaulted (ours writes it, see test_every_manifest_is_...)
        for rule in document["spec"].get("matchConstraints", {}).get("resourceRules", []):
            rule.setdefault("scope", "*")
        return document

    for host, namespace in (("k1-34-1-dra", "kube-system"), ("k1-33-5-dra-shared", "gpu-system")):
        for kind, name in (("ValidatingAdmissionPolicy", "validatingadmissionpolicy.yaml"),
                           ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybinding.yaml")):
            ours = _by_kind(rendered, host, kind, "resourceslices-policy-dra-driver-nvidia-gpu")
            theirs = chart(name, namespace)
            assert ours["spec"] == theirs["spec"] and ours["metadata"]["name"] == theirs["metadata"]["name"]


@pytest.mark.parametrize(("host", "extended"), [
    ("k1-34-1-dra", False), ("k1-35-0-dra", False), ("k1-36-0-dra", True), (f"k{NEWEST.replace('.', '-')}-dra", True),
    ("k1-34-1-dra-extended", True), ("k1-33-5-dra", False)])
def test_dra_maps_nvidia_gpu_where_kep_5004_is_on(rendered, host, extended):
    gpu_class = _by_kind(rendered, host, "DeviceClass", "gpu.nvidia.com")
    assert (gpu_class["spec"].get("extendedResourceName") == "nvidia.com/gpu") is extended
    pods = [d["metadata"]["name"] for _, d in _documents(rendered, host) if d["kind"] == "Pod"]
    assert ("dra-extended-resource-pod" in pods) is (extended and host.endswith("-dra"))


def test_dra_parts_gates_and_node_selection(rendered):
    full = {(d["kind"], d["metadata"]["name"]) for _, d in _documents(rendered, "k1-34-1-dra")}
    assert {("Deployment", "dra-driver-nvidia-gpu-controller"),
            ("CustomResourceDefinition", "computedomains.resource.nvidia.com")} <= full
    plugin = _by_kind(rendered, "k1-34-1-dra", "DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin")
    pod = plugin["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["compute-domains", "gpus"]
    assert pod["nodeSelector"] == {"kube-gpu-nodes.io/nvidia-dra": "true"}
    assert pod["containers"][1]["image"] == "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
    shared = {(d["kind"], d["metadata"]["name"]): d for _, d in _documents(rendered, "k1-35-0-dra-shared")}
    assert ("Deployment", "dra-driver-nvidia-gpu-controller") not in shared
    assert not [k for k in shared if k[0] == "CustomResourceDefinition"]
    gpus = shared[("DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin")]["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in gpus] == ["gpus"]
    assert {e["name"]: e.get("value") for e in gpus[0]["env"]}["FEATURE_GATES"] == \
        "MPSSupport=true,TimeSlicingSettings=true,"
    assert gpus[0]["image"] == "mirror.local:5000/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
    role = shared[("Role", "dra-driver-nvidia-gpu-role-kubeletplugin")]
    assert {"apiGroups": ["apps"], "resources": ["deployments"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]} in role["rules"]


def test_dra_samples_cover_whole_gpus_the_mig_layouts_and_sharing(rendered):
    names = [d["metadata"]["name"] for _, d in _documents(rendered, "k1-35-0-dra-shared")
             if d["kind"] == "ResourceClaimTemplate"]
    assert names == ["dra-gpu", "dra-mig-1g-10gb", "dra-mig-2g-20gb", "dra-mig-3g-40gb", "dra-time-slicing",
                     "dra-mps"]
    plain = [d["metadata"]["name"] for _, d in _documents(rendered, "k1-35-0-dra")
             if d["kind"] == "ResourceClaimTemplate"]
    assert "dra-mps" not in plain and "dra-time-slicing" not in plain  # their driver gates are off
    mps = _by_kind(rendered, "k1-32-9-dra-shared", "ResourceClaimTemplate", "dra-mps")["spec"]["spec"]["devices"]
    assert mps["requests"] == [{"name": "mps-gpu", "deviceClassName": "gpu.nvidia.com"}]  # v1beta1's shape
    assert mps["config"][0]["opaque"]["parameters"]["sharing"]["strategy"] == "MPS"
    pod = _by_kind(rendered, "k1-32-9-dra-shared", "Pod", "dra-mps-pod")["spec"]
    assert [c["resources"]["claims"] for c in pod["containers"]] == [[{"name": "dra-mps", "request": "mps-gpu"}]] * 2
