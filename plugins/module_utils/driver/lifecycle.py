"""Lifecycles the driver run reports: operating system releases and NVIDIA's datacenter driver branches.

Pure data and date arithmetic (no I/O, Python 3.6 grammar: it runs on the nodes inside the nvidia_driver
module). Each row names its source; docs/driver-branches.md gives the upstream addresses.

``os_lifecycle(os_release, today)``  where a release stands: supported, past its end of life (with the
                                      vendor's extended support, if any), or unknown to the table; and the
                                      family's current releases.
``branch_lifecycle(branch, today)``   whether NVIDIA still supports a datacenter driver branch.
"""

import datetime
import re

# --- operating systems -------------------------------------------------------------------------------
# os-release ID -> name, source, releases {major: (end of life, extended support until, extended support name)}.
# "End of life" is the end of the vendor's standard (Debian: regular security; Ubuntu: standard; RHEL:
# maintenance) support; the extended column is what the vendor offers after it (Debian LTS, Ubuntu ESM
# with Ubuntu Pro, Red Hat ELS, Oracle Extended Support), "" when nothing. Dates as the vendors publish
# them, collected in endoflife.date's products/<name>.md (commit a70eca33, 2026-08-22), which cites each
# vendor page named in "source".
REBUILD_RELEASES = {"8": ("2029-05-31", "", ""), "9": ("2032-05-31", "", ""), "10": ("2035-05-31", "", "")}
OS_RELEASES = {
    "debian": {
        "name": "Debian",
        "source": "https://wiki.debian.org/DebianReleases, https://wiki.debian.org/LTS",
        "releases": {"12": ("2026-07-11", "2028-06-30", "Debian LTS"),
                     "13": ("2028-08-09", "2030-06-30", "Debian LTS")},
    },
    "ubuntu": {
        "name": "Ubuntu",
        "source": "https://ubuntu.com/about/release-cycle",
        "releases": {"20": ("2025-05-31", "2030-04-02", "Ubuntu Pro ESM"),
                     "22": ("2027-04-01", "2032-04-09", "Ubuntu Pro ESM"),
                     "24": ("2029-05-31", "2036-05-31", "Ubuntu Pro ESM"),
                     "26": ("2031-04-30", "2036-04-30", "Ubuntu Pro ESM")},
        "names": {"20": "20.04 LTS", "22": "22.04 LTS", "24": "24.04 LTS", "26": "26.04 LTS"},
    },
    "rhel": {
        "name": "Red Hat Enterprise Linux",
        "source": "https://access.redhat.com/support/policy/updates/errata",
        "releases": {"7": ("2024-06-30", "2029-05-31", "Red Hat ELS"),
                     "8": ("2029-05-31", "2033-05-31", "Red Hat ELS"),
                     "9": ("2032-05-31", "2036-05-31", "Red Hat ELS"),
                     "10": ("2035-05-31", "2039-05-31", "Red Hat ELS")},
    },
    "centos": {
        "name": "CentOS Linux",
        "source": "https://blog.centos.org/2023/04/end-dates-are-coming-for-centos-stream-8-and-centos-linux-7/",
        "releases": {"7": ("2024-06-30", "", ""),
                     "8": ("2021-12-31", "", "")},
        # CentOS Linux has no current release: its users moved to CentOS Stream, RHEL and its rebuilds
        "successors": "none (CentOS Linux ended; RHEL, Rocky Linux and AlmaLinux 9 and 10 carry on)",
    },
    # the rebuilds of RHEL end each release with RHEL's standard support, and sell no extended support of their own
    "rocky": {"name": "Rocky Linux", "source": "https://wiki.rockylinux.org/rocky/version/",
              "releases": REBUILD_RELEASES},
    "almalinux": {"name": "AlmaLinux", "source": "https://wiki.almalinux.org/release-notes/",
                  "releases": REBUILD_RELEASES},
    "ol": {
        "name": "Oracle Linux",
        "source": "https://www.oracle.com/a/ocom/docs/elsp-lifetime-069338.pdf",
        # Oracle publishes no end date for Oracle Linux 10 yet (endoflife.date: eol false)
        "releases": {"7": ("2024-12-31", "2028-06-30", "Oracle Extended Support"),
                     "8": ("2029-07-31", "2032-07-31", "Oracle Extended Support"),
                     "9": ("2032-06-30", "2035-06-30", "Oracle Extended Support"),
                     "10": ("", "", "")},
    },
}

