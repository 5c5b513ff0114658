"""Kubernetes objects checked offline against the OpenAPI schema of their own Kubernetes version, strictly.

kubernetes-validate (requirements.txt, 1.37.x) ships the strict schemas of 1.25-1.37; the strict schema folders of
kubernetes-validate 1.24.1 (1.11-1.24) are taken from its sdist, downloaded from PyPI once and cached under
.cache/. Strict: an unknown field is an error. A kind/apiVersion without a schema for the version is an error too
(kubernetes-validate itself only warns and exits 0), and so is an apiVersion the version no longer serves, which
some old OpenAPI documents still describe (1.16 still lists extensions/v1beta1 DaemonSets).

Shared by the render tests (tests/ is on their import path through tests/conftest.py).
"""

from __future__ import annotations

import fcntl
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.manifests import manifest_removed_apis
from referencing import Registry
from referencing.jsonschema import DRAFT7

TOP = Path(__file__).resolve().parents[1]
NEWEST = kubernetes_validate.utils.latest_version()  # e.g. "1.37.0"
OLD_VALIDATE = "1.24.1"
CACHE = TOP / ".cache" / f"kubernetes-validate-{OLD_VALIDATE}"
# Not Kubernetes API objects: the kube-scheduler's own config (checked by tests/kube_scheduler_schemas.py).
NOT_API_OBJECTS = ("kubescheduler.config.k8s.io/",)


def old_schemas() -> Path:
    """Schema folders of kubernetes-validate 1.24.1 (covers 1.11-1.24), fetched from PyPI once."""
    marker = CACHE / "schemas" / "v1.24.0-local-strict" / "_definitions.json"
    if marker.exists():
        return CACHE / "schemas"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:  # pytest-xdist workers: one fetches, the others wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _fetch_old_schemas(marker)
    return CACHE / "schemas"


def _fetch_old_schemas(marker: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary=:all:",
                    f"kubernetes-validate=={OLD_VALIDATE}", "-d", str(CACHE)], check=True, timeout=600)
    sdist = CACHE / f"kubernetes-validate-{OLD_VALIDATE}.tar.gz"
    wanted = re.compile(r"/kubernetes-json-schema/(v1\.(1[6-9]|2[0-4])\.0-local-strict/[^/]+\.json)$")
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            match = wanted.search(member.name)
            if match and member.isfile():
                dest = CACHE / "schemas" / match[1]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(tar.extractfile(member).read())
    assert marker.exists(), f"kubernetes-validate {OLD_VALIDATE} sdist has no strict 1.24 schemas"


def validate_old(doc: dict, version: str) -> None:
    """kubernetes-validate's own algorithm over the 1.24.1 schema folders (strict)."""
    minor = int(version.split(".")[1])
    folder = old_schemas() / f"v1.{minor}.0-local-strict"
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", doc["apiVersion"])
    path = folder / f"{doc['kind'].lower()}-{api}.json"
    if not path.exists():
        raise AssertionError(f"Couldn't find schema for kind {doc['kind']} with api version {doc['apiVersion']} "
                             f"for kubernetes version 1.{minor}")
    # The 1.24.1 schemas are draft-4 style with relative "_definitions.json#/definitions/..." refs, as
    # kubernetes-validate 1.24 resolved them against the file's own URI.
    base = folder.resolve().as_uri() + "/"
    schema = json.loads(path.read_text())
    definitions = json.loads((folder / "_definitions.json").read_text())
    definitions.pop("$schema", None)
    schema = {"$ref": base + schema["$ref"]}  # draft 7: $ref ignores siblings, so make it absolute
    registry = Registry().with_resource(base + "_definitions.json", DRAFT7.create_resource(definitions))
    jsonschema.Draft7Validator(schema, registry=registry).validate(doc)


def validate(doc: dict, version: str) -> None:
    """Strict schema validation; any failure (a missing schema and a removed apiVersion included) raises
    AssertionError."""
    if f"{doc.get('apiVersion')}/{doc.get('kind')}" in manifest_removed_apis(version):
        raise AssertionError(f"{doc['apiVersion']} {doc['kind']} is no longer served by Kubernetes {version}")
    try:
        if int(version.split(".")[1]) <= 24:
            validate_old(doc, version)
        else:
            kubernetes_validate.validate(doc, version, strict=True)
    except (jsonschema.ValidationError, kubernetes_validate.utils.SchemaNotFoundError) as err:
        raise AssertionError(getattr(err, "message", "") or str(err)) from err


def api_objects(folder: Path) -> list[tuple[Path, dict]]:
    """Every Kubernetes object in the YAML files under ``folder`` (a render's host folder): documents with
    apiVersion, kind and metadata, but the kube-scheduler's own config."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if (isinstance(doc, dict) and {"apiVersion", "kind", "metadata"} <= set(doc)
                    and not str(doc["apiVersion"]).startswith(NOT_API_OBJECTS)):
                found.append((path, doc))
    return found


def crd_schemas(docs: list[tuple[Path, dict]]) -> dict:
    """(apiVersion, kind) -> openAPIV3Schema of the CustomResourceDefinitions among ``docs``."""
    return {(f"{d['spec']['group']}/{v['name']}", d["spec"]["names"]["kind"]): v["schema"]["openAPIV3Schema"]
            for _, d in docs if d["kind"] == "CustomResourceDefinition" for v in d["spec"]["versions"]}


def check_objects(docs: list[tuple[Path, dict]], version: str, root: Path, custom: dict | None = None) -> int:
    """Validate every object for Kubernetes ``version`` (custom resources against ``custom``, the CRDs' schemas);
    AssertionError naming the file, kind and name of the first invalid one. Returns how many were checked."""
    custom = {**crd_schemas(docs), **(custom or {})}
    for path, doc in docs:
        where = f"{path.relative_to(root)} {doc.get('kind')} {(doc.get('metadata') or {}).get('name')}"
        try:
            if (doc["apiVersion"], doc["kind"]) in custom:
                jsonschema.Draft202012Validator(custom[(doc["apiVersion"], doc["kind"])]).validate(doc)
            else:
                validate(doc, version)
        except (AssertionError, jsonschema.ValidationError) as err:
            raise AssertionError(f"{where} is not valid for Kubernetes {version}: "
                                 f"{getattr(err, 'message', '') or err}") from err
    return len(docs)


def render_version(host_dir: Path) -> str:
    """The Kubernetes version a render planned a host for (its stacks or kube-scheduler plan), or ""."""
    for name, key in (("stacks.json", "kubernetes_version"), ("kube_scheduler.json", "version")):
        plan = host_dir / "_plan" / name
        if plan.is_file():
            version = json.loads(plan.read_text()).get(key)
            if version:
                return str(version)
    return ""


def check_render(out: Path) -> dict:
    """Every Kubernetes object of every host of a render (``out``: render_dir), valid for the host's Kubernetes
    version; returns ``{host: objects checked}``. A host with objects but no planned version is a failure."""
    checked = {}
    for host_dir in sorted(p for p in out.iterdir() if p.is_dir()):
        docs = api_objects(host_dir)
        if docs:
            version = render_version(host_dir)
            assert version, f"{host_dir.name}: Kubernetes objects rendered but no Kubernetes version planned"
            checked[host_dir.name] = check_objects(docs, version, out)
    return checked
