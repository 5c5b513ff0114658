"""Unit tests of filter_plugins/kgn_scheduler.py against docs/versions.md section A."""

from __future__ import annotations

import copy
import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.filter.scheduler import FilterModule
from reference_extenders import gpushare

FILTERS = FilterModule().filters()
variant = FILTERS["scheduler_variant"]
config = FILTERS["scheduler_config"]

G = "kubescheduler.config.k8s.io"
POLICY_FLAGS = [
    "--policy-config-file",
    "--policy-configmap",
    "--policy-configmap-namespace",
    "--use-legacy-policy-config",
]

# minor -> (generated apiVersion, accepted KubeSchedulerConfiguration versions), written out by hand from
# docs/versions.md A2b and the "Observed" table (not computed from the filter's own tables).
EXPECTED = {
    16: ("v1", ["v1alpha1"]),
    17: ("v1", ["v1alpha1"]),
    18: ("v1", ["v1alpha1", "v1alpha2"]),
    19: ("v1beta1", ["v1beta1"]),
    20: ("v1beta1", ["v1beta1"]),
    21: ("v1beta1", ["v1beta1"]),
    22: ("v1beta2", ["v1beta1", "v1beta2"]),
    23: ("v1beta3", ["v1beta2", "v1beta3"]),
    24: ("v1beta3", ["v1beta2", "v1beta3"]),
    25: ("v1", ["v1beta2", "v1beta3", "v1"]),
    26: ("v1", ["v1beta2", "v1beta3", "v1"]),
    27: ("v1", ["v1beta2", "v1beta3", "v1"]),
    28: ("v1", ["v1beta3", "v1"]),
    **{m: ("v1", ["v1"]) for m in range(29, 38)},  # to 1.37 [KS-1.37]
}

