"""Deep copy of a value into plain builtin types, shared by the filters.

ansible-core 2.19 hands filters tagged subclasses of str/dict/list and stores what they return; a
filter's result must be plain str/int/float/bool/None/list/dict to survive that. TOML dates become
ISO strings.
"""

import datetime

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

NOT_TEXT = "\ufffd"  # what host.read puts where a file has bytes that are not UTF-8


class NotPlainError(TypeError):
    """A value with no plain equivalent (a set, an object, ...)."""


def to_plain(value: object) -> object:
    """Return ``value`` rebuilt from builtin types only; raise NotPlainError for anything else."""
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if value is None or isinstance(value, bool):
        return value
    for kind in (int, float, str):
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    raise NotPlainError(f"{value!r} ({type(value).__name__})")


def require_text(text: str, what: str) -> str:
    """``text`` as it is, or KgnError when the file it was read from holds bytes that are not UTF-8 (a damaged
    or binary file): such a file is never parsed, merged and written back."""
    position = text.find(NOT_TEXT)
    if position >= 0:
        raise KgnError(f"{what} is not UTF-8 text (character {position + 1} is a byte that is not text: damaged?); "
                       "it was left as it is: fix or restore it and run again")
    return text


def require_bool(value: object, what: str) -> bool:
    """``value`` when it is true or false; otherwise KgnError naming ``what`` (a role input given "yes" as text, or
    a number, is refused rather than guessed)."""
    if not isinstance(value, bool):
        raise KgnError(f"{what} must be true or false, got {value!r}")
    return value
