"""kube-scheduler extender entries: the project's neutral form, and the two spellings kube-scheduler reads.

Pure Python, no Ansible imports. Errors are ``ExtenderError`` (a ``ValueError``).

Internally an extender is a dict with KubeSchedulerConfiguration key names, ``httpTimeout`` held as integer
nanoseconds. ``emit_extender`` spells it for a format (docs/versions.md A3, [PR-91625]):

- ``policy`` (Policy files, v1alpha2): ``enableHttps``, ``httpTimeout`` integer nanoseconds; kube-scheduler
  decodes these entries case-insensitively and silently ignores unknown keys (docs/versions.md "Observed").
- ``config`` (KubeSchedulerConfiguration v1beta1+): ``enableHTTPS``, ``httpTimeout`` duration string such as
  ``"30s"``; decoding is strict and case-sensitive.
"""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError


class ExtenderError(KgnError):
    """An extender entry that kube-scheduler would reject or misread."""


# neutral key -> internal (KubeSchedulerConfiguration) key, in output order
NEUTRAL_KEYS = {
    "url_prefix": "urlPrefix",
    "filter_verb": "filterVerb",
    "preempt_verb": "preemptVerb",
    "prioritize_verb": "prioritizeVerb",
    "weight": "weight",
    "bind_verb": "bindVerb",
    "enable_https": "enableHTTPS",
    "tls": "tlsConfig",
    "http_timeout": "httpTimeout",
    "node_cache_capable": "nodeCacheCapable",
    "managed_resources": "managedResources",
    "ignorable": "ignorable",
}
ORDER = list(NEUTRAL_KEYS.values())
NEUTRAL_TLS_KEYS = {
    "insecure": "insecure",
    "server_name": "serverName",
    "cert_file": "certFile",
    "key_file": "keyFile",
    "ca_file": "caFile",
}
TLS_KEYS = (*NEUTRAL_TLS_KEYS.values(), "certData", "keyData", "caData")  # *Data: base64, only seen in existing files
NEUTRAL_RESOURCE_KEYS = {"name": "name", "ignored_by_scheduler": "ignoredByScheduler"}
RESOURCE_KEYS = tuple(NEUTRAL_RESOURCE_KEYS.values())
SPELLING = {"policy": {"enableHTTPS": "enableHttps"}, "config": {}}
BOOL_KEYS = ("enableHTTPS", "nodeCacheCapable", "ignorable")
VERB_KEYS = ("filterVerb", "preemptVerb", "prioritizeVerb", "bindVerb")

# An extended resource name: <DNS subdomain>/<name>, not in the kubernetes.io domain (kube-scheduler rejects
# "gpu-mem" without a domain, docs/versions.md "Observed").
_DOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_RESOURCE_RE = re.compile(rf"^{_DOMAIN}/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
            "h": 3600 * 10**9}


def _type_name(value: object) -> str:
    return type(value).__name__


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_duration(text: str) -> int:
    """Go ``time.ParseDuration`` for non-negative values ("30s", "1m30s", "500ms") -> nanoseconds."""
    if text == "0":
        return 0
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ExtenderError(f"{text!r} is not a duration such as '30s', '1m30s' or '500ms'")
    return round(sum(float(number) * _UNIT_NS[unit] for number, unit in parts))


def format_duration(nanoseconds: int) -> str:
    """Nanoseconds -> the shortest exact duration string of one unit ("30s", "2500ms")."""
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if nanoseconds % size == 0:
            return f"{nanoseconds // size}{unit}"
    return f"{nanoseconds}ns"


def seconds_to_ns(value: object, what: str) -> int:
    if not (_is_int(value) or isinstance(value, float)) or value <= 0:
        raise ExtenderError(f"{what} must be a positive number of seconds (int or float), got {value!r}")
    return round(value * 10**9)


def same_url(first: str, second: str) -> bool:
    """Two urlPrefix values name the same extender (a trailing slash does not matter)."""
    return first.rstrip("/") == second.rstrip("/")


def _check_resource_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not _RESOURCE_RE.match(name):
        raise ExtenderError(
            f"{what} is {name!r}; a managed resource needs a domain-prefixed extended resource name such as "
            "'aliyun.com/gpu-mem' (kube-scheduler rejects names without a domain)"
        )
    domain = name.split("/", 1)[0]
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        raise ExtenderError(f"{what} is {name!r}; the kubernetes.io domain is reserved for native resources")
    return name