# The kubeasz reference cluster (docs/field-notes.md): Kubernetes 1.23.1, a v1beta2 file.
KUBEASZ_REFERENCE = {
    "apiVersion": f"{G}/v1beta2",
    "kind": "KubeSchedulerConfiguration",
    "clientConnection": {"kubeconfig": "/etc/kubernetes/kube-scheduler.kubeconfig"},
    "extenders": [
        {
            "urlPrefix": "http://192.168.233.101:32766/gpushare-scheduler",
            "filterVerb": "filter",
            "bindVerb": "bind",
            "enableHTTPS": False,
            "nodeCacheCapable": True,
            "managedResources": [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": False}],
            "ignorable": False,
        }
    ],
}
# The Policy file of the gpushare design reference cluster (docs/field-notes.md), verbatim.
POLICY_REFERENCE = json.loads("""{
"kind": "Policy", "apiVersion": "v1",
"extenders": [{"urlPrefix": "http://127.0.0.1:32766/gpushare-scheduler", "filterVerb": "filter",
  "bindVerb": "bind", "enableHttps": false, "nodeCacheCapable": true,
  "managedResources": [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": false}], "ignorable": false}]}""")


def nano(url="http://10.0.0.5:39999/scheduler"):
    return {
        "url_prefix": url,
        "filter_verb": "filter",
        "prioritize_verb": "priorities",
        "weight": 1,
        "managed_resources": [{"name": "tencent.com/vcuda-core", "ignored_by_scheduler": True}],
    }


# --- scheduler_variant -----------------------------------------------------------------------------------
@pytest.mark.parametrize("minor", sorted(EXPECTED))
def test_variant_for_every_supported_minor(minor):
    api, accepted = EXPECTED[minor]
    result = variant(f"1.{minor}.3")
    policy = minor <= 18
    assert result["kubernetes_minor"] == f"1.{minor}"
    assert result["format"] == ("policy" if policy else "kube_scheduler_configuration")
    assert result["kind"] == ("Policy" if policy else "KubeSchedulerConfiguration")
    assert result["api_version"] == (api if policy else f"{G}/{api}")
    assert result["flag"] == ("--policy-config-file" if policy else "--config")
    assert result["path"] == "/etc/kubernetes/scheduler-policy-config." + ("json" if policy else "yaml")
    assert result["accepted_api_versions"] == [f"{G}/{v}" for v in accepted]
    assert result["policy_file_accepted"] is (minor <= 22)
    assert result["health"] == {"scheme": "https", "port": 10259, "path": "/healthz"}
    # the generated apiVersion is always one the scheduler of that minor decodes
    assert policy or result["api_version"] in result["accepted_api_versions"]


@pytest.mark.parametrize("minor", sorted(EXPECTED))
def test_variant_lists_flags_that_must_not_stay(minor):
    flags = variant(f"1.{minor}")["removed_flags"]
    assert ("--config" in flags) is (minor <= 18)
    assert all(f in flags for f in POLICY_FLAGS) is (minor >= 19)
    assert ("--port" in flags and "--address" in flags) is (minor >= 24)
    assert set(variant(f"1.{minor}")["removed_flag_reasons"]) == set(flags)


def test_variant_1_22_refuses_the_policy_flag_next_to_v1beta2():
    result = variant("1.22.3")
    assert result["api_version"] == f"{G}/v1beta2"
    assert "--policy-config-file" in result["removed_flags"]
    assert "ISS-105202" in result["removed_flag_reasons"]["--policy-config-file"]


@pytest.mark.parametrize("given", ["v1.23.1", "1.23.1-eks-abc", "1.23", "1.23.17+k3s1"])
def test_variant_accepts_every_version_form(given):
    assert variant(given)["api_version"] == f"{G}/v1beta3"


def test_variant_returns_plain_types_only():
    def walk(value):
        if isinstance(value, dict):
            return all(type(k) is str and walk(v) for k, v in value.items())
        if isinstance(value, list):
            return all(walk(v) for v in value)
        return type(value) in (str, int, bool)

    assert all(walk(variant(f"1.{m}")) for m in EXPECTED)


@pytest.mark.parametrize("given", ["1.15.12", "1.12", "2.0", "0.9"])
def test_variant_outside_supported_range_names_the_range(given):
    with pytest.raises(AnsibleFilterError, match=r"outside the supported range 1\.16-1\.37"):
        variant(given)


@pytest.mark.parametrize("given", ["1.38.0", "v1.38.2", "1.40"])
def test_a_newer_minor_is_refused_naming_the_newest_known_and_the_choices(given):
    with pytest.raises(AnsibleFilterError) as err:
        variant(given)
    message = " ".join(str(err.value).split())
    assert "is newer than 1.37, the newest release this version of kube-gpu-nodes knows" in message
    assert "update kube-gpu-nodes" in message and "set kubernetes_version_allow_newer: true" in message
    assert "run it with the 1.37 variant" in message


@pytest.mark.parametrize("given", ["1.38.0", "1.41.2"])
def test_the_opt_in_runs_a_newer_minor_with_the_newest_known_variant_and_says_so(given):
    result = variant(given, True)
    newest = variant("1.37.0")
    assert result["newer_than_known"] is True and newest["newer_than_known"] is False
    assert result["kubernetes_minor"] == f"1.{given.split('.')[1]}" and result["variant_minor"] == "1.37"
    assert {k: v for k, v in result.items() if k not in ("kubernetes_minor", "newer_than_known", "note")} == {
        k: v for k, v in newest.items() if k not in ("kubernetes_minor", "newer_than_known", "note")}
    assert "newer than 1.37" in result["note"] and "kubernetes_version_allow_newer" in result["note"]
    assert config(given, [gpushare()], "/k", None, False, None, True) == config("1.37.0", [gpushare()], "/k")


def test_the_opt_in_changes_nothing_for_a_known_minor_and_must_be_a_boolean():
    assert variant("1.30.1", True) == variant("1.30.1")
    assert variant("1.30.1")["note"] == "" and variant("1.30.1")["variant_minor"] == "1.30"
    with pytest.raises(AnsibleFilterError, match=r"allow_newer .* must be true or false"):
        variant("1.38.0", "yes")
    with pytest.raises(AnsibleFilterError, match="outside the supported range"):
        variant("1.15.0", True)  # older releases stay refused


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("latest", "'latest' is not a version"),
        ("1.x", "'1.x' is not a version"),
        ("", "is empty"),
        (None, "is not set"),
        (1.2, "quote it in YAML"),
    ],
)
def test_variant_bad_versions_fail_with_the_parse_message(given, message):
    with pytest.raises(AnsibleFilterError) as err:
        variant(given)
    assert message in str(err.value)
    assert str(err.value).startswith("scheduler_variant: the Kubernetes version")


