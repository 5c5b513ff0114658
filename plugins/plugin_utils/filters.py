"""Controller-side glue for the filter plugins: pure functions in, AnsibleFilterError out."""

from __future__ import annotations

import functools

from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from jinja2 import Undefined


def _filter(name, function):
    @functools.wraps(function)
    def call(*args, **kwargs):
        # ansible-core 2.16 hands a filter the undefined variable itself (2.19 fails before the call): say which
        # variable is undefined, as 2.19 does, rather than that the value has the wrong type
        for value in (*args, *kwargs.values()):
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()
        try:
            return function(*args, **kwargs)
        except KgnError as err:
            message = str(err)
            raise AnsibleFilterError(message if message.startswith(f"{name}:") else f"{name}: {message}") from None

    return call


def wrap(functions: dict) -> dict:
    """Return ``{name: function}`` with every KgnError raised as AnsibleFilterError naming the filter."""
    return {name: _filter(name, function) for name, function in functions.items()}


def filter_module(functions: dict) -> type:
    """The ``FilterModule`` class Ansible's filter loader asks of a filter plugin file: its filters are
    ``functions``, wrapped (see wrap). A filter file is then its imports and this one call."""
    wrapped = wrap(functions)
    return type("FilterModule", (), {"filters": lambda self: dict(wrapped)})
