"""Whether the package manager is consistent, and the repair of what is ours when it is safe.

A dpkg killed in the middle of an install leaves packages half-installed (``iFR``: half-configured, reinstall
required) or unpacked (``iU``), and ``apt-get check`` says "dpkg was interrupted". A node in that state still
runs, but the next apt-get of anyone fails, and the half-configured files may be a mix of two versions. On rpm
nodes an interrupted transaction leaves two versions of one package in the rpm database (yum/dnf then refuse
to upgrade it) or, with yum, a saved transaction (``/var/lib/yum/transaction-all.*``).

The parsers and ``health_plan`` are pure (unit-tested on real output); ``read`` and ``repair`` run the commands
on the node for the nvidia_container_toolkit and nvidia_driver modules. The repair touches only the packages the
calling module owns ("ours"), and only when every inconsistent package is ours: ``dpkg --configure -a`` to
finish what was unpacked, then the pinned versions of what is still broken put back with ``dpkg -i`` of the
archives ``apt-get download`` fetched (apt-get install refuses to run while dpkg is interrupted); on rpm nodes
the package is reinstalled at its pinned version. Holds are the caller's: after a repair it holds again.
"""

import glob
import hashlib
import json
import os
import re
import tempfile

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host

# dpkg's status letters (the second column of db:Status-Abbrev) that are not "installed", with their words.
DPKG_STATES = {
    "H": "half-installed", "U": "unpacked but not configured", "F": "half-configured",
    "W": "awaiting triggers", "t": "triggers pending",
}
YUM_SAVED = "/var/lib/yum/transaction-all.*"


def parse_status(text: object) -> dict:
    """``dpkg-query -W -f='${db:Status-Abbrev}|${Package}|${Version}\\n'`` -> ``{name: {abbrev, version, state,
    reinstall}}`` for every package dpkg knows (installed or not). ``state`` is dpkg's word for an inconsistent
    package ("" when installed or absent); ``reinstall`` is the R flag (reinstall required)."""
    packages = {}
    for line in str(text or "").splitlines():
        parts = line.split("|")
        if len(parts) != 3 or len(parts[0].rstrip()) < 2 or not parts[1]:
            continue
        abbrev = parts[0].rstrip()
        packages[parts[1]] = {"abbrev": abbrev, "version": parts[2], "state": DPKG_STATES.get(abbrev[1], ""),
                              "reinstall": abbrev[2:3] == "R"}
    return packages


def parse_audit(text: object) -> list:
    """The package names ``dpkg --audit`` lists (it prints a sentence, then one `` name  description`` per line)."""
    names = []
    for line in str(text or "").splitlines():
        match = re.match(r"^ (\S+)", line)
        if match and match.group(1) not in names:
            names.append(match.group(1))
    return names


LOCKED = re.compile(r"Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock|is another process")


def parse_apt_check(rc: object, text: object) -> list:
    """The errors of ``apt-get check`` (its ``E:`` lines; empty when it exits 0). Another apt holding the lock is
    not an inconsistency (the install step waits for it)."""
    if rc == 0 or rc is None:
        return []
    errors = [line[2:].strip() for line in str(text or "").splitlines() if line.startswith("E:")]
    errors = errors or [(str(text or "").strip().splitlines() or ["apt-get check failed"])[-1]]
    return [err for err in errors if not LOCKED.search(err)]


def parse_rpm_versions(text: object) -> dict:
    """``rpm -q --qf '%{NAME}=%{VERSION}-%{RELEASE}\\n' names`` -> ``{name: [versions]}``: two versions of one
    name are what an interrupted yum/dnf transaction leaves."""
    found: dict = {}
    for line in str(text or "").splitlines():
        line = line.strip()
        if "=" in line and " " not in line:
            name, version = line.split("=", 1)
            found.setdefault(name, [])
            if version not in found[name]:
                found[name].append(version)
    return found