# --- scheduler_config: one extender, every minor ---------------------------------------------------------
@pytest.mark.parametrize("minor", sorted(EXPECTED))
def test_config_spells_the_extender_for_the_format(minor):
    doc = config(f"1.{minor}.0", [gpushare(http_timeout=30)], "/etc/kubernetes/scheduler.conf")
    extender = doc["extenders"][0]
    if minor <= 18:
        assert (doc["kind"], doc["apiVersion"]) == ("Policy", "v1")
        assert extender["enableHttps"] is False and "enableHTTPS" not in extender
        assert extender["httpTimeout"] == 30_000_000_000 and type(extender["httpTimeout"]) is int
        assert "clientConnection" not in doc
        assert "predicates" not in doc and "priorities" not in doc
    else:
        assert doc["kind"] == "KubeSchedulerConfiguration"
        assert doc["apiVersion"] == f"{G}/{EXPECTED[minor][0]}"
        assert extender["enableHTTPS"] is False and "enableHttps" not in extender
        assert extender["httpTimeout"] == "30s"
        assert doc["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    assert extender["managedResources"] == [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": False}]
    assert (extender["nodeCacheCapable"], extender["ignorable"]) == (True, False)


def test_config_leaves_out_unset_optional_keys():
    doc = config("1.25", [{"url_prefix": "http://10.0.0.1:80/x", "filter_verb": "filter"}], "/k")
    assert doc["extenders"] == [{"urlPrefix": "http://10.0.0.1:80/x", "filterVerb": "filter"}]


def test_config_writes_tls_and_all_verbs():
    ext = {
        "url_prefix": "https://ext:8443/x",
        "filter_verb": "f",
        "prioritize_verb": "p",
        "weight": 5,
        "preempt_verb": "pre",
        "bind_verb": "b",
        "enable_https": True,
        "http_timeout": 0.25,
        "tls": {"insecure": False, "server_name": "ext", "cert_file": "/c", "key_file": "/k", "ca_file": "/ca"},
    }
    doc = config("1.30", [ext], "/k")
    out = doc["extenders"][0]
    assert out["tlsConfig"] == {
        "insecure": False,
        "serverName": "ext",
        "certFile": "/c",
        "keyFile": "/k",
        "caFile": "/ca",
    }
    assert (out["prioritizeVerb"], out["weight"], out["preemptVerb"], out["httpTimeout"]) == ("p", 5, "pre", "250ms")
    assert config("1.17", [ext], None)["extenders"][0]["httpTimeout"] == 250_000_000


def test_config_merges_several_extenders_in_order():
    doc = config("1.28", [gpushare(), nano()], "/k")
    assert [e["urlPrefix"] for e in doc["extenders"]] == [gpushare()["url_prefix"], nano()["url_prefix"]]


def test_config_without_extenders_has_no_extenders_key():
    assert config("1.29", [], "/k") == {
        "apiVersion": f"{G}/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/k"},
    }


# --- the reference clusters ---------------------------------------------------------------------------------
def test_kubeasz_reference_1_23_comes_out_as_v1beta3_with_the_same_settings():
    doc = config("1.23.1", [gpushare()], "/etc/kubernetes/kube-scheduler.kubeconfig", copy.deepcopy(KUBEASZ_REFERENCE))
    assert doc == {**KUBEASZ_REFERENCE, "apiVersion": f"{G}/v1beta3"}


