"""What the stand-in nvidia-smi recorded: the command sequence of converge, none of idempotence, and a refused misfit
layout that ran no mutating command and left the GPUs as they were."""

import json

testinfra_hosts = ["kgn-mig-bookworm"]

MUTATING = ("-mig", "--gpu-reset", "-cgi", "-cci", "-dci", "-dgi")


def _mutating(text):
    return [line for line in text.splitlines() if any(f" {flag}" in f" {line} " for flag in MUTATING)]


def test_converge_ran_the_commands_in_order(host):
    changes = _mutating(host.file("/root/converge.log").content_string)
    assert changes[:2] == ["nvidia-smi -i 0 -mig 1", "nvidia-smi -i 0 --gpu-reset"]
    assert changes[2].startswith("nvidia-smi mig -i 0 -cgi ") and changes[2].endswith(" -C")
    # largest-first creation would leave the second 1g.5gb without room: the plan orders them so all four fit
    assert sorted(changes[2].split()[5].split(",")) == ["14", "19", "19", "9"]
    assert changes[3:] == ["nvidia-smi -i 1 -mig 1", "nvidia-smi -i 1 --gpu-reset", "nvidia-smi mig -i 1 -cgi 0 -C"]


def test_idempotence_run_changed_nothing(host):
    log = host.file("/root/converge.log").content_string.splitlines()
    # the last run (idempotence) only read: -q -x then the listings
    last = log[log.index("nvidia-smi mig -i 1 -cgi 0 -C") + 1:]
    assert last and not _mutating("\n".join(last))


def test_layout_is_live(host):
    state = json.loads(host.file("/root/state-before-refusal.json").content_string)
    gpu0, gpu1 = state["gpus"]
    assert (gpu0["mig_current"], gpu1["mig_current"]) == ("Enabled", "Enabled")
    assert sorted(gi["name"] for gi in gpu0["gis"]) == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert all(len(gi["cis"]) == 1 for gi in gpu0["gis"] + gpu1["gis"])
    assert [gi["name"] for gi in gpu1["gis"]] == ["7g.40gb"]


def _refused_without_change(host, refusal, log, before, after):
    """The refusal's text; the stand-in's log shows only reads, and the GPUs' state after is the state before."""
    text = host.file(log).content_string
    assert "nvidia-smi -q -x" in text and not _mutating(text)
    assert json.loads(host.file(before).content_string) == json.loads(host.file(after).content_string)
    return host.file(refusal).content_string


def test_misfit_layout_refused_without_change(host):
    refusal = _refused_without_change(host, "/root/refusal.txt", "/root/refusal.log",
                                      "/root/state-before-refusal.json", "/root/state-after-refusal.json")
    assert "GPU 0 (NVIDIA A100-PCIE-40GB): profiles 4g.20gb, 3g.20gb, 1g.5gb do not fit one A100-40GB GPU" in refusal
    assert "what fits: 4g.20gb, 3g.20gb (no room left)" in refusal


def test_busy_gpu_refused_without_change(host):
    refusal = _refused_without_change(host, "/root/busy-refusal.txt", "/var/log/kgn-lab/nvidia-smi.log",
                                      "/root/state-before-busy.json", "/var/lib/kgn-lab/nvidia-smi/state.json")
    assert "GPU 0 runs processes (pid 4242) and a MIG change needs idle GPUs" in refusal
    assert "Nothing was changed" in refusal


def test_check_mode_predicts_with_a_diff_and_changes_nothing(host):
    # the role's planning task (check mode, its result registered); with --check it reports changed itself
    result = json.loads(host.file("/root/check-mode.json").content_string)
    assert result["plan"]["changed"] is True
    assert result["diff"]["before"].startswith("GPU 0 (NVIDIA A100-PCIE-40GB): MIG 1g.5gb, 1g.5gb, 2g.10gb, 3g.20gb")
    assert "GPU 1 (NVIDIA A100-PCIE-40GB): MIG 7g.40gb" in result["diff"]["before"]
    assert result["diff"]["after"].count("MIG 1g.5gb, 1g.5gb, 2g.10gb, 3g.20gb") == 2
    assert [g["change"] for g in result["plan"]["gpus"]] == [False, True]
    assert "nvidia-smi -i 1 -mig 1" not in result["commands"]  # GPU 1 is in MIG mode already
    assert "nvidia-smi mig -i 1 -dci" in result["commands"]
    log = host.file("/var/log/kgn-lab/nvidia-smi.log").content_string
    assert "nvidia-smi -q -x" in log and not _mutating(log)