# --- NVIDIA datacenter driver branches ---------------------------------------------------------------
# NVIDIA's "Supported Drivers and CUDA Toolkit Versions" (docs.nvidia.com/datacenter/tesla/drivers/
# supported-drivers-and-cuda-toolkit-versions.html, two revisions read): branch -> (designation, end of life
# as the page gives it, a month). LTSB: long term support branch, PB: production branch, NFB: new feature
# branch. The page calls every branch it no longer lists end of life and names them (ENDED).
BRANCHES = {
    "535": ("LTSB", "2026-06"),
    "570": ("PB", "2026-02"),
    "580": ("LTSB", "2028-08"),
    "595": ("PB", "2027-03"),
    "610": ("NFB", "2026-08"),
}
ENDED = ("410", "418", "440", "450", "455", "460", "465", "470", "495", "510", "515", "525", "550", "560", "565",
         "575")
BRANCH_SOURCE = "https://docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html"


def parse_date(value):
    """'2026-06-30' -> date; '2026-06' -> the last day of that month; anything else raises ValueError."""
    text = str(value or "")
    found = re.match(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$", text)
    if not found:
        raise ValueError(f"not a date: {value!r}")
    year, month = int(found.group(1)), int(found.group(2))
    if found.group(3):
        return datetime.date(year, month, int(found.group(3)))
    first_of_next = datetime.date(year + month // 12, month % 12 + 1, 1)
    return first_of_next - datetime.timedelta(days=1)


def _today(today):
    if today is None:
        return datetime.date.today()
    return today if isinstance(today, datetime.date) else parse_date(today)


def _major(os_release):
    return str((os_release or {}).get("version_id") or "").split(".")[0]


def os_lifecycle(os_release, today=None):
    """Where the node's OS release stands on ``today`` (a date or 'YYYY-MM-DD'; default: the clock).

    Returns {name, release, status: supported|eol|unknown, eol, extended, extended_until, source, current,
    message}: ``current`` lists the family's releases still in standard support; ``message`` is the line the
    run and the report print (empty while supported)."""
    os_release = os_release or {}
    os_id = str(os_release.get("id") or "").lower()
    major = _major(os_release)
    day = _today(today)
    family = OS_RELEASES.get(os_id)
    result = {"name": os_id or "unknown", "release": major, "status": "unknown", "eol": "", "extended": "",
              "extended_until": "", "source": "", "current": [], "message": ""}
    if not family:
        return result
    result.update(name=family["name"], source=family["source"])
    result["current"] = sorted((m for m, row in family["releases"].items() if not row[0] or parse_date(row[0]) >= day),
                               key=int)
    row = family["releases"].get(major)
    if row is None:
        return result
    eol, until, extended = row
    result.update(eol=eol, extended=extended, extended_until=until)
    if not eol or parse_date(eol) >= day:
        result["status"] = "supported"
        return result
    result["status"] = "eol"
    names = family.get("names") or {}
    current = (", ".join(f"{family['name']} {names.get(m, m)}" for m in result["current"])
               or family.get("successors") or "none")
    after = f" ({extended} until {until})" if until and parse_date(until) >= day else " (no vendor support left)"
    result["message"] = (f"{family['name']} {names.get(major, major)} is past its end of life since {eol}{after}, per "
                         f"{family['source']}; current releases: {current}. It keeps working as it did")
    return result


def branch_lifecycle(branch, today=None):
    """Whether NVIDIA still supports driver ``branch`` on ``today``: {branch, status: supported|ended|unlisted,
    designation, eol (YYYY-MM or ""), source}."""
    branch = str(branch)
    day = _today(today)
    if branch in BRANCHES:
        designation, eol = BRANCHES[branch]
        status = "supported" if parse_date(eol) >= day else "ended"
        return {"branch": branch, "status": status, "designation": designation, "eol": eol, "source": BRANCH_SOURCE}
    status = "ended" if branch in ENDED or (branch.isdigit() and int(branch) < 535) else "unlisted"
    return {"branch": branch, "status": status, "designation": "", "eol": "", "source": BRANCH_SOURCE}
