"""NVIDIA compatibility filters: CUDA vs driver, driver branch vs GPU, GPU facts and label values.

Pure functions over plain data (str/int/bool/list/dict in and out). Every table cites its source key
in docs/versions.md (section D1-D4, E4); the keys are listed with their upstream addresses in its
Sources table. Documentation for each filter is in the sidecar ``filter_plugins/<filter_name>.yml``.
"""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import VersionError, parse_version

# --- D1 table 3: CUDA toolkit -> minimum Linux x86_64 driver [CUDA-RN] --------------------------
# Key: CUDA version as released (GA = .0, "Update N" = .N). Legacy releases are listed with the
# build number NVIDIA printed (10.2.89 ...) and also answer for "<major>.<minor>" alone.
CUDA_MIN_DRIVER: "dict[str, str]" = {
    "13.2.2": "595.71.05",
    "13.2.1": "595.58.03",
    "13.2.0": "595.45.04",
    "13.1.1": "590.48.01",
    "13.1.0": "590.44.01",
    "13.0.2": "580.95.05",
    "13.0.1": "580.82.07",
    "13.0.0": "580.65.06",
    "12.9.1": "575.57.08",
    "12.9.0": "575.51.03",
    "12.8.1": "570.124.06",
    "12.8.0": "570.26",
    "12.6.3": "560.35.05",
    "12.6.2": "560.35.03",
    "12.6.1": "560.35.03",
    "12.6.0": "560.28.03",
    "12.5.1": "555.42.06",
    "12.5.0": "555.42.02",
    "12.4.1": "550.54.15",
    "12.4.0": "550.54.14",
    "12.3.1": "545.23.08",
    "12.3.0": "545.23.06",
    "12.2.2": "535.104.05",
    "12.2.1": "535.86.09",
    "12.2.0": "535.54.03",
    "12.1.1": "530.30.02",
    "12.1.0": "530.30.02",
    "12.0.1": "525.85.12",
    "12.0.0": "525.60.13",
    "11.8.0": "520.61.05",
    "11.7.1": "515.48.07",
    "11.7.0": "515.43.04",
    "11.6.2": "510.47.03",
    "11.6.1": "510.47.03",
    "11.6.0": "510.39.01",
    "11.5.2": "495.29.05",
    "11.5.1": "495.29.05",
    "11.5.0": "495.29.05",
    "11.4.4": "470.82.01",
    "11.4.3": "470.82.01",
    "11.4.2": "470.57.02",
    "11.4.1": "470.57.02",
    "11.4.0": "470.42.01",
    "11.3.1": "465.19.01",
    "11.3.0": "465.19.01",
    "11.2.2": "460.32.03",
    "11.2.1": "460.32.03",
    "11.2.0": "460.27.03",
    "11.1.1": "455.32",
    "11.1.0": "455.23",
    "11.0.3": "450.51.06",
    "11.0.2": "450.51.05",
    "11.0.1": "450.36.06",
    "10.2.89": "440.33",
    "10.1.105": "418.39",
    "10.0.130": "410.48",
    "9.2.148": "396.37",
    "9.2.88": "396.26",
    "9.1.85": "390.46",
    "9.0.76": "384.81",
}

# --- D1 table 2: minor-version compatibility, minimum driver per CUDA major [CUDA-RN] ----------
# 11.x: 450.80.02 (footnote: 11.0 shipped earlier, 450.80.02 enables minor-version compat).
# 12.x: 525.60.13 (older notes give the exact minimum; current notes say ">= 525").
# 13.x: 580 (current notes: ">= 580"; the 13.0 GA driver is 580.65.06).
CUDA_MINOR_COMPAT_MIN_DRIVER: "dict[int, str]" = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}

