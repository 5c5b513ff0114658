"""TOML through maintained libraries: this collection carries no TOML code of its own.

Writing happens on the control machine only, with tomli-w (requirements.txt): the runtime plan, the render and the
filters run there (the nvidia_container_runtime action plugin hands the node the bytes to write), so a render and
a run write the same bytes whatever Python the node has.

Reading uses the first of Python's own tomllib (3.11 and later: every control machine; Ubuntu 24.04 and later,
Debian 12 and later, EL 10 nodes), tomli (the same parser as a package: python3-tomli on Ubuntu 22.04 and EL 9,
pip on a control machine before 3.11) and toml (python3-toml on Debian 11, Ubuntu 20.04, EL 8 and 9; python36-toml
from EPEL on EL 7). A node reads TOML for one thing only: what its engine answers (``containerd config dump`` where
crictl is missing, ``crio status config``) in the health check of a change, where the decision to roll back is
made on the node. A node without any of them is refused before a change (NoReader names the package).
"""

import importlib
import sys

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

READERS = ("tomllib", "tomli", "toml")
PACKAGES = "python3-tomli or python3-toml (python36-toml from EPEL on EL 7)"


class NoReader(KgnError):
    """This Python has no TOML reader."""


def reader() -> str:
    """The name of the TOML reader this Python has ("" when none)."""
    for name in READERS:
        try:
            importlib.import_module(name)
            return name
        except ImportError:
            continue
    return ""


def no_reader_words(version: str = "") -> str:
    """Why a node cannot read TOML and what to install (``version``: the node's Python; this one's by default)."""
    version = version or ".".join(str(n) for n in sys.version_info[:3])
    return (f"Python {version} on this node cannot read TOML (tomllib is Python 3.11 and later; none of "
            f"{', '.join(READERS)} is installed): install {PACKAGES}")


def loads(text: str) -> dict:
    """The parsed document; ValueError when it is not TOML (all three readers raise a subclass of it), NoReader
    when this Python has none."""
    name = reader()
    if not name:
        raise NoReader(no_reader_words())
    return importlib.import_module(name).loads(text)


def dumps(document: dict) -> str:
    """The document as TOML (tomli-w, on the control machine)."""
    try:
        import tomli_w
    except ImportError:
        raise KgnError("writing TOML needs tomli-w on the control machine: pip install -r requirements.txt "
                       "(scripts/setup.sh does)") from None
    return tomli_w.dumps(document)