def health_plan(family: str, state: dict, ours: object, pins: object) -> dict:
    """What is inconsistent and what to do about it.

    ``state`` (from ``read``): deb: ``status`` (parse_status), ``audit`` [names], ``check`` [apt-get check errors];
    rpm: ``versions`` {name: [versions]}, ``saved_transactions`` [paths]. ``ours``: the package names the caller
    owns; ``pins``: {name: version or version prefix} to put back (the version dpkg recorded when it is that pin,
    else ``<pin>*``). Returns ``{consistent, problems, broken, foreign, repair: {configure,
    reinstall: [{name, version}]}, refusal, note}``: the repair is planned only when no foreign package is
    broken; when only foreign ones are, the caller's packages are consistent (``note`` says what is not).
    """
    ours = list(ours or [])
    pins = dict(pins or {})
    problems, broken = [], []
    if family == "deb":
        status = state.get("status") or {}
        for name, info in sorted(status.items()):
            if info["state"] or info["reinstall"]:
                words = info["state"] or "marked for reinstallation"
                problems.append(f"{name} {info['version']} is {words} ({info['abbrev']})"
                                + (", reinstall required" if info["reinstall"] and info["state"] else ""))
                broken.append(name)
        for name in state.get("audit") or []:
            if name not in broken:
                problems.append(f"dpkg --audit lists {name}")
                broken.append(name)
        problems += [f"apt-get check: {err.rstrip('. ')}" for err in state.get("check") or []]
    else:
        for name, versions in sorted((state.get("versions") or {}).items()):
            if len(versions) > 1:
                problems.append(f"{name} is in the rpm database twice ({', '.join(versions)}): an interrupted "
                                "transaction")
                broken.append(name)
        problems += [f"yum has an unfinished transaction ({path})" for path in state.get("saved_transactions") or []]
    foreign = [name for name in broken if name not in ours]
    if broken and not [name for name in broken if name in ours]:
        # only other packages are inconsistent: not this caller's to repair nor a reason to stop (another role
        # owns them, or the administrator does); said, and the caller goes on
        return {"consistent": True, "problems": [], "broken": broken, "foreign": foreign, "refusal": "",
                "note": f"the package manager is not consistent ({'; '.join(problems)}): not this role's packages, "
                        "left as they are",
                "repair": {"configure": False, "reinstall": []}}
    consistent = not problems
    refusal = ""
    if foreign:
        refusal = (f"the package manager is not consistent and {', '.join(foreign)} are not this role's packages, "
                   "so they are left to you: "
                   + ("run `dpkg --configure -a` (and `apt-get -f install`) " if family == "deb"
                      else "run `yum-complete-transaction` or `dnf remove --duplicates` ")
                   + "and run again. Found: " + "; ".join(problems))
    elif problems and family == "rpm" and state.get("saved_transactions"):
        refusal = ("yum has an unfinished transaction: run `yum-complete-transaction` (or "
                   "`yum-complete-transaction --cleanup-only`) and run again. Found: " + "; ".join(problems))
    reinstall = []
    for name in broken:
        if name not in ours:
            continue
        pin = str(pins.get(name) or "")
        if family == "rpm":
            version = pin or ((state.get("versions") or {}).get(name) or [""])[-1]
        else:
            recorded = ((state.get("status") or {}).get(name) or {}).get("version") or ""
            version = recorded if recorded and (not pin or recorded.startswith(pin)) else (f"{pin}*" if pin else "")
        if version:
            reinstall.append({"name": name, "version": version})
    return {
        "consistent": consistent,
        "problems": problems,
        "broken": broken,
        "foreign": foreign,
        "refusal": refusal,
        "note": "",
        "repair": {"configure": family == "deb" and bool(problems) and not refusal,
                   "reinstall": [] if refusal else reinstall},
    }


# --- on the node ----------------------------------------------------------------------------------


def read(module, family, names):
    """The package manager's state for ``health_plan``; ``names``: the packages the caller asks about."""
    if family == "deb":
        fmt = "${db:Status-Abbrev}|${Package}|${Version}\n"
        _, out, _ = host.run(module, ["dpkg-query", "-W", "-f", fmt, *names])
        _, audit, _ = host.run(module, ["dpkg", "--audit"])
        return {"status": parse_status(out), "audit": parse_audit(audit), "check": apt_check(module)}
    _, out, _ = host.run(module, ["rpm", "-q", "--qf", "%{NAME}=%{VERSION}-%{RELEASE}\n", *names])
    return {"versions": parse_rpm_versions(out), "saved_transactions": sorted(glob.glob(YUM_SAVED))}