# --- D2: datacenter GPU -> architecture, compute capability, MIG ---------------------------------
# Ordered: the first pattern that matches a product name wins (A100 before A10, L40S before L4,
# GH200 before H200). Sources: [CUDA-GPUS], [CUDA-GPUS-LEGACY], [MIG-GPUS]; min driver for MIG
# from [MIG-DEPLOY] (r620 table).
GPU_MODELS: "list[dict]" = [
    {
        "model": "K80",
        "pattern": r"\bK80\b",
        "architecture": "Kepler",
        "compute_capability": "3.7",
        "mig_max_instances": 0,
        "mig_min_driver": None,
    },
    {
        "model": "P100",
        "pattern": r"\bP100\b",
        "architecture": "Pascal",
        "compute_capability": "6.0",
        "mig_max_instances": 0,
        "mig_min_driver": None,
    },
    {
        "model": "P4",
        "pattern": r"\bP4\b",
        "architecture": "Pascal",
        "compute_capability": "6.1",
        "mig_max_instances": 0,
        "mig_min_driver": None,
    },
    {
        "model": "V100",
        "pattern": r"\bV100S?\b",
        "architecture": "Volta",
        "compute_capability": "7.0",
        "mig_max_instances": 0,
        "mig_min_driver": None,
    },
    {
        "model": "T4",
        "pattern": r"\bT4\b",
        "architecture": "Turing",
        "compute_capability": "7.5",
        "mig_max_instances": 0,
        "mig_min_driver": None,
    },
    {
        "model": "A100",
        "pattern": r"\bA100\b",
        "architecture": "Ampere",
        "compute_capability": "8.0",
        "mig_max_instances": 7,
        "mig_min_driver": "450.80.02",
    },
    {
        "model": "A30",
        "pattern": r"\bA30\b",
        "architecture": "Ampere",
        "compute_capability": "8.0",
        "mig_max_instances": 4,
        "mig_min_driver": "460.73.01",
    },
    {
        "model": "A10",
        "pattern": r"\bA10\b",
        "architecture": "Ampere",
        "compute_capability": "8.6",
        "mig_max_instances": 0,
        "mig_min_driver": None,
    },
    {
        "model": "L40S",
        "pattern": r"\bL40S\b",
        "architecture": "Ada Lovelace",
        "compute_capability": "8.9",
        "mig_max_instances": 0,
        "mig_min_driver": None,
    },
    {
        "model": "L4",
        "pattern": r"\bL4\b",
        "architecture": "Ada Lovelace",
        "compute_capability": "8.9",
        "mig_max_instances": 0,
        "mig_min_driver": None,
    },
    # GH200 = Grace CPU + H100 GPU: MIG 7 [MIG-GPUS]; open kernel modules required (D3).
    {
        "model": "GH200",
        "pattern": r"\bGH200\b",
        "architecture": "Hopper",
        "compute_capability": "9.0",
        "mig_max_instances": 7,
        "mig_min_driver": "525.85.12",
        "grace": True,
    },
    {
        "model": "H100",
        "pattern": r"\bH100\b",
        "architecture": "Hopper",
        "compute_capability": "9.0",
        "mig_max_instances": 7,
        "mig_min_driver": "525.85.12",
    },
    {
        "model": "H200",
        "pattern": r"\bH200\b",
        "architecture": "Hopper",
        "compute_capability": "9.0",
        "mig_max_instances": 7,
        "mig_min_driver": "550.90.07",
    },
    {
        "model": "B200",
        "pattern": r"\bB200\b",
        "architecture": "Blackwell",
        "compute_capability": "10.0",
        "mig_max_instances": 7,
        "mig_min_driver": "570.133.20",
    },
]

# --- D3: driver branches vs architectures ------------------------------------------------------
# Last branch that supports an architecture (None = still supported). Fermi R390, Kepler R470
# (NVIDIA "current releases", Debian nvidia-driver description), Maxwell/Pascal/Volta R580
# (NVIDIA Unix deprecation schedule).
LAST_BRANCH: "dict[str, int | None]" = {
    "Fermi": 390,
    "Kepler": 470,
    "Maxwell": 580,
    "Pascal": 580,
    "Volta": 580,
    "Turing": None,
    "Ampere": None,
    "Ada Lovelace": None,
    "Hopper": None,
    "Blackwell": None,
}
# First branch for an architecture: the minimum driver (table 3) of the first CUDA release that
# supports its compute capability (D2 extra facts: 8.0 -> 11.0, 8.6 -> 11.1, 8.9/9.0 -> 11.8,
# 10.0 -> 12.8; 7.0 -> 9.0, 7.5 -> 10.0). Partially verified in the source; used for the
# "branch too old for this GPU" check.
FIRST_BRANCH_BY_CC: "dict[str, int]" = {
    "7.0": 384,
    "7.5": 410,
    "8.0": 450,
    "8.6": 455,
    "8.9": 520,
    "9.0": 520,
    "10.0": 570,
}
OPEN_MODULES_FIRST_BRANCH = 515  # [NV-KMOD]: open modules from R515, Turing and newer only
OPEN_MODULES_MIN_CC = (7, 5)
# [NV-KMOD]: "Starting in the 560 driver release series, the open kernel module flavor is the default".
OPEN_MODULES_DEFAULT_BRANCH = 560
# [NV-KMOD-620]: the R620 guide's "Proprietary Kernel Modules Removed": R610 is the last branch with them.
PROPRIETARY_LAST_BRANCH = 610
KERNEL_MODULES = ("proprietary", "open")

