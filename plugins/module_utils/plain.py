"""Deep copy of a value into plain builtin types, shared by the filters.

ansible-core 2.19 hands filters tagged subclasses of str/dict/list and stores what they return; a
filter's result must be plain str/int/float/bool/None/list/dict to survive that. TOML dates become
ISO strings.
"""

from __future__ import annotations

import datetime


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
