"""A stand-in for Ansible's ``hostvars`` that counts its reads: in ansible-core each ``hostvars[host]`` builds every
variable of that host (its cached facts decoded and copied), so the filters that take ``hostvars`` are tested for
how often they read it."""

from __future__ import annotations


class CountingHostvars(dict):
    """``hostvars`` as a dict of each host's variables; ``reads`` lists the hosts read, in order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = []

    def __getitem__(self, host):
        self.reads.append(host)
        return super().__getitem__(host)