def _validate(extender: dict, what: str, strict_weight: bool) -> dict:
    """Check types and the rules kube-scheduler enforces on one internal-form extender."""
    url = extender.get("urlPrefix")
    if not isinstance(url, str) or not url.strip():
        raise ExtenderError(f"{what}: url_prefix (urlPrefix) is required, e.g. 'http://<ip>:32766/gpushare-scheduler'")
    if not re.match(r"^https?://", url):
        raise ExtenderError(f"{what}: url_prefix {url!r} must start with http:// or https://")
    for key in VERB_KEYS:
        if key in extender and (not isinstance(extender[key], str) or not extender[key]):
            raise ExtenderError(f"{what}: {key} must be a non-empty string (the path after urlPrefix), "
                                f"got {extender[key]!r}")
    for key in BOOL_KEYS:
        if key in extender and not isinstance(extender[key], bool):
            raise ExtenderError(f"{what}: {key} must be true or false, got {extender[key]!r}")
    if "weight" in extender:
        weight = extender["weight"]
        if not _is_int(weight) or (strict_weight and weight <= 0):
            raise ExtenderError(f"{what}: weight must be a positive integer, got {weight!r}")
    if "prioritizeVerb" in extender and not (_is_int(extender.get("weight")) and extender["weight"] > 0):
        raise ExtenderError(f"{what}: prioritize_verb is set, so weight must be a positive integer "
                            f"(got {extender.get('weight')!r}); kube-scheduler rejects a zero weight")
    if "httpTimeout" in extender and (not _is_int(extender["httpTimeout"]) or extender["httpTimeout"] < 0):
        raise ExtenderError(f"{what}: httpTimeout must not be negative, got {extender['httpTimeout']!r}")
    return extender


def _map_keys(entry: object, mapping: dict, what: str, hint: str = "") -> dict:
    if not isinstance(entry, dict):
        raise ExtenderError(f"{what} must be a mapping, got {_type_name(entry)}")
    unknown = [k for k in entry if k not in mapping]
    if unknown:
        raise ExtenderError(f"{what} has unknown key(s) {', '.join(map(repr, unknown))}; accepted: "
                            f"{', '.join(mapping)}{hint}")
    return {mapping[k]: v for k, v in entry.items()}


def extender_from_neutral(entry: object, what: str) -> dict:
    """Neutral (snake_case) extender -> validated internal form."""
    internal = _map_keys(entry, NEUTRAL_KEYS, what)
    if "tlsConfig" in internal:
        internal["tlsConfig"] = _tls(_map_keys(internal["tlsConfig"], NEUTRAL_TLS_KEYS, f"{what}.tls"), f"{what}.tls")
    if "managedResources" in internal:
        internal["managedResources"] = _resources(internal["managedResources"], NEUTRAL_RESOURCE_KEYS,
                                                  f"{what}.managed_resources")
    if "httpTimeout" in internal:
        internal["httpTimeout"] = seconds_to_ns(internal["httpTimeout"], f"{what}.http_timeout")
    for key in list(internal):
        if internal[key] is None:
            raise ExtenderError(f"{what}: {key} is null; leave the key out to use kube-scheduler's default")
    _validate(internal, what, strict_weight=True)
    return {k: internal[k] for k in ORDER if k in internal}


def _tls(tls: dict, what: str) -> dict:
    for key, value in tls.items():
        if key == "insecure":
            if not isinstance(value, bool):
                raise ExtenderError(f"{what}: insecure must be true or false, got {value!r}")
        elif not isinstance(value, str) or not value:
            raise ExtenderError(f"{what}: {key} must be a non-empty string, got {value!r}")
    return tls


def _resources(resources: object, mapping: dict, what: str) -> "list[dict]":
    if not isinstance(resources, list):
        raise ExtenderError(f"{what} must be a list of {{name, ignored_by_scheduler}}, got {_type_name(resources)}")
    out = []
    for index, resource in enumerate(resources):
        item = _map_keys(resource, mapping, f"{what}[{index}]")
        if "name" not in item:
            raise ExtenderError(f"{what}[{index}] has no name")
        _check_resource_name(item["name"], f"{what}[{index}].name")
        if "ignoredByScheduler" in item and not isinstance(item["ignoredByScheduler"], bool):
            raise ExtenderError(f"{what}[{index}].ignored_by_scheduler must be true or false")
        out.append({k: item[k] for k in RESOURCE_KEYS if k in item})
    return out


