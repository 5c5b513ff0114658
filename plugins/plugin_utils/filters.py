"""Controller-side glue for the filter plugins: pure functions in, AnsibleFilterError out."""

from __future__ import annotations

import functools

from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError


def _filter(name, function):
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except KgnError as err:
            message = str(err)
            raise AnsibleFilterError(message if message.startswith(f"{name}:") else f"{name}: {message}") from None

    return call


def wrap(functions: dict) -> dict:
    """Return ``{name: function}`` with every KgnError raised as AnsibleFilterError naming the filter."""
    return {name: _filter(name, function) for name, function in functions.items()}
