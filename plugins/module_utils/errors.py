"""The one error type of the project's pure code.

module_utils runs on the controller (filters, action plugins) and on the nodes (modules), so it
cannot raise Ansible's controller exceptions. Everything it refuses is a ``KgnError`` whose message
says what was given, what is accepted and what to change; filters turn it into AnsibleFilterError
and modules into ``fail_json``.
"""


class KgnError(ValueError):
    """A value or a node state the project refuses, with a message a user can act on."""
