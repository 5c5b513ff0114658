"""Rendered kube-scheduler configs against strict per-apiVersion JSON Schemas (tests/schemas/kube-scheduler/).

For every Kubernetes minor 1.16-1.37 the config with one gpushare extender (the reference clusters' values) is
rendered by scheduler_config, serialized the way the role writes it (JSON for a Policy, YAML otherwise), parsed
back and validated against the schema of its apiVersion narrowed to its minor (tests/kube_scheduler_schemas.py:
fields marked x-kgn-first-minor exist from that minor). The schemas set additionalProperties false everywhere, so
unknown and mis-cased keys fail.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "tests" / "schemas" / "kube-scheduler"
REFERENCE_FILES = SCHEMAS / "reference-clusters"
G = "kubescheduler.config.k8s.io"

import ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler as kgn_scheduler  # noqa: E402
import kube_scheduler_schemas  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler import scheduler_api  # noqa: E402
from reference_extenders import gpushare  # noqa: E402

# which schema file must validate the document of each minor (docs/versions.md A2b)
SCHEMA_FOR_MINOR = {
    **{m: "policy-v1.json" for m in range(16, 19)},
    **{m: "v1beta1.json" for m in range(19, 22)},
    22: "v1beta2.json",
    23: "v1beta3.json",
    24: "v1beta3.json",
    **{m: "v1.json" for m in range(25, 38)},
}
GPUSHARE = gpushare()


@functools.cache
def validator(name: str, minor: int | None = None) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(kube_scheduler_schemas.schema(name, minor))


def schema_for(doc: dict) -> str:
    """Pick the schema from the document itself, so a wrong apiVersion cannot pass under another schema."""
    if doc.get("kind") == "Policy":
        return "policy-v1.json"
    return doc["apiVersion"].split("/", 1)[1] + ".json"


def errors(name: str, doc: dict, minor: int | None = None) -> list[str]:
    return [e.message for e in validator(name, minor).iter_errors(doc)]


def render(minor: int, **extra) -> dict:
    return kgn_scheduler.scheduler_config(f"1.{minor}.0", [{**GPUSHARE, **extra}], "/etc/kubernetes/scheduler.conf")


@pytest.mark.parametrize("minor", sorted(SCHEMA_FOR_MINOR))
def test_rendered_config_with_gpushare_is_accepted_by_its_strict_schema(minor):
    doc = render(minor, http_timeout=30)
    text = json.dumps(doc, indent=2) if doc["kind"] == "Policy" else yaml.safe_dump(doc, sort_keys=True)
    parsed = json.loads(text) if doc["kind"] == "Policy" else yaml.safe_load(text)
    assert schema_for(parsed) == SCHEMA_FOR_MINOR[minor]
    assert errors(SCHEMA_FOR_MINOR[minor], parsed, minor) == []


@pytest.mark.parametrize("minor", sorted(SCHEMA_FOR_MINOR))
def test_rendered_config_fails_under_the_other_extender_spelling(minor):
    """A Policy document under a KubeSchedulerConfiguration schema (and back) must not validate."""
    doc = render(minor)
    other = "v1.json" if doc["kind"] == "Policy" else "policy-v1.json"
    assert errors(other, doc) != []


@pytest.mark.parametrize("schema", ["v1beta1.json", "v1beta2.json", "v1beta3.json", "v1.json"])
def test_config_schemas_reject_the_policy_spelling_enable_https(schema):
    doc = render(30)
    doc["apiVersion"] = f"{G}/{schema.removesuffix('.json')}"
    assert errors(schema, doc) == []
    extender = doc["extenders"][0]
    extender["enableHttps"] = extender.pop("enableHTTPS")
    assert any("'enableHttps' was unexpected" in e for e in errors(schema, doc))


def test_policy_schema_rejects_the_config_spelling_and_duration_strings():
    doc = render(17)
    doc["extenders"][0]["enableHTTPS"] = doc["extenders"][0].pop("enableHttps")
    assert any("'enableHTTPS' was unexpected" in e for e in errors("policy-v1.json", doc))
    doc = render(17)
    doc["extenders"][0]["httpTimeout"] = "30s"
    assert errors("policy-v1.json", doc) != []


@pytest.mark.parametrize("schema", ["v1beta1.json", "v1beta2.json", "v1beta3.json", "v1.json"])
def test_config_schemas_reject_integer_timeouts(schema):
    doc = render(30)
    doc["apiVersion"] = f"{G}/{schema.removesuffix('.json')}"
    doc["extenders"][0]["httpTimeout"] = 30_000_000_000
    assert errors(schema, doc) != []


@pytest.mark.parametrize("schema", ["policy-v1.json", "v1beta1.json", "v1beta2.json", "v1beta3.json", "v1.json"])
@pytest.mark.parametrize(
    ("where", "key"),
    [
        ("top", "extraField"),
        ("top", "Extenders"),
        ("extender", "urlprefix"),
        ("extender", "filterverb"),
        ("extender", "unknownKey"),
        ("resource", "IgnoredByScheduler"),
    ],
)
def test_schemas_reject_unknown_and_miscased_keys(schema, where, key):
    doc = render(17 if schema.startswith("policy") else 30)
    if not schema.startswith("policy"):
        doc["apiVersion"] = f"{G}/{schema.removesuffix('.json')}"
    target = {"top": doc, "extender": doc["extenders"][0], "resource": doc["extenders"][0]["managedResources"][0]}[
        where
    ]
    target[key] = True
    assert any(f"'{key}' was unexpected" in e for e in errors(schema, doc))


@pytest.mark.parametrize(
    ("schema", "field", "value", "accepted"),
    [
        ("v1beta1.json", "parallelism", 16, False),  # added in v1beta2 (A4)
        ("v1beta2.json", "parallelism", 16, True),
        ("v1beta2.json", "healthzBindAddress", "", True),  # present up to v1beta2 (A4)
        ("v1beta3.json", "healthzBindAddress", "", False),
        ("v1.json", "metricsBindAddress", "", False),
        ("v1beta1.json", "disablePreemption", True, False),  # removed in v1beta1 (A4)
        ("v1beta1.json", "schedulerName", "x", False),  # moved into profiles (A4)
    ],
)
def test_schemas_encode_the_top_level_field_differences(schema, field, value, accepted):
    doc = render(30)
    doc["apiVersion"] = f"{G}/{schema.removesuffix('.json')}"
    doc[field] = value
    assert (errors(schema, doc) == []) is accepted


@pytest.mark.parametrize(("schema", "accepted"), [("v1beta2.json", False), ("v1beta3.json", True), ("v1.json", True)])
def test_multipoint_exists_from_v1beta3(schema, accepted):
    doc = render(30)
    doc["apiVersion"] = f"{G}/{schema.removesuffix('.json')}"
    doc["profiles"] = [{"schedulerName": "default-scheduler", "plugins": {"multiPoint": {"enabled": [{"name": "X"}]}}}]
    assert (errors(schema, doc) == []) is accepted


@pytest.mark.parametrize("schema", ["v1beta1.json", "v1beta3.json", "v1.json"])
def test_config_schemas_require_client_connection_kubeconfig(schema):
    doc = render(30)
    doc["apiVersion"] = f"{G}/{schema.removesuffix('.json')}"
    del doc["clientConnection"]["kubeconfig"]
    assert any("'kubeconfig' is a required property" in e for e in errors(schema, doc))


@pytest.mark.parametrize("name", ["gpu-mem", "kubernetes.io gpu", "/gpu-mem"])
def test_schemas_reject_managed_resources_without_a_domain(name):
    for minor in (17, 30):
        doc = render(minor)
        doc["extenders"][0]["managedResources"][0]["name"] = name
        assert errors(schema_for(doc), doc) != []


# --- the reference clusters' own files, verbatim ------------------------------------------------------------
def test_schemas_accept_the_kubeasz_reference_file_verbatim():
    doc = yaml.safe_load((REFERENCE_FILES / "kubeasz-1.23-scheduler-policy-config.yaml").read_text())
    assert errors("v1beta2.json", doc) == []


def test_schemas_accept_the_policy_reference_file_verbatim():
    doc = json.loads((REFERENCE_FILES / "design-policy-scheduler-policy-config.json").read_text())
    assert errors("policy-v1.json", doc) == []


def test_reference_files_converted_by_the_filter_stay_valid():
    kubeasz = yaml.safe_load((REFERENCE_FILES / "kubeasz-1.23-scheduler-policy-config.yaml").read_text())
    policy = json.loads((REFERENCE_FILES / "design-policy-scheduler-policy-config.json").read_text())
    doc = kgn_scheduler.scheduler_config("1.23.1", [GPUSHARE], None, copy.deepcopy(kubeasz))
    assert errors("v1beta3.json", doc) == []
    for minor in (19, 22, 25, 35):
        doc = kgn_scheduler.scheduler_config(
            f"1.{minor}", [], "/etc/kubernetes/scheduler.conf", copy.deepcopy(policy)
        )
        assert errors(SCHEMA_FOR_MINOR[minor], doc) == []



# --- fields that exist from a later minor than their apiVersion -------------------------------------------------
# point or field -> (schema, where, first minor): what config/<apiVersion>/types.go of the kubernetes-1.X.0 tags has
# (docs/versions.md A4); written out here, and checked against both the schemas' marks and scheduler_api's tables.
LATER_FIELDS = {
    ("v1", "point", "preEnqueue"): 26,
    ("v1beta3", "point", "preEnqueue"): 26,
    ("v1", "point", "placementGenerate"): 36,
    ("v1", "point", "placementScore"): 36,
    ("v1", "point", "podGroupPostFilter"): 37,
    ("v1", "top", "delayCacheUntilActive"): 28,
    ("v1", "profile", "percentageOfNodesToScore"): 26,
}


def _with(schema: str, where: str, field: str, minor: int) -> dict:
    doc = render(minor)
    doc["apiVersion"] = f"{G}/{schema}"
    if where == "top":
        doc[field] = True
    elif where == "profile":
        doc["profiles"] = [{"schedulerName": "default-scheduler", field: 50}]
    else:
        doc["profiles"] = [{"schedulerName": "default-scheduler", "plugins": {field: {"enabled": [{"name": "X"}]}}}]
    return doc


@pytest.mark.parametrize(("key", "first"), sorted(LATER_FIELDS.items()))
def test_a_later_field_is_accepted_from_its_minor_and_refused_before(key, first):
    schema, where, field = key
    assert errors(f"{schema}.json", _with(schema, where, field, first), first) == []
    assert any(f"'{field}' was unexpected" in e for e in errors(f"{schema}.json", _with(schema, where, field, first),
                                                                first - 1))


def test_the_schemas_marks_and_the_code_tables_agree():
    marked = {}
    for schema in ("v1", "v1beta3"):
        data = kube_scheduler_schemas.schema(schema)
        for where, properties in (("top", data["properties"]), ("point", data["$defs"]["plugins"]["properties"]),
                                  ("profile", data["$defs"]["profile"]["properties"])):
            marked.update({(schema, where, k): v[kube_scheduler_schemas.FIRST_MINOR] for k, v in properties.items()
                           if kube_scheduler_schemas.FIRST_MINOR in v})
    assert marked == LATER_FIELDS
    code = {(api, "point", point): first for point, (apis, first) in scheduler_api.POINTS_ADDED.items() for api in apis}
    code.update({("v1", "top", k): v for k, v in scheduler_api.V1_ADDED.items()})
    code[("v1", "profile", "percentageOfNodesToScore")] = scheduler_api.PROFILE_PERCENTAGE_FIRST_MINOR
    assert code == LATER_FIELDS