# --- E4: GPU Feature Discovery family from compute capability (getArchFamily) [DP] -------------
_FAMILY_BY_MAJOR = {3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper", 10: "blackwell", 12: "blackwell", 13: "rubin"}

_DRIVER_RE = re.compile(r"^(?:\d+:)?(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.(?P<patch>\d+))?")
_CC_RE = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)$")


def _fail(filter_name: str, message: str) -> KgnError:
    return KgnError(f"{filter_name}: {message}")


def _driver_tuple(value: object, filter_name: str, what: str = "driver version") -> "tuple[int, int, int]":
    """Parse a driver version or branch: 535, '535', '535.104.05', '535.216.01-1~deb12u1'."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        raise _fail(
            filter_name,
            f"{what} {value!r} is not a driver version; give a string such as '535.104.05' or a branch such as '535'",
        )
    match = _DRIVER_RE.match(str(value).strip())
    if not match:
        raise _fail(
            filter_name,
            f"{what} {value!r} is not a driver version; give a string such as '535.104.05' or a branch such as '535'",
        )
    return int(match["major"]), int(match["minor"] or 0), int(match["patch"] or 0)


def _cuda_tuple(value: object, filter_name: str) -> "tuple[int, int, int]":
    try:
        return parse_version(value, "CUDA version")
    except VersionError as err:
        raise _fail(filter_name, f"{err} (CUDA versions look like '12.4' or '12.4.1')") from None


def _cuda_key(cuda: "tuple[int, int, int]", filter_name: str) -> str:
    rows = sorted(
        (tuple(int(p) for p in key.split(".")), key)
        for key in CUDA_MIN_DRIVER
        if tuple(int(p) for p in key.split("."))[:2] == cuda[:2]
    )
    if not rows:
        known = sorted(
            {".".join(k.split(".")[:2]) for k in CUDA_MIN_DRIVER}, key=lambda s: tuple(int(p) for p in s.split("."))
        )
        raise _fail(
            filter_name,
            f"CUDA {cuda[0]}.{cuda[1]} is not in NVIDIA's driver table (there is no "
            f"CUDA 12.7, for example); known releases: {', '.join(known)}",
        )
    # Largest listed release not newer than the one asked for; "12.4" means GA (12.4.0).
    at_or_below = [key for parts, key in rows if parts <= cuda]
    return at_or_below[-1] if at_or_below else rows[0][1]


def nvidia_min_driver(cuda_version: object) -> str:
    """Minimum Linux driver for a CUDA toolkit release (D1 table 3)."""
    return CUDA_MIN_DRIVER[_cuda_key(_cuda_tuple(cuda_version, "nvidia_min_driver"), "nvidia_min_driver")]


def nvidia_cuda_compat(driver_version: object, cuda_version: object) -> dict:
    """Can a driver run applications built with a CUDA release? (D1 tables 2 and 3)."""
    name = "nvidia_cuda_compat"
    driver = _driver_tuple(driver_version, name)
    cuda = _cuda_tuple(cuda_version, name)
    min_driver = CUDA_MIN_DRIVER[_cuda_key(cuda, name)]
    full = driver >= _driver_tuple(min_driver, name)
    minor_min = CUDA_MINOR_COMPAT_MIN_DRIVER.get(cuda[0])
    minor = minor_min is not None and driver >= _driver_tuple(minor_min, name)
    driver_text = _DRIVER_RE.match(str(driver_version).strip()).group(0).split(":")[-1]
    if full:
        reason = f"driver {driver_text} >= {min_driver}, the minimum for CUDA {cuda[0]}.{cuda[1]}.{cuda[2]}"
    elif minor:
        reason = (
            f"driver {driver_text} is below {min_driver} (full support) but >= {minor_min}: CUDA "
            f"{cuda[0]}.x minor-version compatibility only (no newer PTX JIT, limited features)"
        )
    else:
        reason = f"driver {driver_text} cannot run CUDA {cuda[0]}.{cuda[1]}: it needs >= {min_driver}" + (
            f" (or >= {minor_min} with minor-version compatibility)" if minor_min else ""
        )
    return {
        "supported": bool(full or minor),
        "full": bool(full),
        "minor_version_compat": bool(minor and not full),
        "min_driver": min_driver,
        "minor_compat_min_driver": minor_min,
        "reason": reason,
    }


def nvidia_gpu_family(compute_capability: object) -> str:
    """GPU Feature Discovery family for a compute capability ('7.5' -> 'turing') [DP] getArchFamily."""
    name = "nvidia_gpu_family"
    match = _CC_RE.match(str(compute_capability).strip()) if isinstance(compute_capability, str) else None
    if not match:
        raise _fail(
            name,
            f"compute capability {compute_capability!r} is not a string like '7.5' "
            f"(quote it in YAML: 7.50 would become 7.5)",
        )
    major, minor = int(match["major"]), int(match["minor"])
    if major == 7:
        return "turing" if minor >= 5 else "volta"
    if major == 8:
        return "ada-lovelace" if minor == 9 else "ampere"
    if major in _FAMILY_BY_MAJOR:
        return _FAMILY_BY_MAJOR[major]
    raise _fail(name, f"compute capability {compute_capability} maps to no known GPU family")


def nvidia_gpu_info(product_name: object, strict: bool = True) -> "dict | None":
    """Product name (as nvidia-smi prints it) -> architecture, compute capability, MIG, MPS, modules."""
    name = "nvidia_gpu_info"
    if not isinstance(product_name, str) or not product_name.strip():
        raise _fail(name, f"product name {product_name!r} must be a non-empty string such as 'Tesla T4'")
    for row in GPU_MODELS:
        if re.search(row["pattern"], product_name, flags=re.IGNORECASE):
            cc = row["compute_capability"]
            cc_tuple = tuple(int(p) for p in cc.split("."))
            open_required = row["architecture"] == "Blackwell" or bool(row.get("grace"))
            return {
                "product_name": product_name.strip(),
                "model": row["model"],
                "architecture": row["architecture"],
                "compute_capability": cc,
                "family": nvidia_gpu_family(cc),
                # [MPS-DOC]: Volta MPS (direct submission, per-client address space) needs CC >= 7.0.
                "volta_mps": cc_tuple >= (7, 0),
                "mig_capable": row["mig_max_instances"] > 0,
                "mig_max_instances": row["mig_max_instances"],
                "mig_min_driver": row["mig_min_driver"],
                "open_modules_supported": cc_tuple >= OPEN_MODULES_MIN_CC,
                "open_modules_required": open_required,
                "first_branch": FIRST_BRANCH_BY_CC.get(cc),
                "last_branch": LAST_BRANCH[row["architecture"]],
            }
    if not strict:
        return None
    known = ", ".join(row["model"] for row in GPU_MODELS)
    raise _fail(
        name,
        f"unknown GPU product {product_name!r}; known models: {known}. Pass strict=false "
        f"to get None for GPUs outside the table",
    )


def nvidia_branch_supports_gpu(branch: object, gpu: object, kernel_module: str = "proprietary") -> dict:
    """Does a driver branch (and kernel-module flavour) support a GPU? (D3)."""
    name = "nvidia_branch_supports_gpu"
    major = _driver_tuple(branch, name, "driver branch")[0]
    if kernel_module not in KERNEL_MODULES:
        raise _fail(name, f"kernel_module {kernel_module!r} is not one of {', '.join(KERNEL_MODULES)}")
    info = gpu if isinstance(gpu, dict) else nvidia_gpu_info(gpu)
    for key in ("product_name", "architecture", "compute_capability"):
        if key not in info:
            raise _fail(name, f"gpu must be a product name or a nvidia_gpu_info result; {key!r} is missing")
    product, arch = info["product_name"], info["architecture"]
    last = LAST_BRANCH.get(arch)
    first = FIRST_BRANCH_BY_CC.get(info["compute_capability"])
    problems = []
    if last is not None and major > last:
        problems.append(
            f"R{last} is the last branch for {arch} GPUs; install the R{last} branch (or older) instead of R{major}"
        )
    if first is not None and major < first:
        problems.append(f"{product} (compute capability {info['compute_capability']}) needs R{first} or newer")
    if kernel_module == "proprietary" and major > PROPRIETARY_LAST_BRANCH:
        problems.append(f"R{major} has no proprietary kernel modules (R{PROPRIETARY_LAST_BRANCH} is the last "
                        "with them)")
    if kernel_module == "open":
        if not info.get("open_modules_supported", False):
            problems.append(f"open kernel modules need Turing or newer (GSP); {arch} needs the proprietary modules")
        if major < OPEN_MODULES_FIRST_BRANCH:
            problems.append(f"open kernel modules exist from R{OPEN_MODULES_FIRST_BRANCH}")
    elif info.get("open_modules_required", False):
        problems.append(f"{product} ({arch}) is supported by the open kernel modules only; set kernel_module to open")
    return {
        "supported": not problems,
        "reason": "; ".join(problems) if problems else f"R{major} ({kernel_module} modules) supports {product}",
        "architecture": arch,
        "first_branch": first,
        "last_branch": last,
    }


def nvidia_accelerator_label(product_name: object) -> str:
    """accelerator label value as in the reference clusters: 'Tesla T4' -> 'nvidia-tesla-t4'."""
    name = "nvidia_accelerator_label"
    if not isinstance(product_name, str) or not product_name.strip():
        raise _fail(name, f"product name {product_name!r} must be a non-empty string such as 'Tesla T4'")
    slug = re.sub(r"[^a-z0-9]+", "-", product_name.lower()).strip("-")
    if not slug.startswith("nvidia"):
        slug = f"nvidia-{slug}"
    # Label values: at most 63 characters, alphanumeric at both ends.
    return slug[:63].rstrip("-")


def nvidia_upstream_version(package_version: object) -> str:
    """Upstream driver version of a package version: '535.216.01-1~deb12u1' -> '535.216.01'."""
    name = "nvidia_upstream_version"
    if not isinstance(package_version, str) or not package_version.strip():
        raise _fail(name, f"package version {package_version!r} must be a non-empty string")
    text = package_version.strip().split(":", 1)[-1]
    match = re.match(r"^\d+(?:\.\d+)*", text)
    if not match:
        raise _fail(name, f"package version {package_version!r} does not start with a driver version")
    return match.group(0)


def driver_version_matches(found: object, wanted: object) -> bool:
    """Whether an installed driver ``found`` is the one ``wanted``: the one rule the driver plan and verify use.

    ``found``: an upstream version ('535.309.01') or a package version with an epoch and a revision
    ('1:535.309.01-1~deb12u1', '3:580.105.08-1.el9'). ``wanted``: "" (anything installed), a branch ('535':
    any 535.x), an upstream version ('535.216.01': its package revisions too, separated by '-', '~' or '+'),
    or a full package version."""
    wanted = str(wanted or "").strip()
    if not wanted:
        return True
    found = str(found or "").strip()
    if not found:
        return False
    text, want = found.split(":", 1)[-1] if re.match(r"^\d+:", found) else found, wanted
    want = want.split(":", 1)[-1] if re.match(r"^\d+:", want) else want
    if text == want:
        return True
    if re.match(r"^\d+$", want):
        return text.split(".", 1)[0] == want and "." in text
    return text.startswith(want) and text[len(want)] in "-~+"


def nvidia_gfd_labels(gpu_facts: object) -> dict:
    """GPU Feature Discovery-style nvidia.com/* labels from a gpu_facts result (E4)."""
    name = "nvidia_gfd_labels"
    if not isinstance(gpu_facts, dict) or "gpus" not in gpu_facts:
        raise _fail(name, "input must be the result of the gpu_facts module (a dict with 'gpus')")
    gpus = gpu_facts.get("gpus") or []
    labels: dict[str, str] = {"nvidia.com/gpu.present": "true" if gpus else "false"}
    if not gpus:
        return labels
    first = gpus[0]
    product = str(first.get("product_name") or "")
    labels["nvidia.com/gpu.count"] = str(len(gpus))
    labels["nvidia.com/gpu.product"] = re.sub(r"\s+", "-", product.strip())[:63]
    if first.get("memory_total_mib") is not None:
        labels["nvidia.com/gpu.memory"] = str(int(first["memory_total_mib"]))
    cc = first.get("compute_capability")
    info = nvidia_gpu_info(product, strict=False) if product else None
    if not cc and info:
        cc = info["compute_capability"]
    if cc:
        major, minor = str(cc).split(".", 1)
        labels["nvidia.com/gpu.compute.major"] = major
        labels["nvidia.com/gpu.compute.minor"] = minor
        labels["nvidia.com/gpu.family"] = nvidia_gpu_family(str(cc))
    labels["nvidia.com/mig.capable"] = (
        "true"
        if any(str(g.get("mig_mode_current", "N/A")) in ("Enabled", "Disabled") for g in gpus)
        or bool(info and info["mig_capable"])
        else "false"
    )
    driver = gpu_facts.get("driver_version")
    if driver:
        labels.update(_version_labels("driver", _driver_tuple(driver, name), str(driver)))
    cuda = gpu_facts.get("cuda_version")
    if cuda:
        c_major, c_minor, _ = _cuda_tuple(cuda, name)
        labels.update(_version_labels("runtime", (c_major, c_minor), f"{c_major}.{c_minor}"))
    return labels


def _version_labels(kind: str, parts: tuple, full: str) -> dict:
    """GFD's ``nvidia.com/cuda.<kind>-version.*`` labels: major, minor, the revision (two digits; the driver's only)
    and the full version."""
    names = ("major", "minor", "revision")
    labels = {f"nvidia.com/cuda.{kind}-version.{n}": f"{p:02d}" if n == "revision" else str(p)
              for n, p in zip(names, parts)}
    labels[f"nvidia.com/cuda.{kind}-version.full"] = full
    return labels


def _apt_entries(path: str, content: str) -> "list[tuple[str, set[str]]]":
    """(suite, components) of every enabled binary entry of an apt source file (.list or deb822)."""
    entries = []
    if path.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", content):
            fields: dict[str, str] = {}
            key = None
            for line in stanza.splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                if line[0] in " \t" and key:  # continuation line
                    fields[key] += " " + line.strip()
                    continue
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
            if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
                continue
            for suite in fields.get("suites", "").split():
                entries.append((suite, set(fields.get("components", "").split())))
        return entries
    for line in content.splitlines():
        line = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()
        if len(line) >= 3 and line[0] == "deb":
            entries.append((line[2], set(line[3:])))
    return entries


def nvidia_apt_missing_components(sources: object, suites: object, components: object) -> list:
    """Which of the needed components each suite still lacks in the host's apt sources."""
    name = "nvidia_apt_missing_components"
    if not isinstance(sources, list) or not all(isinstance(s, dict) and {"path", "content"} <= set(s) for s in sources):
        raise _fail(name, "input must be a list of {path, content} dicts (the host's apt source files)")
    if not isinstance(suites, list) or not isinstance(components, list):
        raise _fail(name, "suites and components must be lists, e.g. ['bookworm'] and ['non-free']")
    present: dict[str, set[str]] = {}
    for source in sources:
        for suite, comps in _apt_entries(str(source["path"]), str(source["content"])):
            present.setdefault(suite, set()).update(comps)
    missing = []
    for suite in suites:
        lacking = [c for c in components if c not in present.get(suite, set())]
        if lacking:
            missing.append({"suite": suite, "components": lacking})
    return missing


def nvidia_pin_package(package: object, version: object, unpinned: object = None) -> str:
    """'nvidia-driver' + '535.216.01-1~deb12u1' -> 'nvidia-driver=535.216.01-1~deb12u1' (apt pin syntax)."""
    name = "nvidia_pin_package"
    if not isinstance(package, str) or not package:
        raise _fail(name, f"package {package!r} must be a package name")
    if not isinstance(version, str) or not version:
        raise _fail(name, f"version {version!r} must be the package version to pin, e.g. '535.216.01-1~deb12u1'")
    return package if package in (unpinned or []) else f"{package}={version}"


def nvidia_apt_unmet(wanted: object, installed: object) -> list:
    """Apt specs ('name', 'name=version', 'name=version*') that dpkg's 'name=version' list does not meet."""
    name = "nvidia_apt_unmet"
    if not isinstance(wanted, list) or not all(isinstance(w, str) and w for w in wanted):
        raise _fail(name, f"wanted {wanted!r} must be a list of apt specs such as 'nvidia-driver=535.216.01-1~deb12u1'")
    if not isinstance(installed, list) or not all(isinstance(i, str) and "=" in i for i in installed):
        raise _fail(name, f"installed {installed!r} must be a list of 'name=version' strings (dpkg-query output)")
    have: dict[str, str] = dict(i.split("=", 1) for i in installed)
    unmet = []
    for spec in wanted:
        package, _, version = spec.partition("=")
        present = have.get(package)
        if present is None:
            unmet.append(spec)
        elif version.endswith("*"):
            if not present.startswith(version[:-1]):
                unmet.append(spec)
        elif version and present != version:
            unmet.append(spec)
    return unmet

