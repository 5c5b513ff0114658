"""node_state module, run for real on this machine through `ansible localhost -m`."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run(args: dict, check: bool = False) -> dict:
    cmd = ["ansible", "localhost", "-m", "kgn.gpu_nodes.node_state", "-a", json.dumps(args), "-o"]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env=dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="0"))
    # "localhost | SUCCESS => {...}" (one line with -o)
    line = proc.stdout.strip()
    return {"status": line.split(" | ")[1].split(" ")[0], **json.loads(line.split(" => ", 1)[1])}


def test_files_are_described_and_hashed(tmp_path):
    wanted = tmp_path / "a.conf"
    wanted.write_text("options nouveau modeset=0\n", encoding="utf-8")
    wanted.chmod(0o640)
    (tmp_path / "link").symlink_to(wanted)
    result = run({"files": [str(wanted), str(tmp_path / "missing"), str(tmp_path / "link"), str(tmp_path)]})
    assert result["status"] == "SUCCESS" and result["changed"] is False
    files = result["files"]
    assert files[str(wanted)]["sha1"] == hashlib.sha1(wanted.read_bytes()).hexdigest()
    assert files[str(wanted)]["mode"] == "0640"
    assert files[str(tmp_path / "missing")] == {"exists": False}
    assert files[str(tmp_path / "link")]["type"] == "link" and "sha1" not in files[str(tmp_path / "link")]
    assert files[str(tmp_path)]["type"] == "directory"


def test_read_takes_paths_and_globs(tmp_path):
    (tmp_path / "one.list").write_text("deb http://deb.debian.org/debian trixie main\n", encoding="utf-8")
    (tmp_path / "two.sources").write_text("Types: deb\n", encoding="utf-8")
    (tmp_path / "bad.list").write_bytes(b"\xff\xfe not utf-8\n")
    result = run({"read": [f"{tmp_path}/*.list", str(tmp_path / "two.sources"), f"{tmp_path}/*.none"]})
    assert sorted(result["contents"]) == sorted(str(tmp_path / n) for n in ("one.list", "bad.list", "two.sources"))
    assert result["contents"][str(tmp_path / "two.sources")] == "Types: deb\n"
    assert "not utf-8" in result["contents"][str(tmp_path / "bad.list")]


def test_commands_as_argv_and_bash_with_missing_tools_as_rc_127():
    result = run({"commands": {
        "argv": ["echo", "$HOME stays literal"],
        "bash": "printf 'a\\nb\\n' | grep b; false | true",
        "missing": ["kgn-no-such-tool", "--version"],
    }}, check=True)
    commands = result["commands"]
    assert commands["argv"] == {"rc": 0, "stdout": "$HOME stays literal\n", "stderr": ""}
    assert commands["bash"]["stdout"] == "b\n"
    assert commands["bash"]["rc"] == 1  # pipefail: a failing stage is not hidden
    assert commands["missing"]["rc"] == 127


def test_a_command_of_the_wrong_type_is_refused():
    result = run({"commands": {"bad": 3}})
    assert result["status"] == "FAILED!"
    assert "commands.bad must be a non-empty string" in result["msg"]