def test_kubeasz_reference_without_new_extenders_keeps_its_extender():
    doc = config("1.23.1", [], "/etc/kubernetes/kube-scheduler.kubeconfig", copy.deepcopy(KUBEASZ_REFERENCE))
    assert doc["extenders"] == KUBEASZ_REFERENCE["extenders"]


def test_policy_reference_is_reproduced_exactly_for_a_policy_minor():
    doc = config("1.17.4", [gpushare(url="http://127.0.0.1:32766/gpushare-scheduler")], None)
    assert doc == POLICY_REFERENCE
    assert config("1.18", [], None, copy.deepcopy(POLICY_REFERENCE)) == POLICY_REFERENCE


def test_policy_reference_on_1_25_becomes_v1_with_the_extender_respelled():
    doc = config("1.25.0", [], "/etc/kubernetes/scheduler.conf", copy.deepcopy(POLICY_REFERENCE))
    assert doc["apiVersion"] == f"{G}/v1"
    (extender,) = doc["extenders"]
    assert extender["enableHTTPS"] is False and "enableHttps" not in extender
    assert extender["urlPrefix"] == "http://127.0.0.1:32766/gpushare-scheduler"


def test_policy_extender_keys_are_read_case_insensitively_like_kube_scheduler():
    existing = {
        "kind": "Policy",
        "apiVersion": "v1",
        "extenders": [
            {"URLPrefix": "http://a:1/x", "FilterVerb": "filter", "EnableHTTPS": True, "HTTPTimeout": 3_000_000_000}
        ],
    }
    doc = config("1.16", [], None, existing)
    assert doc["extenders"] == [
        {"urlPrefix": "http://a:1/x", "filterVerb": "filter", "enableHttps": True, "httpTimeout": 3_000_000_000}
    ]
    assert config("1.21", [], "/k", existing)["extenders"][0]["httpTimeout"] == "3s"


# --- merging with an existing config ---------------------------------------------------------------------
def test_existing_profiles_settings_and_other_extenders_are_kept_and_same_url_replaced():
    existing = {
        "apiVersion": f"{G}/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/old", "qps": 50},
        "leaderElection": {"leaderElect": True},
        "parallelism": 8,
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
            }
        ],
        "extenders": [
            {"urlPrefix": "http://other:1/x", "filterVerb": "filter", "httpTimeout": "1m30s"},
            {"urlPrefix": "http://192.168.233.101:32766/gpushare-scheduler/", "filterVerb": "old"},
        ],
    }
    doc = config("1.30", [gpushare()], "/etc/kubernetes/scheduler.conf", copy.deepcopy(existing))
    assert doc["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 50}
    assert doc["leaderElection"] == existing["leaderElection"]
    assert doc["parallelism"] == 8
    assert doc["profiles"] == existing["profiles"]
    assert [e["urlPrefix"] for e in doc["extenders"]] == ["http://other:1/x", gpushare()["url_prefix"]]
    assert doc["extenders"][0]["httpTimeout"] == "90s"
    assert doc["extenders"][1]["filterVerb"] == "filter"


def test_rerun_on_own_output_is_stable():
    first = config("1.27", [gpushare(), nano()], "/k")
    assert config("1.27", [gpushare(), nano()], "/k", copy.deepcopy(first)) == first
    policy = config("1.16", [gpushare(), nano()], None)
    assert config("1.16", [gpushare(), nano()], None, copy.deepcopy(policy)) == policy


def test_existing_kubeconfig_is_used_when_none_given():
    doc = config("1.23", [], None, copy.deepcopy(KUBEASZ_REFERENCE))
    assert doc["clientConnection"]["kubeconfig"] == "/etc/kubernetes/kube-scheduler.kubeconfig"


def test_existing_policy_keeps_its_own_predicates():
    existing = {"kind": "Policy", "apiVersion": "v1", "predicates": [{"name": "PodFitsResources"}]}
    assert config("1.17", [gpushare()], None, existing)["predicates"] == [{"name": "PodFitsResources"}]


def test_v1beta2_serving_addresses_are_dropped_when_upgrading():
    existing = {**copy.deepcopy(KUBEASZ_REFERENCE), "healthzBindAddress": "", "metricsBindAddress": "0.0.0.0:10251"}
    doc = config("1.24", [], "/k", existing)
    assert "healthzBindAddress" not in doc and "metricsBindAddress" not in doc
    kept = config("1.22", [], "/k", {**copy.deepcopy(KUBEASZ_REFERENCE), "metricsBindAddress": "0.0.0.0:10251"})
    assert kept["metricsBindAddress"] == "0.0.0.0:10251"


def test_null_fields_of_an_existing_config_count_as_absent():
    existing = {**copy.deepcopy(KUBEASZ_REFERENCE), "profiles": None, "extenders": None, "parallelism": None}
    assert config("1.23", [], "/k", existing) == {
        "apiVersion": f"{G}/v1beta3",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/k"},
    }


def test_plugin_args_apiversion_follows_the_target():
    existing = {
        "apiVersion": f"{G}/v1beta2",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/k"},
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {"apiVersion": f"{G}/v1beta2", "kind": "NodeResourcesFitArgs"}}
                ],
            }
        ],
    }
    doc = config("1.25", [], None, existing)
    assert doc["profiles"][0]["pluginConfig"][0]["args"]["apiVersion"] == f"{G}/v1"