def _case_insensitive(entry: object, keys: tuple, what: str) -> dict:
    """Policy decoding: keys match case-insensitively; map them to their canonical spelling."""
    by_lower = {k.lower(): k for k in keys}
    if not isinstance(entry, dict):
        raise ExtenderError(f"{what} must be a mapping, got {_type_name(entry)}")
    out: dict = {}
    for key, value in entry.items():
        canonical = by_lower.get(str(key).lower())
        if canonical is None:
            raise ExtenderError(
                f"{what} has the unknown key {key!r} (kube-scheduler silently ignores it in a Policy, so it has never "
                f"taken effect); fix or remove it. Accepted: {', '.join(keys)}"
            )
        if canonical in out:
            raise ExtenderError(f"{what} sets {canonical!r} twice (keys differing only in case)")
        out[canonical] = value
    return out


def read_existing_extender(entry: object, spelling: str, what: str) -> dict:
    """An extender of an existing config (spelling 'policy' or 'config') -> validated internal form."""
    if spelling == "policy":
        policy_keys = tuple(SPELLING["policy"].get(k, k) for k in ORDER)
        raw = _case_insensitive(entry, policy_keys, what)
        internal = {("enableHTTPS" if k == "enableHttps" else k): v for k, v in raw.items()}
        if "tlsConfig" in internal:
            internal["tlsConfig"] = _case_insensitive(internal["tlsConfig"], TLS_KEYS, f"{what}.tlsConfig")
        if "managedResources" in internal:
            if not isinstance(internal["managedResources"], list):
                raise ExtenderError(f"{what}.managedResources must be a list")
            internal["managedResources"] = [
                _case_insensitive(r, RESOURCE_KEYS, f"{what}.managedResources[{i}]")
                for i, r in enumerate(internal["managedResources"])
            ]
        timeout = internal.get("httpTimeout")
        if timeout is not None and not _is_int(timeout):
            raise ExtenderError(f"{what}.httpTimeout must be integer nanoseconds in a Policy, got {timeout!r}")
    else:
        hint = " (the KubeSchedulerConfiguration spelling is enableHTTPS)" if "enableHttps" in (entry or {}) else ""
        internal = _map_keys(entry, {k: k for k in ORDER}, what, hint)
        if "tlsConfig" in internal:
            internal["tlsConfig"] = _map_keys(internal["tlsConfig"], {k: k for k in TLS_KEYS}, f"{what}.tlsConfig")
        if "managedResources" in internal:
            if not isinstance(internal["managedResources"], list):
                raise ExtenderError(f"{what}.managedResources must be a list")
            internal["managedResources"] = [
                _map_keys(r, {k: k for k in RESOURCE_KEYS}, f"{what}.managedResources[{i}]")
                for i, r in enumerate(internal["managedResources"])
            ]
        timeout = internal.get("httpTimeout")
        if timeout is not None:
            if not isinstance(timeout, str):
                raise ExtenderError(f"{what}.httpTimeout must be a duration string such as '30s', got {timeout!r}")
            try:
                internal["httpTimeout"] = parse_duration(timeout)
            except ExtenderError as err:
                raise ExtenderError(f"{what}.httpTimeout: {err}") from None
    internal = {k: v for k, v in internal.items() if v is not None}
    if "tlsConfig" in internal:
        _tls(internal["tlsConfig"], f"{what}.tlsConfig")
    for index, resource in enumerate(internal.get("managedResources", [])):
        if "name" not in resource:
            raise ExtenderError(f"{what}.managedResources[{index}] has no name")
        _check_resource_name(resource["name"], f"{what}.managedResources[{index}].name")
    _validate(internal, what, strict_weight=False)
    return {k: internal[k] for k in ORDER if k in internal}


def check_single_binder(extenders: "list[dict]") -> None:
    """kube-scheduler allows only one extender with a bindVerb."""
    binders = [e["urlPrefix"] for e in extenders if e.get("bindVerb")]
    if len(binders) > 1:
        raise ExtenderError(f"only one extender may bind pods (bind_verb), but {len(binders)} do: "
                            f"{', '.join(binders)}; drop bind_verb from all but one")


def emit_extender(extender: dict, spelling: str) -> dict:
    """Internal form -> the keys and value types of a format ('policy' or 'config')."""
    out: dict = {}
    for key in ORDER:
        if key not in extender:
            continue
        value = extender[key]
        if key == "httpTimeout" and spelling == "config":
            value = format_duration(value)
        elif isinstance(value, dict):
            value = dict(value)
        elif isinstance(value, list):
            value = [dict(v) for v in value]
        out[SPELLING[spelling].get(key, key)] = value
    return out
