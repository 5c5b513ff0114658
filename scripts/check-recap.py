#!/usr/bin/env python3
"""Read an ansible-playbook output and check its PLAY RECAP.

  check-recap.py --unchanged OUTPUT   every host ok, changed=0, failed=0, unreachable=0
  check-recap.py --no-failures OUTPUT  every host failed=0, unreachable=0 (a --check run may plan changes)
  check-recap.py --hosts OUTPUT       print the hosts that appear in the recap
"""

from __future__ import annotations

import re
import sys

RECAP_LINE = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")


def recap(text: str) -> dict[str, dict[str, int]]:
    """Return {host: {ok: n, changed: n, ...}} from the last PLAY RECAP in the output."""
    section = text.rsplit("PLAY RECAP", 1)[-1] if "PLAY RECAP" in text else ""
    hosts = {}
    for line in section.splitlines():
        match = RECAP_LINE.match(line.strip())
        if match:
            hosts[match["host"]] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match["counts"])}
    return hosts


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("--unchanged", "--no-failures", "--hosts"):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[2], encoding="utf-8") as handle:
        hosts = recap(handle.read())
    if not hosts:
        print("no PLAY RECAP found", file=sys.stderr)
        return 1
    if argv[1] == "--hosts":
        print("\n".join(sorted(hosts)))
        return 0
    counted = ("failed", "unreachable") if argv[1] == "--no-failures" else ("changed", "failed", "unreachable")
    bad = {h: c for h, c in hosts.items() if any(c.get(key) for key in counted)}
    for host, counts in sorted(hosts.items()):
        print(f"{host}: changed={counts.get('changed')} failed={counts.get('failed')}")
    if bad:
        what = "failed or unreachable" if argv[1] == "--no-failures" else "not idempotent or failing"
        print(f"{what}: {', '.join(sorted(bad))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