# --- what cannot be converted fails clearly ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "existing", "message"),
    [
        ("1.17", copy.deepcopy(KUBEASZ_REFERENCE), "takes extenders from a Policy file"),
        ("1.25", {**POLICY_REFERENCE, "predicates": [{"name": "PodFitsResources"}]}, "sets 'predicates', which has no"),
        ("1.17", {**POLICY_REFERENCE, "priorities": []}, "disables every default priority"),
        (
            "1.17",
            {**POLICY_REFERENCE, "extenders": [{"urlPrefix": "http://a:1/x", "filterverbb": "f"}]},
            "unknown key 'filterverbb'",
        ),
        ("1.17", {**POLICY_REFERENCE, "bogus": 1}, "unknown top-level key 'bogus'"),
        (
            "1.25",
            {"apiVersion": f"{G}/v1beta1", "kind": "KubeSchedulerConfiguration", "disablePreemption": True},
            "DefaultPreemption",
        ),
        (
            "1.25",
            {
                "apiVersion": f"{G}/v1beta1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "NodeLabel"}]}}}],
            },
            "plugin 'NodeLabel'",
        ),
        (
            "1.30",
            {
                "apiVersion": f"{G}/v1beta3",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"plugins": {"score": {"disabled": [{"name": "SelectorSpread"}]}}}],
            },
            "plugin 'SelectorSpread'",
        ),
        (
            "1.22",
            {
                "apiVersion": f"{G}/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "X"}]}}}],
            },
            "extension point plugins.multiPoint",
        ),
        (
            "1.25",
            {
                "apiVersion": f"{G}/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"percentageOfNodesToScore": 20}],
            },
            "sets 'percentageOfNodesToScore'",
        ),
        ("1.23", {"apiVersion": f"{G}/v1alpha1", "kind": "KubeSchedulerConfiguration"}, "pass that Policy document"),
        ("1.23", {"apiVersion": f"{G}/v9", "kind": "KubeSchedulerConfiguration"}, "apiVersion 'kubescheduler"),
        ("1.23", {"kind": "Deployment", "apiVersion": "apps/v1"}, "kind 'Deployment'"),
        ("1.23", "apiVersion: x", "existing must be the parsed current config"),
        ("1.23", {**copy.deepcopy(KUBEASZ_REFERENCE), "clientConnection": "/k"}, "clientConnection is a str"),
        (
            "1.23",
            {**copy.deepcopy(KUBEASZ_REFERENCE), "extenders": [{"urlPrefix": "http://a:1/x", "enableHttps": False}]},
            "the KubeSchedulerConfiguration spelling is enableHTTPS",
        ),
        (
            "1.23",
            {**copy.deepcopy(KUBEASZ_REFERENCE), "extenders": [{"urlPrefix": "http://a:1/x", "httpTimeout": 30}]},
            "duration string",
        ),
        (
            "1.23",
            {**copy.deepcopy(KUBEASZ_REFERENCE), "extenders": [{"urlPrefix": "http://a:1/x", "httpTimeout": "30x"}]},
            "'30x' is not a duration",
        ),
        (
            "1.23",
            {
                **copy.deepcopy(KUBEASZ_REFERENCE),
                "extenders": [{"urlPrefix": "http://a:1/x", "managedResources": [{"name": "gpu-mem"}]}],
            },
            "domain-prefixed",
        ),
    ],
)
def test_unconvertible_existing_configs_fail_clearly(version, existing, message):
    with pytest.raises(AnsibleFilterError) as err:
        config(version, [gpushare()], "/k", existing)
    assert message in str(err.value)
    assert str(err.value).startswith("scheduler_config:")


