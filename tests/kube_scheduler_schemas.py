"""The strict kube-scheduler config schemas of tests/schemas/kube-scheduler/, narrowed to one Kubernetes minor.

One schema per apiVersion; a property marked ``"x-kgn-first-minor": N`` exists from Kubernetes 1.N only (read in
config/<apiVersion>/types.go of each kubernetes-1.X.0 tag of the kube-scheduler staging repository, docs/versions.md
A4), so for an older minor it is dropped and ``additionalProperties: false`` refuses it. Shared by the unit and the
render tests (tests/ is on their import path through tests/conftest.py).
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import jsonschema

SCHEMAS = Path(__file__).resolve().parent / "schemas" / "kube-scheduler"
FIRST_MINOR = "x-kgn-first-minor"


def _narrowed(node: object, minor: int) -> object:
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict):
            node["properties"] = {k: v for k, v in properties.items()
                                  if not (isinstance(v, dict) and v.get(FIRST_MINOR, 0) > minor)}
        for value in node.values():
            _narrowed(value, minor)
    elif isinstance(node, list):
        for value in node:
            _narrowed(value, minor)
    return node


@functools.cache
def schema(name: str, minor: int | None = None) -> dict:
    """``name`` (e.g. ``v1`` or ``policy-v1``, with or without ``.json``) for Kubernetes 1.``minor`` (None: every
    field of the apiVersion)."""
    data = json.loads((SCHEMAS / (name if name.endswith(".json") else f"{name}.json")).read_text())
    jsonschema.Draft202012Validator.check_schema(data)
    return data if minor is None else _narrowed(copy.deepcopy(data), minor)


def schema_name(doc: dict) -> str:
    """The schema a document names itself (a wrong apiVersion cannot pass under another schema)."""
    return "policy-v1" if doc.get("kind") == "Policy" else str(doc.get("apiVersion", "")).split("/", 1)[-1]


def errors(doc: dict, minor: int | None = None, name: str | None = None, in_cluster: bool = False) -> list[str]:
    """Every schema error of ``doc`` for Kubernetes 1.``minor``. ``in_cluster``: a kube-scheduler running as a pod
    has no clientConnection (client-go uses the pod's service account); everything else stays strict."""
    data = schema(name or schema_name(doc), minor)
    if in_cluster:
        data = {**data, "required": [r for r in data.get("required", []) if r != "clientConnection"]}
    return [e.message for e in jsonschema.Draft202012Validator(data).iter_errors(doc)]
