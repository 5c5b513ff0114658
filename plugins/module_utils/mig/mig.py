"""MIG (Multi-Instance GPU): what nvidia-smi shows, what the inventory asks for, whether it fits, and the
ordered commands that get a node from one to the other.

Pure Python, standard library only, Python 3.6 grammar (it runs on the nodes inside the nvidia_mig module).
Every decision is here; the module only reads the node, calls ``mig_plan`` and runs the commands it returns.

Parsers (the text nvidia-smi prints):
  parse_lgip       ``nvidia-smi mig -lgip``   GPU instance profiles (name, id, free/total, memory)
  parse_lgipp      ``nvidia-smi mig -lgipp``  their possible placements ({starts}:size in memory slices)
  parse_lgi        ``nvidia-smi mig -lgi``    GPU instances (profile, instance id, start:size)
  parse_lci        ``nvidia-smi mig -lci``    compute instances (parent GI, profile, instance id)
  parse_query_xml  ``nvidia-smi -q -x``       per GPU: product, memory, MIG mode current/pending, MIG devices,
                                              processes (a view of gpu.parse_nvidia_smi_xml, the one parser)

Tables:
  MODELS           profiles per GPU model: name, GPU instance profile id, compute slices, memory slices,
                   allowed start slices, most instances. Sources: NVIDIA Multi-Instance GPU User Guide,
                   "Supported MIG Profiles" (A30, A100 40GB/80GB, H100 80GB/94GB, H200, B200) and
                   "Getting Started with MIG" (profile ids, placements as ``nvidia-smi mig -lgipp`` prints
                   them), https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
  named layouts    NVIDIA mig-parted ``deployments/systemd/config-default.yaml`` (repository NVIDIA/mig-parted):
                   all-disabled, all-enabled, all-<profile> (as many as fit: 7 x 1g.10gb on an 80GB GPU, 4 on
                   a 40GB one), all-<profile>.me (the one media-extension instance), all-balanced (per model).

Decisions:
  model_of         a GPU's profile table from its product name and memory
  expand_layout    the inventory's layout -> the wanted state of each GPU of the node (or a refusal)
  fit_problems     whether instances fit one GPU (compute slices, memory placement, counts), and what would
  strategy_problems  the device plugin's migStrategy against the wanted state (single: one profile everywhere)
  mig_plan         per GPU: current vs wanted, what to destroy/create, MIG mode change, possible reset,
                   the ordered commands
  mig_resources    the resource names and labels a strategy implies (k8s-device-plugin / GPU Feature Discovery)

Why the order (MIG user guide, "Enable MIG Mode" and "Destroying GPU Instances"): compute instances go
before their GPU instances; instances go before MIG mode is turned off; a MIG mode change needs a GPU with
no process on it and, when the driver could not reset the GPU itself, a GPU reset (``--gpu-reset``) before the
mode is current; only then can GPU and compute instances be created.
"""

import itertools
import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu as smi
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import nvidia
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

STRATEGIES = ("none", "single", "mixed")
NOT_MANAGED = ""
DISABLED = "all-disabled"
ENABLED = "all-enabled"
BALANCED = "all-balanced"
_PROFILE_RE = re.compile(r"^\d+g\.\d+gb(\+me)?$")