# --- bad extenders -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extenders", "message"),
    [
        ([{**gpushare(), "urlprefix": "x"}], "extenders[0] has unknown key(s) 'urlprefix'"),
        ([{**gpushare(), "enableHttps": False}], "unknown key(s) 'enableHttps'"),
        ([{"filter_verb": "filter"}], "url_prefix (urlPrefix) is required"),
        ([{"url_prefix": "192.168.0.1:32766"}], "must start with http:// or https://"),
        ([gpushare(managed_resources=[{"name": "gpu-mem"}])], "domain-prefixed extended resource name"),
        ([gpushare(managed_resources=[{"name": "kubernetes.io/gpu"}])], "kubernetes.io domain is reserved"),
        ([gpushare(managed_resources=[{"ignored_by_scheduler": True}])], "managed_resources[0] has no name"),
        ([gpushare(managed_resources=[{"name": "a.io/b", "ignoredByScheduler": True}])], "unknown key(s)"),
        ([gpushare(), gpushare(url="http://other:1/x")], "only one extender may bind pods"),
        ([{"url_prefix": "http://a:1/x", "prioritize_verb": "p"}], "weight must be a positive integer"),
        ([{"url_prefix": "http://a:1/x", "prioritize_verb": "p", "weight": 0}], "weight must be a positive integer"),
        ([{"url_prefix": "http://a:1/x", "weight": -1}], "weight must be a positive integer"),
        ([{"url_prefix": "http://a:1/x", "weight": True}], "weight must be a positive integer"),
        ([gpushare(enable_https="false")], "enableHTTPS must be true or false"),
        ([gpushare(http_timeout="30s")], "http_timeout must be a positive number of seconds"),
        ([gpushare(http_timeout=0)], "http_timeout must be a positive number of seconds"),
        ([gpushare(tls={"insecure": True, "servername": "x"})], "tls has unknown key(s) 'servername'"),
        ([gpushare(tls={"insecure": "yes"})], "insecure must be true or false"),
        ([gpushare(filter_verb="")], "filterVerb must be a non-empty string"),
        ([gpushare(ignorable=None)], "ignorable is null"),
        ([gpushare(), {**gpushare(), "bind_verb": "b2"}], "two extenders have url_prefix"),
        ("gpushare", "extenders must be a list"),
        (["gpushare"], "extenders[0] must be a mapping"),
    ],
)
def test_bad_extenders_fail_with_an_actionable_message(extenders, message):
    for version in ("1.17", "1.30"):
        with pytest.raises(AnsibleFilterError) as err:
            config(version, extenders, "/k")
        assert message in str(err.value)