DPKG_INFO = "/var/lib/dpkg/info"
DPKG_STATUS = "/var/lib/dpkg/status"
VERIFY_CACHE = "/var/lib/kgn/dpkg-verify.json"
APT_CHECK_CACHE = "/var/lib/kgn/apt-check.json"


def _load(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _save(module, path, data):
    """Write a cache of ours atomically; never in check mode. One it cannot write only costs the next run time."""
    if getattr(module, "check_mode", False):
        return
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".kgn-cache.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(temp, path)
    except OSError:
        pass


def _stat_key(path):
    """What changes whenever a file is replaced or written: size, mtime, ctime, inode."""
    info = os.stat(path)
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


def apt_check(module, cache_path=None):
    """The errors of ``apt-get check`` (parse_apt_check). It reads every installed package's dependencies (about
    0.5 s of a core), so a clean answer is kept with the stat of dpkg's status file: dpkg replaces that file on every
    change, and while it is the same file the answer cannot differ (dpkg --audit, run every time, sees an interrupted
    dpkg). An unclean answer is never kept."""
    cache_path = cache_path or APT_CHECK_CACHE
    try:
        key = _stat_key(DPKG_STATUS)
    except OSError:
        key = None
    if key is not None and _load(cache_path) == {"clean_at": key}:
        return []
    rc, out, err = host.run(module, ["apt-get", "check", "-q"], timeout=120)
    problems = parse_apt_check(rc, (err or "") + (out or ""))
    if not problems and rc == 0 and key is not None:
        _save(module, cache_path, {"clean_at": key})
    return problems


def _md5(path):
    digest = hashlib.md5()  # dpkg's own checksum (a node whose FIPS mode refuses it is left to dpkg --verify)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _checksum_lists():
    """{package: [its checksum lists in dpkg's info folder]} (``<package>.md5sums``, then ``<package>:<arch>.md5sums``)
    from one listing of the folder: a glob per package read the whole folder (hundreds of files) each time."""
    try:
        files = sorted(os.listdir(DPKG_INFO))
    except OSError:
        return {}
    found = {}
    for file in files:
        if file.endswith(".md5sums") and not file.startswith("."):
            base = file[: -len(".md5sums")]
            found.setdefault(base.split(":", 1)[0], []).append((":" in base, f"{DPKG_INFO}/{file}"))
    return {name: [path for _, path in sorted(lists)] for name, lists in found.items()}


def dpkg_verify(module, names, cache_path=None):
    """What ``dpkg --verify <names>`` prints for the packages' files (``missing  /path``, ``??5?????? /path``), from
    dpkg's own lists of checksums (``<package>[:<arch>].md5sums``), with a stat cache: a file whose size, mtime, ctime
    and inode are the ones it had when it last matched its checksum is not read again. A file replaced or edited in
    place gets a new ctime (which no user can set back), so it is checksummed again. dpkg --verify reads every file
    of the driver stack on every run (about 2 s of a core per node). A conffile (the package's ``.conffiles``: the
    administrator's to change) is only checked for presence and marked ``c``, as dpkg marks it. A package without a
    checksum list goes to dpkg --verify itself. Check mode reads the cache but never writes it."""
    cache_path = cache_path or VERIFY_CACHE
    cache = _load(cache_path)
    cache = cache if isinstance(cache, dict) else {}
    lines, fresh, unlisted, checked = [], {}, [], set()
    try:
        hashlib.md5()
    except ValueError:  # FIPS mode
        unlisted, names = list(names), []
    checksum_lists = _checksum_lists()
    for name in names:
        lists = checksum_lists.get(name, [])
        if not lists:
            unlisted.append(name)
            continue
        for listed in lists:
            with open(listed, encoding="utf-8", errors="replace") as handle:
                entries = [line.split(None, 1) for line in handle if line.strip()]
            conffiles = set((host.read(listed[: -len(".md5sums")] + ".conffiles") or "").split())
            for want, rel in (e for e in entries if len(e) == 2):
                path = "/" + rel.strip()
                if path in conffiles:  # the administrator's to change: only its absence is said, as dpkg marks it
                    if not os.path.lexists(path):
                        lines.append(f"missing   c {path}")
                    continue
                checked.add(path)
                try:
                    key = _stat_key(path)
                except OSError:
                    lines.append(f"missing     {path}")
                    continue
                if cache.get(path) == [want, key]:
                    fresh[path] = cache[path]
                    continue
                try:
                    same = _md5(path) == want
                except OSError:
                    lines.append(f"missing     {path}")
                    continue
                if same:
                    fresh[path] = [want, key]
                else:
                    lines.append(f"??5??????   {path}")
    if unlisted:
        _, out, _ = host.run(module, ["dpkg", "--verify", *unlisted], timeout=300)
        lines += (out or "").splitlines()
    # the other packages' entries stay (the driver and the toolkit modules share the cache)
    kept = {path: entry for path, entry in cache.items() if path not in checked}
    if {**kept, **fresh} != cache:
        _save(module, cache_path, {**kept, **fresh})
    return "\n".join(lines) + ("\n" if lines else "")


def _ok(module, argv, timeout=900):
    rc, out, err = host.run(module, argv, timeout=timeout)
    return rc == 0, host.errors_in(((err or "") + "\n" + (out or "")).splitlines()) or [(err or out or "").strip()]


def repair(module, family, plan, done, pkg_mgr="dnf"):
    """Run the planned repair; each step goes into ``done`` before it runs (a step that fails is still said).
    Returns the repairs in words. Raises RuntimeError with the tool's words when the node stays inconsistent."""
    said = []
    if family == "deb":
        items = plan["repair"]["reinstall"]
        if plan["repair"]["configure"]:
            done.append("dpkg --configure -a (finish the interrupted dpkg)")
            ok, words = _ok(module, ["dpkg", "--configure", "-a"])
            # what is still inconsistent now (a half-installed package needs its archive again)
            fmt = "${db:Status-Abbrev}|${Package}|${Version}\n"
            _, out, _ = host.run(module, ["dpkg-query", "-W", "-f", fmt, *[i["name"] for i in items]])
            status = parse_status(out)
            items = [i for i in items if (status.get(i["name"]) or {}).get("state")
                     or (status.get(i["name"]) or {}).get("reinstall")]
            packages = [p for p in plan["problems"] if not p.startswith(("apt-get check", "dpkg --audit"))]
            if ok:
                said.append(f"dpkg was interrupted ({'; '.join(packages)}): finished with dpkg --configure -a")
        if items:
            specs = [f"{i['name']}={i['version']}" for i in items]
            folder = tempfile.mkdtemp(prefix="kgn-pkg-")
            try:
                done.append(f"apt-get download {' '.join(specs)}; dpkg -i of them (put back at the pinned versions)")
                ok, words = _ok(module, ["sh", "-c", 'cd "$1" && shift && exec apt-get download -q "$@"', "sh",
                                         folder, *specs])
                if not ok:
                    raise RuntimeError(f"apt-get download {' '.join(specs)} failed: {' | '.join(words)}")
                debs = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".deb"))
                ok, words = _ok(module, ["dpkg", "-i", "--force-confdef", "--force-confold", *debs])
                if not ok:
                    raise RuntimeError(f"dpkg -i {' '.join(os.path.basename(d) for d in debs)} failed: "
                                       f"{' | '.join(words)}")
            finally:
                for name in os.listdir(folder):
                    os.unlink(os.path.join(folder, name))
                os.rmdir(folder)
            said.append(f"reinstalled {', '.join(specs)} (left {', '.join(plan['broken'])} inconsistent by an "
                        "interrupted dpkg)")
        return said
    for item in plan["repair"]["reinstall"]:
        spec = f"{item['name']}-{item['version']}"
        done.append(f"{pkg_mgr} reinstall {spec}")
        ok, words = _ok(module, [pkg_mgr, "reinstall", "-y", spec])
        if not ok:
            raise RuntimeError(f"{pkg_mgr} reinstall {spec} failed: {' | '.join(words)}")
        said.append(f"reinstalled {spec} (it was in the rpm database twice)")
    return said