def _geometry8(names):
    """The eight-memory-slice, seven-compute-slice geometry of A100 / H100 / H200 / B200, with the memory
    size names of one product: (1g, 1g+me, 1g with two memory slices, 2g, 3g, 4g, 7g)."""
    one, one_big, two, three, four, seven = names
    return [
        # name, GI profile id, compute slices, memory slices, allowed starts, most instances
        (one, 19, 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
        (one + "+me", 20, 1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
        (one_big, 15, 1, 2, (0, 2, 4, 6), 4),
        (two, 14, 2, 2, (0, 2, 4), 3),
        (three, 9, 3, 4, (0, 4), 2),
        (four, 5, 4, 4, (0,), 1),
        (seven, 0, 7, 8, (0,), 1),
    ]


def _model(products, compute, memory, profiles, balanced):
    return {"products": products, "compute_slices": compute, "memory_slices": memory,
            "profiles": {p[0]: {"name": p[0], "id": p[1], "compute": p[2], "size": p[3], "starts": list(p[4]),
                                "max": p[5]} for p in profiles},
            "order": [p[0] for p in profiles], "balanced": balanced}


MODELS = {
    "A100-40GB": _model("A100-SXM4-40GB, A100-PCIE-40GB", 7, 8,
                        _geometry8(("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")),
                        {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
    "A100-80GB": _model("A100-SXM4-80GB, A100 80GB PCIe", 7, 8,
                        _geometry8(("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
                        {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
    "H100-80GB": _model("H100 80GB HBM3 (SXM5), H100 PCIe", 7, 8,
                        _geometry8(("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
                        {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
    "H100-94GB": _model("H100 NVL, H100 94GB", 7, 8,
                        _geometry8(("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")),
                        {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}),
    "H200-141GB": _model("H200, H200 NVL", 7, 8,
                         _geometry8(("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
                         {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
    "B200-180GB": _model("B200", 7, 8,
                         _geometry8(("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")),
                         {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}),
    # A30: four memory and four compute slices ("Supported MIG Profiles", A30-24GB).
    "A30-24GB": _model("A30", 4, 4, [
        ("1g.6gb", 14, 1, 1, (0, 1, 2, 3), 4),
        ("1g.6gb+me", 21, 1, 1, (0, 1, 2, 3), 1),
        ("2g.12gb", 5, 2, 2, (0, 2), 2),
        ("2g.12gb+me", 6, 2, 2, (0, 2), 1),
        ("4g.24gb", 0, 4, 4, (0,), 1),
    ], {"1g.6gb": 2, "2g.12gb": 1}),
}


# --- parsers ---------------------------------------------------------------------------------------------

def _rows(text):
    """The table rows of nvidia-smi's boxed output, as lists of cells split on whitespace."""
    rows = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("|") or line.startswith("|=") or not line.endswith("|"):
            continue
        cells = line[1:-1].split()
        if cells and cells[0].isdigit():
            rows.append(cells)
    return rows


def _none_found(text):
    return bool(re.search(r"No (GPU|compute) instances? (profiles )?found", text or "", re.IGNORECASE))


def parse_lgip(text):
    """``nvidia-smi mig -lgip`` -> [{gpu, name, id, free, total, memory_gib}] (the continuation rows of each
    profile, engine counts only, are skipped)."""
    found = []
    for cells in _rows(text):
        if len(cells) < 6 or cells[1] != "MIG":
            continue
        free, _, total = cells[4].partition("/")
        found.append({"gpu": int(cells[0]), "name": cells[2], "id": int(cells[3]), "free": int(free),
                      "total": int(total), "memory_gib": float(cells[5])})
    return found


_LGIPP_RE = re.compile(r"^GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,]*)\}:(\d+)")


def parse_lgipp(text):
    """``nvidia-smi mig -lgipp`` -> [{gpu, id, starts, size}]."""
    found = []
    for line in (text or "").splitlines():
        match = _LGIPP_RE.match(line.strip())
        if match:
            starts = [int(s) for s in match.group(3).split(",") if s != ""]
            found.append({"gpu": int(match.group(1)), "id": int(match.group(2)), "starts": starts,
                          "size": int(match.group(4))})
    return found


def _placement(cell):
    start, _, size = cell.partition(":")
    return int(start), int(size)


def parse_lgi(text):
    """``nvidia-smi mig -lgi`` -> [{gpu, name, profile_id, id, start, size}] ([] for "No GPU instances found")."""
    if _none_found(text):
        return []
    found = []
    for cells in _rows(text):
        if len(cells) < 6 or cells[1] != "MIG":
            continue
        start, size = _placement(cells[5])
        found.append({"gpu": int(cells[0]), "name": cells[2], "profile_id": int(cells[3]), "id": int(cells[4]),
                      "start": start, "size": size})
    return found


def parse_lci(text):
    """``nvidia-smi mig -lci`` -> [{gpu, gi, name, profile_id, id, start, size}]."""
    if _none_found(text):
        return []
    found = []
    for cells in _rows(text):
        if len(cells) < 7 or cells[2] != "MIG":
            continue
        start, size = _placement(cells[6])
        found.append({"gpu": int(cells[0]), "gi": int(cells[1]), "name": cells[3], "profile_id": int(cells[4]),
                      "id": int(cells[5]), "start": start, "size": size})
    return found


def parse_query_xml(text):
    """``nvidia-smi -q -x`` -> [{index, pci_bus_id, product_name, memory_total_mib, mig_current, mig_pending,
    mig_devices: [{index, gi, ci, memory_total_mib}], processes: [{pid, name}]}]: the MIG view of the one
    parser of that XML, gpu.parse_nvidia_smi_xml."""
    try:
        facts = smi.parse_nvidia_smi_xml(text)
    except smi.GpuParseError as err:
        raise KgnError(f"{err}; check that the driver answers") from None
    return [{"index": g["index"], "pci_bus_id": g["pci_bus_id"], "product_name": g["product_name"] or "",
             "memory_total_mib": g["memory_total_mib"], "mig_current": g["mig_mode_current"],
             "mig_pending": g["mig_mode_pending"], "mig_devices": g["mig_devices"], "processes": g["processes"]}
            for g in facts["gpus"]]


# --- the profile table of a GPU --------------------------------------------------------------------------

def model_of(product_name, memory_total_mib=None):
    """The MODELS key of a GPU (e.g. "A100-40GB"), or None when MIG is unknown for it."""
    info = nvidia.nvidia_gpu_info(str(product_name or "unknown"), strict=False) if product_name else None
    if not info or not info["mig_capable"]:
        return None
    mib = memory_total_mib or 0
    name = str(product_name)
    if info["model"] == "A100":
        return "A100-80GB" if ("80GB" in name or mib > 60000) else "A100-40GB"
    if info["model"] == "A30":
        return "A30-24GB"
    if info["model"] == "H100":
        return "H100-94GB" if ("NVL" in name or "94GB" in name or 88000 < mib < 97000) else "H100-80GB"
    if info["model"] == "H200":
        return "H200-141GB"
    if info["model"] == "B200":
        return "B200-180GB"
    return None


def _mig_capable(product_name):
    info = nvidia.nvidia_gpu_info(str(product_name), strict=False) if product_name else None
    return bool(info and info["mig_capable"])


def named_layouts(model):
    """The mig-parted layout names that apply to a model (config-default.yaml spelling)."""
    table = MODELS[model]
    names = [DISABLED, ENABLED, BALANCED]
    names += ["all-" + p.replace("+me", ".me") for p in table["order"]]
    return names


def _named(layout, model):
    """The wanted state of one GPU of ``model`` for a named layout, or None when the name is not for it."""
    table = MODELS[model]
    if layout == DISABLED:
        return {"mig": False, "profiles": []}
    if layout == ENABLED:
        return {"mig": True, "profiles": []}
    if layout == BALANCED:
        balanced = [p for p, n in table["balanced"].items() for _ in range(n)]
        return {"mig": True, "profiles": creation_order(model, balanced)}
    if layout.startswith("all-"):
        profile = layout[4:]
        profile = profile[:-3] + "+me" if profile.endswith(".me") else profile
        if profile in table["profiles"]:
            # mig-parted: all-<profile> is as many as fit on the GPU (1g.10gb: 7 on 80GB, 4 on 40GB)
            spec = table["profiles"][profile]
            count = min(spec["max"], table["compute_slices"] // spec["compute"])
            while count > 1 and fit_problems(model, [profile] * count):
                count -= 1
            return {"mig": True, "profiles": [profile] * count}
    return None


def _sorted(model, profiles):
    """Instances largest first (the order tried first when creating them)."""
    table = MODELS[model]["profiles"]
    return sorted(profiles, key=lambda p: (-table[p]["size"], -table[p]["compute"], table[p]["id"]))


def _first_free(model, order):
    """Where the driver puts each instance when they are created in ``order``: each at the first free start its
    profile allows (as the MIG user guide's examples show). None when one finds no room."""
    table = MODELS[model]
    used = set()
    starts = []
    for name in order:
        spec = table["profiles"][name]
        start = next((s for s in spec["starts"] if not used & set(range(s, s + spec["size"]))), None)
        if start is None:
            return None
        used |= set(range(start, start + spec["size"]))
        starts.append(start)
    return starts


def creation_order(model, profiles):
    """An order in which creating the instances one after the other succeeds (the driver places each at the
    first free start), largest first when that works; None when no order does (they do not fit)."""
    first = _sorted(model, profiles)
    if _first_free(model, first) is not None:
        return first
    for order in sorted(set(itertools.permutations(first))):
        if _first_free(model, list(order)) is not None:
            return list(order)
    return None


def fit_problems(model, profiles):
    """Why ``profiles`` cannot all be GPU instances of one GPU of ``model`` ([] when they fit)."""
    table = MODELS[model]
    unknown = [p for p in profiles if p not in table["profiles"]]
    if unknown:
        return ["{} {} not a profile of {} (its profiles: {})".format(
            ", ".join(sorted(set(unknown))), "is" if len(set(unknown)) == 1 else "are", model,
            ", ".join(table["order"]))]
    problems = []
    for name in sorted(set(profiles)):
        if profiles.count(name) > table["profiles"][name]["max"]:
            problems.append("{} x {}: one {} GPU has at most {}".format(
                profiles.count(name), name, model, table["profiles"][name]["max"]))
    compute = sum(table["profiles"][p]["compute"] for p in profiles)
    if compute > table["compute_slices"]:
        problems.append(f"they need {compute} compute slices, one {model} GPU has {table['compute_slices']}")
    if not problems and len([p for p in profiles if p.endswith("+me")]) > 1:
        problems.append("at most one media-extension (+me) instance per GPU")
    if not problems and creation_order(model, profiles) is None:
        problems.append("no placement of their memory slices fits the {} memory slices of one {} GPU".format(
            table["memory_slices"], model))
    return problems


def _what_fits(model, profiles):
    """For a refusal: the largest part of the asked instances that fits, and the profiles that still fit
    next to it."""
    kept = []
    for profile in _sorted(model, [p for p in profiles if p in MODELS[model]["profiles"]]):
        if not fit_problems(model, [*kept, profile]):
            kept.append(profile)
    room = [p for p in MODELS[model]["order"] if not fit_problems(model, [*kept, p])]
    return kept, room


# --- the inventory's layout -> the wanted state per GPU ---------------------------------------------------

def layout_problems(layout):
    """Syntax problems of an ``nvidia_mig_layout`` value, checked without any GPU (the inventory contract)."""
    if layout is None:
        return ["nvidia_mig_layout is empty (null); write \"\" (MIG not managed) or a layout"]
    if isinstance(layout, str):
        if layout == NOT_MANAGED or layout in (DISABLED, ENABLED, BALANCED):
            return []
        rest = layout[4:] if layout.startswith("all-") else ""
        rest = rest[:-3] + "+me" if rest.endswith(".me") else rest
        if _PROFILE_RE.match(rest):
            return []
        return [f"nvidia_mig_layout is {layout!r}; write \"\" (not managed), all-disabled, all-enabled, all-balanced, "
                "all-<profile> such as all-1g.10gb or all-3g.40gb, or a list of {devices, profiles}"]
    if not isinstance(layout, list) or not layout:
        return ["nvidia_mig_layout must be a string or a non-empty list of {devices: [0, 1] or all, profiles: "
                f"[3g.40gb, ...]}}, got {layout!r}"]
    problems = []
    for n, entry in enumerate(layout):
        where = f"nvidia_mig_layout[{n}]"
        if not isinstance(entry, dict) or set(entry) - {"devices", "profiles"} or "devices" not in entry:
            problems.append(f"{where} must be a mapping with devices (a list of GPU indexes, or all) and profiles "
                            f"(a list of profile names, [] for a whole GPU with MIG off), got {entry!r}")
            continue
        devices, profiles = entry["devices"], entry.get("profiles", [])
        if devices != "all" and not (isinstance(devices, list) and devices
                                     and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                             for d in devices)):
            problems.append(f"{where}.devices is {devices!r}; write all or a list of GPU indexes such as [0, 1]")
        if not isinstance(profiles, list) or not all(isinstance(p, str) and _PROFILE_RE.match(p) for p in profiles):
            problems.append(f"{where}.profiles is {profiles!r}; write a list of MIG profile names such as "
                            "[3g.40gb, 1g.10gb] ([] = whole GPU, MIG off)")
    named = [d for e in layout if isinstance(e, dict) and isinstance(e.get("devices"), list) for d in e["devices"]]
    twice = sorted({d for d in named if named.count(d) > 1 and isinstance(d, int)})
    if twice:
        problems.append("nvidia_mig_layout names GPU {} in more than one entry; name each GPU once (all covers "
                        "the GPUs no other entry names)".format(", ".join(str(d) for d in twice)))
    if len([e for e in layout if isinstance(e, dict) and e.get("devices") == "all"]) > 1:
        problems.append("nvidia_mig_layout has more than one entry with devices: all; keep one")
    return problems


def expand_layout(layout, gpus):
    """The wanted state of each GPU (``gpus`` as parse_query_xml returns them) for the inventory's layout:
    [{index, model, mig, profiles}]. Raises KgnError naming every GPU that cannot take it, with what would fit."""
    problems = layout_problems(layout)
    if problems:
        raise KgnError("; ".join(problems))
    if not gpus:
        raise KgnError(f"nvidia_mig_layout is {layout!r} but nvidia-smi lists no GPU on this node")
    wanted, problems = [], []
    if isinstance(layout, str):
        per_gpu = {g["index"]: ("named", layout) for g in gpus}
    else:
        per_gpu = {}
        indexes = {g["index"] for g in gpus}
        for entry in layout:
            if entry["devices"] != "all":
                missing = [d for d in entry["devices"] if d not in indexes]
                if missing:
                    problems.append("nvidia_mig_layout names GPU {}, but this node has GPU {}".format(
                        ", ".join(str(d) for d in missing), ", ".join(str(i) for i in sorted(indexes))))
                for d in entry["devices"]:
                    per_gpu[d] = ("list", entry.get("profiles") or [])
        rest = next((e for e in layout if e["devices"] == "all"), None)
        for g in gpus:
            if g["index"] not in per_gpu:
                # a GPU no entry names keeps MIG off (whole GPU)
                per_gpu[g["index"]] = ("list", (rest or {}).get("profiles") or [])
    for gpu in gpus:
        kind, value = per_gpu[gpu["index"]]
        label = "GPU {} ({})".format(gpu["index"], gpu["product_name"] or "unknown product")
        off = (kind == "named" and value == DISABLED) or (kind == "list" and not value)
        model = model_of(gpu["product_name"], gpu.get("memory_total_mib"))
        if off:
            wanted.append({"index": gpu["index"], "model": model, "mig": False, "profiles": []})
            continue
        if not _mig_capable(gpu["product_name"]):
            problems.append(f"{label} has no MIG (MIG runs on A30, A100, H100, H200, B200 and newer datacenter GPUs); "
                            "leave it out of the layout or give it profiles: [] (whole GPU)")
            continue
        if model is None:
            problems.append("{}: MIG capable, but kube-gpu-nodes has no profile table for it (known: {}); use "
                            "all-disabled for it".format(label, ", ".join(sorted(MODELS))))
            continue
        if kind == "named":
            state = _named(value, model)
            if state is None:
                fitting = [n for n in named_layouts(model) if n not in (DISABLED, ENABLED)]
                problems.append("{}: layout {} does not apply to {} GPUs; layouts that fit: {}".format(
                    label, value, model, ", ".join(fitting)))
                continue
        else:
            why = fit_problems(model, list(value))
            if why:
                kept, room = _what_fits(model, list(value))
                problems.append("{}: profiles {} do not fit one {} GPU ({}); what fits: {}{}; named layouts for "
                                "it: {}".format(
                                    label, ", ".join(value), model, "; ".join(why),
                                    ", ".join(kept) if kept else "none of them",
                                    (", with room left for one of " + ", ".join(room)) if room
                                    else " (no room left)",
                                    ", ".join(n for n in named_layouts(model) if n not in (DISABLED, ENABLED))))
                continue
            state = {"mig": True, "profiles": creation_order(model, list(value))}
        wanted.append({"index": gpu["index"], "model": model, "mig": state["mig"], "profiles": state["profiles"]})
    if problems:
        raise KgnError("MIG layout refused, nothing was changed: " + "; ".join(problems))
    return wanted


def strategy_problems(strategy, wanted, device_plugin=True):
    """The device plugin's migStrategy against the wanted MIG state of one node."""
    if strategy not in STRATEGIES:
        return ["the device plugin MIG strategy is {!r}; accepted: {}".format(strategy, ", ".join(STRATEGIES))]
    if not device_plugin:
        return []
    mig = [w for w in wanted if w["mig"]]
    if strategy == "none" and mig:
        return ["GPU {} get MIG instances but the device plugin's MIG strategy is none (it would advertise "
                "no MIG device); set device_plugin_mig_strategy to single (one profile on every GPU) or mixed".format(
                    ", ".join(str(w["index"]) for w in mig))]
    if strategy == "single" and mig:
        profiles = sorted({p for w in wanted for p in w["profiles"]})
        whole = [w["index"] for w in wanted if not w["mig"] or not w["profiles"]]
        if len(profiles) > 1 or whole:
            why = []
            if len(profiles) > 1:
                why.append("the layout mixes profiles {}".format(", ".join(profiles)))
            if whole:
                why.append("GPU {} would have no MIG instance".format(", ".join(str(i) for i in whole)))
            return ["the device plugin's MIG strategy single needs every GPU of the node in MIG mode with instances "
                    "of one profile, but {}; set device_plugin_mig_strategy to mixed, or use one profile "
                    "(all-<profile>)".format(" and ".join(why))]
    return []


def mig_resources(strategy, wanted, product_name=""):
    """The extended resources and GPU Feature Discovery labels the device plugin advertises for the wanted
    state (k8s-device-plugin README, "Configuration Option Details" / MIG strategies; GFD labels)."""
    if strategy == "none":
        return {"resources": {"nvidia.com/gpu": len(wanted)}, "labels": {"nvidia.com/mig.strategy": "none"}}
    resources, labels = {}, {"nvidia.com/mig.strategy": strategy}
    if strategy == "single":
        profiles = sorted({p for w in wanted for p in w["profiles"]})
        count = sum(len(w["profiles"]) for w in wanted) if profiles else len(wanted)
        resources["nvidia.com/gpu"] = count
        if len(profiles) == 1 and product_name:
            labels["nvidia.com/gpu.product"] = "{}-MIG-{}".format(product_name.replace(" ", "-"), profiles[0])
        return {"resources": resources, "labels": labels}
    whole = len([w for w in wanted if not w["mig"]])
    if whole:
        resources["nvidia.com/gpu"] = whole
    for w in wanted:
        for profile in w["profiles"]:
            key = "nvidia.com/mig-" + profile.replace("+", ".")
            resources[key] = resources.get(key, 0) + 1
    return {"resources": resources, "labels": labels}


# --- current state and the plan --------------------------------------------------------------------------

def current_state(gpus, gis, cis):
    """[{index, mig, pending, profiles, complete}] from -q -x, -lgi and -lci: ``complete`` is False when a GPU
    instance does not have exactly one compute instance of its own size (a half-made layout)."""
    state = []
    for gpu in gpus:
        mine = [g for g in gis if g["gpu"] == gpu["index"]]
        complete = True
        for gi in mine:
            children = [c for c in cis if c["gpu"] == gpu["index"] and c["gi"] == gi["id"]]
            if len(children) != 1 or children[0]["name"] != gi["name"]:
                complete = False
        state.append({
            "index": gpu["index"],
            "mig": gpu["mig_current"] == "Enabled",
            "pending": gpu["mig_pending"] == "Enabled",
            "profiles": sorted(g["name"] for g in mine),
            "complete": complete,
        })
    return state


def describe(mig, profiles):
    """One line per GPU for the diff and the report: "MIG off", "MIG on, no instances", "MIG 3g.20gb, 3g.20gb"."""
    if not mig:
        return "MIG off (whole GPU)"
    return "MIG " + ", ".join(profiles) if profiles else "MIG on, no instances"


def mig_plan(layout, strategy, device_plugin, gpus, gis=(), cis=(), offered=None):
    """The plan of one node. ``gpus``: parse_query_xml; ``gis``/``cis``: parse_lgi/parse_lci (all GPUs);
    ``offered``: {gpu index: [profile names]} from parse_lgip when MIG is on (a driver too old for a profile
    does not list it). Returns {managed, gpus: [{index, product_name, model, before, after, change, busy,
    mode, destroy, create}], commands, changed, resources}; raises KgnError before anything is changed."""
    if layout == NOT_MANAGED:
        return {"managed": False, "gpus": [], "commands": [], "changed": False, "resources": {}}
    wanted = expand_layout(layout, gpus)
    problems = strategy_problems(strategy, wanted, device_plugin)
    by_index = {g["index"]: g for g in gpus}
    for w in wanted:
        listed = (offered or {}).get(w["index"])
        missing = sorted({p for p in w["profiles"] if listed is not None and p not in listed})
        if missing:
            problems.append("GPU {}: the driver does not offer {} (nvidia-smi mig -lgip lists {}); upgrade the "
                            "driver or choose listed profiles".format(w["index"], ", ".join(missing),
                                                                     ", ".join(listed) or "none"))
    if problems:
        raise KgnError("MIG layout refused, nothing was changed: " + "; ".join(problems))
    now = {s["index"]: s for s in current_state(gpus, list(gis), list(cis))}
    plan_gpus, commands = [], []
    for w in wanted:
        gpu, cur = by_index[w["index"]], now[w["index"]]
        i = str(w["index"])
        same = (cur["mig"] == w["mig"] and cur["pending"] == w["mig"]
                and (not w["mig"] or (cur["complete"] and cur["profiles"] == sorted(w["profiles"]))))
        entry = {"index": w["index"], "product_name": gpu["product_name"], "model": w["model"],
                 "before": describe(cur["mig"], cur["profiles"]), "after": describe(w["mig"], w["profiles"]),
                 "change": not same, "busy": [p["pid"] for p in gpu["processes"]],
                 "mode": None, "destroy": False, "create": []}
        plan_gpus.append(entry)
        if same:
            continue
        steps = []
        if cur["mig"] and cur["profiles"]:
            entry["destroy"] = True
            # compute instances before their GPU instances (the driver refuses a GI that still has a CI)
            steps.append({"argv": ["nvidia-smi", "mig", "-i", i, "-dci"], "why": "destroy compute instances"})
            steps.append({"argv": ["nvidia-smi", "mig", "-i", i, "-dgi"], "why": "destroy GPU instances"})
        if cur["mig"] != w["mig"] or cur["pending"] != w["mig"]:
            entry["mode"] = "enable" if w["mig"] else "disable"
            steps.append({"argv": ["nvidia-smi", "-i", i, "-mig", "1" if w["mig"] else "0"],
                          "why": "{} MIG mode".format(entry["mode"])})
            # the driver resets the GPU itself when it can; when it could not, the mode stays pending until a
            # GPU reset (MIG user guide, "Enable MIG Mode"): the module runs this only if the mode is pending
            steps.append({"argv": ["nvidia-smi", "-i", i, "--gpu-reset"], "why": "reset the GPU so the MIG mode "
                          "is current", "when": "pending"})
        if w["mig"] and w["profiles"]:
            table = MODELS[w["model"]]["profiles"]
            entry["create"] = list(w["profiles"])
            steps.append({"argv": ["nvidia-smi", "mig", "-i", i, "-cgi",
                                   ",".join(str(table[p]["id"]) for p in w["profiles"]), "-C"],
                          "why": "create GPU instances {} with their default compute instance".format(
                              ", ".join(w["profiles"]))})
        for step in steps:
            step["gpu"] = w["index"]
        commands.extend(steps)
    product = gpus[0]["product_name"] if gpus else ""
    return {"managed": True, "layout": layout, "strategy": strategy, "gpus": plan_gpus, "commands": commands,
            "changed": any(g["change"] for g in plan_gpus),
            "wanted": wanted, "resources": mig_resources(strategy, wanted, product) if device_plugin else {}}


def live_problems(plan, state):
    """What the live state (current_state after the change) still differs in from the plan's wanted state."""
    now = {s["index"]: s for s in state}
    problems = []
    for w in plan.get("wanted") or []:
        cur = now.get(w["index"])
        if cur is None:
            problems.append("GPU {} is gone".format(w["index"]))
            continue
        if cur["mig"] != w["mig"]:
            problems.append("GPU {}: MIG mode is {}, wanted {}{}".format(
                w["index"], "on" if cur["mig"] else "off", "on" if w["mig"] else "off",
                " (pending: a reboot makes it current)" if cur["pending"] == w["mig"] else ""))
        elif w["mig"] and (cur["profiles"] != sorted(w["profiles"]) or not cur["complete"]):
            problems.append("GPU {}: instances are {}, wanted {}".format(
                w["index"], ", ".join(cur["profiles"]) or "none", ", ".join(sorted(w["profiles"])) or "none"))
    return problems


def mig_gpu_pods(answer):
    """The running pods of a ``kubectl get pods -o json`` answer (text or parsed) that use NVIDIA GPU resources
    (``nvidia.com/gpu``, ``nvidia.com/mig-*`` ... in a container's requests or limits), as "namespace/name": they
    hold GPUs (or MIG devices) a layout change would take away, so the node is drained first
    (api.pods_using, as the k8s_node module decides a drain)."""
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import pods_using

    try:
        return pods_using(answer, "nvidia.com/")
    except KgnError as err:
        raise KgnError(f"mig_gpu_pods: {err}") from None