def test_config_needs_a_kubeconfig_for_kube_scheduler_configuration():
    with pytest.raises(AnsibleFilterError, match="ignores the --kubeconfig flag"):
        config("1.25", [gpushare()], "")
    assert "clientConnection" not in config("1.16", [gpushare()], None)


def test_binder_in_existing_plus_new_binder_is_refused():
    existing = {**copy.deepcopy(KUBEASZ_REFERENCE)}
    existing["extenders"][0]["urlPrefix"] = "http://old:1/x"
    with pytest.raises(AnsibleFilterError, match="only one extender may bind pods"):
        config("1.23", [gpushare()], "/k", existing)


@pytest.mark.parametrize("given", ["1.15", "1.38", "latest"])
def test_config_checks_the_version_first(given):
    with pytest.raises(AnsibleFilterError, match="scheduler_variant"):
        config(given, [gpushare()], "/k")


@pytest.mark.parametrize("version", ["1.19", "1.25", "1.30"])
def test_in_cluster_config_has_no_kubeconfig_and_keeps_the_extenders(version):
    existing = {"apiVersion": "kubescheduler.config.k8s.io/v1beta1" if version == "1.19"
                else "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": True, "resourceName": "kgn-gpu-scheduler"},
                "profiles": [{"schedulerName": "kgn-gpu-scheduler"}]}
    doc = config(version, [gpushare()], "", existing, True)
    assert "clientConnection" not in doc
    assert doc["profiles"] == [{"schedulerName": "kgn-gpu-scheduler"}]
    assert doc["leaderElection"]["resourceName"] == "kgn-gpu-scheduler"
    assert [e["urlPrefix"] for e in doc["extenders"]] == [gpushare()["url_prefix"]]


def test_in_cluster_drops_only_the_kubeconfig_of_an_existing_connection():
    existing = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 50}}
    assert config("1.30", [], None, existing, True)["clientConnection"] == {"qps": 50}


@pytest.mark.parametrize(("args", "message"), [
    (("1.30", [], "/etc/kubernetes/scheduler.conf", None, True), "pass an empty kubeconfig"),
    (("1.18", [], "", None, True), "needs a KubeSchedulerConfiguration"),
    (("1.30", [], "", None, "yes"), "in_cluster must be true or false"),
])
def test_in_cluster_refuses_a_kubeconfig_a_policy_version_and_a_non_bool(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        config(*args)


@pytest.mark.parametrize(("version", "kept"), [("1.28.0", True), ("1.36.0", True), ("1.27.16", False)])
def test_delay_cache_until_active_is_carried_from_1_28_only(version, kept):
    existing = {"apiVersion": f"{G}/v1", "kind": "KubeSchedulerConfiguration", "delayCacheUntilActive": True,
                "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"}}
    if kept:
        assert config(version, [], None, existing)["delayCacheUntilActive"] is True
    else:
        with pytest.raises(AnsibleFilterError, match=r"sets 'delayCacheUntilActive', which .*1\.27\) does not have"):
            config(version, [], None, existing)


# Extension points added to v1 after 1.25 (config/v1/types.go, type Plugins, per kubernetes-1.X.0 tag).
@pytest.mark.parametrize(("point", "first"), [("preEnqueue", 26), ("placementGenerate", 36), ("placementScore", 36),
                                              ("podGroupPostFilter", 37)])
def test_an_extension_point_is_carried_from_the_minor_that_has_it(point, first):
    existing = {"apiVersion": f"{G}/v1", "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"},
                "profiles": [{"schedulerName": "default-scheduler", "plugins": {point: {"enabled": [{"name": "X"}]}}}]}
    assert config(f"1.{first}.0", [], None, existing)["profiles"][0]["plugins"] == {point: {"enabled": [{"name": "X"}]}}
    with pytest.raises(AnsibleFilterError, match=rf"extension point plugins\.{point}, which .*1\.{first - 1} "):
        config(f"1.{first - 1}.0", [], None, existing)
