"""Which driver source, branch and kernel module flavour a node gets: ``nvidia_driver_source: auto``,
``nvidia_driver_branch: auto`` and ``nvidia_driver_kernel_module: auto``, and the refusals of explicit choices
that cannot drive the node's GPUs.

Pure functions over plain data (Python 3.6 grammar: they run on the nodes inside the nvidia_driver module).
The facts come from nvidia.py (what each GPU needs: first and last branch, open modules supported or
required) and lifecycle.py (which branches NVIDIA still supports); what each OS's source offers is in
driver.PLATFORMS. docs/driver-branches.md gives every row's source.

  choose_source    auto: the distribution's own packages where the OS ships the driver (Debian, Ubuntu), NVIDIA's
                   CUDA repository where it ships none (RHEL and its rebuilds, as NVIDIA's driver installation
                   guide installs it there); an explicit source is kept as asked
  gpu_needs        what the node's GPUs need: the first branch that drives them all, the last one, and which
                   GPUs need the open or the proprietary modules
  choose_branch    auto: the installed branch when it drives the GPUs, else the newest branch NVIDIA still
                   supports that the source offers and that drives every GPU; an explicit branch is checked
  choose_flavour   auto: open for Turing and newer when the branch makes it the default (R560 and later) or the
                   GPU needs it (Blackwell, Grace Hopper), proprietary for older GPUs; explicit choices checked
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import nvidia
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import lifecycle
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

AUTO = "auto"
SOURCES = ("distro", "cuda_repo", "runfile")
# Where NVIDIA documents its CUDA repository as the way to install the driver on an OS that ships none: the
# driver installation guide lists the distributions it installs on with the repository of each (RHEL, Rocky
# Linux, AlmaLinux and Oracle Linux 8 to 10: rhel8, rhel9, rhel10; its "Kernel Modules" page has the dnf
# commands); EL 7 is no longer in it, NVIDIA's RHEL 7 packaging guide describes the rhel7 repository's branch
# packages. docs/driver-branches.md, "The default source".
NVIDIA_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/introduction.html"
NVIDIA_GUIDE_EL7 = "https://developer.download.nvidia.com/compute/github-demos/yum-packaging-nvidia-driver/guide-rhel7"


def _fail(message):
    return KgnError(f"nvidia_driver: {message}")


def os_words(os_release, platform_key):
    """'Rocky Linux 10', 'Ubuntu 24.04', 'Debian 12' (the os-release ID when the lifecycle table has no name)."""
    os_id = str((os_release or {}).get("id") or "").lower()
    version = str((os_release or {}).get("version_id") or "")
    name = (lifecycle.OS_RELEASES.get(os_id) or {}).get("name") or os_id
    shown = version if os_id == "ubuntu" else version.split(".")[0]
    return f"{name} {shown}".strip() if name else platform_key


def choose_source(requested, os_release, platform_key, platform, known=()):
    """The driver source and why: {source, how, why, words}.

    ``requested``: nvidia_driver_source (auto, distro, cuda_repo or runfile); ``os_release``: the node's
    os-release {id, version_id, id_like}; ``platform_key`` and ``platform``: the node's row of driver.PLATFORMS
    (``platform`` None when the OS is not in the table, ``known`` the table's keys). auto takes the distribution's
    own packages where the OS ships the driver (the platform has distro branches: Debian, Ubuntu), NVIDIA's CUDA
    repository where it ships none (RHEL, Rocky Linux, AlmaLinux, Oracle Linux, CentOS 7). An explicit source is
    kept as asked. Raises KgnError for a value outside the choices, and for auto on an OS outside the table,
    naming nvidia_driver_source and its choices."""
    requested = str(requested or AUTO)
    choices = ", ".join((AUTO, *SOURCES))
    if requested not in (AUTO, *SOURCES):
        raise _fail(f"nvidia_driver_source is {requested!r}; it must be one of {choices}")
    if requested != AUTO:
        why = f"asked: nvidia_driver_source={requested}"
        return {"source": requested, "how": "asked", "why": why, "words": f"source: {requested} ({why})"}
    named = os_words(os_release, platform_key)
    if not platform:
        raise _fail(f"nvidia_driver_source=auto: no default source for {named} ({platform_key}), an OS the role "
                    f"does not install the driver on (it supports {', '.join(known) or 'none'}). "
                    f"nvidia_driver_source must be one of {choices}")
    if platform.get("distro_branches"):
        branches = sorted(platform["distro_branches"], key=int)
        carries = f"branch{'es' if len(branches) > 1 else ''} {', '.join(branches)}"
        why = (f"the default for {named}: the distribution packages the NVIDIA driver itself ({carries}); "
               "nvidia_driver_source=cuda_repo takes NVIDIA's CUDA repository instead")
        return {"source": "distro", "how": AUTO, "why": why, "words": f"source: distro ({why})"}
    guide = (f"NVIDIA's RHEL 7 packaging guide, {NVIDIA_GUIDE_EL7}" if platform_key == "RedHat-7"
             else f"NVIDIA's driver installation guide, {NVIDIA_GUIDE}")
    why = (f"the default for {named}: the distribution ships no NVIDIA driver; NVIDIA's CUDA repository "
           f"{platform.get('cuda_repo_distro')}, as documented in {guide}")
    return {"source": "cuda_repo", "how": AUTO, "why": why, "words": f"source: cuda_repo ({why})"}


def _name(row):
    return f"{row['product']} ({row['architecture']})"


def gpu_needs(gpu_facts):
    """{known, gpus: [{product, architecture, first, last, open}], first, last, need_open, need_proprietary,
    unknown}: ``first`` is the oldest branch that drives every GPU, ``last`` the newest (None: no limit);
    ``known`` is False when no GPU facts were recorded."""
    if gpu_facts is None:
        return {"known": False, "gpus": [], "first": None, "last": None, "need_open": [], "need_proprietary": [],
                "unknown": []}
    rows, unknown = [], []
    for entry in (gpu_facts or {}).get("gpus") or []:
        product = str((entry or {}).get("product_name") or "")
        info = nvidia.nvidia_gpu_info(product, strict=False) if product else None
        if not info:
            unknown.append(product or "unnamed GPU")
            continue
        opens = ("required" if info["open_modules_required"] else
                 "supported" if info["open_modules_supported"] else "unsupported")
        rows.append({"product": info["product_name"], "architecture": info["architecture"],
                     "first": info["first_branch"], "last": info["last_branch"], "open": opens})
    firsts = [r["first"] for r in rows if r["first"]]
    lasts = [r["last"] for r in rows if r["last"]]
    return {
        "known": True,
        "gpus": rows,
        "first": max(firsts) if firsts else None,
        "last": min(lasts) if lasts else None,
        "need_open": sorted({_name(r) for r in rows if r["open"] == "required"}),
        "need_proprietary": sorted({_name(r) for r in rows if r["open"] == "unsupported"}),
        "unknown": unknown,
    }


def _drives(branch, needs):
    number = int(branch)
    return ((needs["first"] is None or number >= needs["first"]) and (needs["last"] is None or number <= needs["last"])
            and not (needs["need_proprietary"] and number > nvidia.PROPRIETARY_LAST_BRANCH))


def _gpu_words(needs, branch):
    """Which GPUs a branch cannot drive, and the first (or last) branch that does."""
    number = int(branch)
    too_new = sorted({_name(r) for r in needs["gpus"] if r["first"] and number < r["first"]})
    too_old = sorted({_name(r) for r in needs["gpus"] if r["last"] and number > r["last"]})
    words = []
    if too_new:
        words.append(f"{', '.join(too_new)} need R{needs['first']} or newer, the first branch that supports them")
    if too_old:
        words.append(f"{', '.join(too_old)} are supported up to R{needs['last']}, the last branch for them")
    if not words and needs["need_proprietary"] and number > nvidia.PROPRIETARY_LAST_BRANCH:
        words.append(f"{', '.join(needs['need_proprietary'])} need the proprietary modules, which end with "
                     f"R{nvidia.PROPRIETARY_LAST_BRANCH}")
    return "; ".join(words)


def choose_branch(requested, version, offered, needs, installed="", today=None):
    """The branch to install, and why: {branch, how, lifecycle, offered, newest_supported, gpus}.

    ``requested``: "auto" or a branch ("535"); ``version``: an exact version to pin ("" when none; its branch
    wins); ``offered``: the branches the node's source offers (driver.offered_branches); ``needs``: gpu_needs();
    ``installed``: the upstream version of the driver our packages installed ("" when none). Raises KgnError
    when an explicit branch cannot drive the node's GPUs, or auto finds no branch that does."""
    requested = str(requested or AUTO)
    offered = sorted({str(b) for b in offered or []}, key=int)
    drivable = [b for b in offered if _drives(b, needs)]
    supported = [b for b in drivable if lifecycle.branch_lifecycle(b, today)["status"] == "supported"]
    if version:
        branch, how = nvidia.nvidia_upstream_version(str(version)).split(".")[0], "version"
        if requested not in (AUTO, branch):
            raise _fail(f"nvidia_driver_version {version} is not in nvidia_driver_branch {requested}; set both to "
                        "the same branch")
    elif requested != AUTO:
        branch, how = requested, "asked"
    elif installed and _drives(installed.split(".")[0], needs):
        branch, how = installed.split(".")[0], "installed"
    elif supported:
        branch, how = supported[-1], "auto"
    elif drivable:
        branch, how = drivable[-1], "auto (no branch the source offers is still supported by NVIDIA)"
    else:
        words = "; ".join(sorted({w for w in (_gpu_words(needs, b) for b in offered[:1] + offered[-1:]) if w}))
        older = bool(offered) and needs["last"] is not None and needs["last"] < int(offered[0])
        hint = ("a source that carries an older branch (nvidia_driver_source=distro, or a CUDA repository of an "
                "older release)" if older else "a source that carries a newer branch (nvidia_driver_source=cuda_repo)")
        raise _fail(f"nvidia_driver_branch=auto: no branch the source offers ({', '.join(offered) or 'none'}) drives "
                    f"this node's GPUs{': ' + words if words else ''}. Use {hint}, or set nvidia_driver_branch")
    if how in ("asked", "version") and needs["gpus"] and not _drives(branch, needs):
        also = "" if how == "asked" else " and nvidia_driver_version to match"
        raise _fail(f"nvidia_driver_branch {branch} cannot drive this node's GPUs: {_gpu_words(needs, branch)}. Set "
                    f"nvidia_driver_branch to a branch that drives them (or auto){also}")
    return {"branch": branch, "how": how, "lifecycle": lifecycle.branch_lifecycle(branch, today),
            "offered": offered, "newest_supported": supported[-1] if supported else "",
            "gpus": [_name(r) for r in needs["gpus"]]}


def choose_flavour(requested, branch, needs, open_offered=True):
    """The kernel module flavour and why: {flavour, how}. Raises KgnError for a node whose GPUs need both
    flavours, and for an explicit flavour that one of its GPUs cannot run with (naming the GPU)."""
    requested = str(requested or AUTO)
    number = int(branch)
    need_open, need_proprietary = ", ".join(needs["need_open"]), ", ".join(needs["need_proprietary"])
    if need_open and need_proprietary:
        raise _fail(f"this node's GPUs need both kernel module flavours, which one driver cannot load: {need_open} "
                    f"run only with the open modules, {need_proprietary} only with the proprietary ones. Put them "
                    "in different nodes")
    if requested == "open" and need_proprietary:
        raise _fail(f"nvidia_driver_kernel_module=open cannot drive {need_proprietary}: the open kernel modules need "
                    "Turing or newer. Set nvidia_driver_kernel_module to proprietary (or auto)")
    if requested == "proprietary" and need_open:
        raise _fail(f"nvidia_driver_kernel_module=proprietary cannot drive {need_open}: they run only with the open "
                    "kernel modules. Set nvidia_driver_kernel_module to open (or auto)")
    if requested == "proprietary" and number > nvidia.PROPRIETARY_LAST_BRANCH:
        raise _fail(f"nvidia_driver_kernel_module=proprietary: R{number} has no proprietary kernel modules "
                    f"(R{nvidia.PROPRIETARY_LAST_BRANCH} is the last branch with them). Set it to open (or auto)")
    if requested == "open" and number < nvidia.OPEN_MODULES_FIRST_BRANCH:
        raise _fail(f"nvidia_driver_kernel_module=open: the open kernel modules exist from "
                    f"R{nvidia.OPEN_MODULES_FIRST_BRANCH}; R{number} has only the proprietary ones")
    if requested != AUTO:
        return {"flavour": requested, "how": "asked"}
    if need_open:
        return {"flavour": "open", "how": f"auto: {need_open} run only with the open modules"}
    if need_proprietary:
        return {"flavour": "proprietary", "how": f"auto: {need_proprietary} need the proprietary modules"}
    if number > nvidia.PROPRIETARY_LAST_BRANCH:
        return {"flavour": "open", "how": f"auto: R{number} has only the open modules"}
    if number >= nvidia.OPEN_MODULES_DEFAULT_BRANCH and open_offered:
        unknown = "" if needs["known"] else " (no GPU facts recorded)"
        default = nvidia.OPEN_MODULES_DEFAULT_BRANCH
        return {"flavour": "open", "how": f"auto: the open modules are NVIDIA's default from R{default}{unknown}"}
    if not open_offered:
        return {"flavour": "proprietary", "how": "auto: the source packages no open modules for this platform"}
    return {"flavour": "proprietary",
            "how": f"auto: R{number} predates NVIDIA's open default (R{nvidia.OPEN_MODULES_DEFAULT_BRANCH})"}


def adopted_choice(version, flavour, source, needs, today=None):
    """A driver found on the node and kept: its branch and flavour as the node shows them (never assumed), and
    whether it drives the node's GPUs. Returns ({branch...}, {flavour...}, [problems])."""
    branch = str(version or "").split(".")[0]
    problems = []
    what = f"the driver found on the node ({version or 'version unknown'}, adopted)"
    if branch.isdigit() and needs["gpus"] and not _drives(branch, needs):
        problems.append(f"{what} cannot drive this node's GPUs: {_gpu_words(needs, branch)}")
    if flavour == "proprietary" and needs["need_open"]:
        problems.append(f"{what} runs the proprietary kernel modules; {', '.join(needs['need_open'])} run only with "
                        "the open ones")
    if flavour == "open" and needs["need_proprietary"]:
        problems.append(f"{what} runs the open kernel modules; {', '.join(needs['need_proprietary'])} need the "
                        "proprietary ones")
    record = {"branch": branch, "how": "adopted", "offered": [], "newest_supported": "",
              "lifecycle": lifecycle.branch_lifecycle(branch, today) if branch.isdigit() else {},
              "gpus": [_name(r) for r in needs["gpus"]]}
    how = (f"read from {source}" if flavour else
           "unknown: no module loaded and modinfo names none (a render or a node without the module)")
    return record, {"flavour": flavour or "unknown", "how": how}, problems
