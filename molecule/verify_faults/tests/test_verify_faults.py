"""The reports of site.yml on healthy nodes, of playbooks/verify.yml after four hand-made faults (each with
its diagnosis, read live from the nodes), and of site.yml again (every fault repaired, checked on the nodes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPORTS = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
DOCKER, CONTAINERD, CP = "vf-gpu-docker", "vf-gpu-containerd", "vf-cp"


def load(folder):
    latest = REPORTS / folder / "latest"
    assert latest.is_symlink(), f"{latest} must point at the newest report folder"
    assert (latest / "report.md").is_file()
    return json.loads((latest / "report.json").read_text())


def rows(report):
    return {row["host"]: row for row in report["rows"]}


def check(report, host, check_id):
    found = [c for c in rows(report)[host]["checks"] if c["id"] == check_id]
    assert found, f"{host} has no check {check_id}"
    return found[0]


@pytest.fixture(scope="module")
def healthy():
    return load("reports")


@pytest.fixture(scope="module")
def faults():
    return load("reports-faults")


@pytest.fixture(scope="module")
def repaired():
    return load("reports-repaired")


def test_healthy_report_lists_every_node_with_a_verdict(healthy):
    assert {h: r["verdict"] for h, r in rows(healthy).items()} == {DOCKER: "degraded", CONTAINERD: "degraded", CP: "ok"}
    for host in (DOCKER, CONTAINERD):
        gpu = check(healthy, host, "gpu_present")
        assert gpu["status"] == "warn"
        assert gpu["summary"] == "no NVIDIA GPU present on this node"
        assert check(healthy, host, "runtime_default")["status"] == "ok"
        assert check(healthy, host, "node_labels")["status"] == "ok"
    # Debian's Docker 20.10 has no CDI: the legacy hook (nvidia-container-runtime as the default runtime)
    assert rows(healthy)[DOCKER]["runtime"].startswith("docker ") and rows(healthy)[DOCKER]["runtime"].endswith(
        "(nvidia, legacy)"
    )
    assert rows(healthy)[CONTAINERD]["runtime"].startswith("containerd ")
    # 1.22: KubeSchedulerConfiguration v1beta2, never the Policy file beside it (1.22 refuses both at once)
    assert rows(healthy)[CP]["scheduler"] == "v1beta2 (--config)"
    assert check(healthy, CP, "scheduler_health")["status"] == "ok"
    assert check(healthy, CP, "extender_reachable")["status"] == "ok"
    assert check(healthy, CP, "stack_args")["status"] == "ok"


def causes(report, host, check_id):
    return [item["id"] for item in check(report, host, check_id)["diagnosis"]]


def test_docker_default_runtime_back_to_runc(faults):
    assert rows(faults)[DOCKER]["verdict"] == "failed"
    assert check(faults, DOCKER, "runtime_default")["status"] == "failed"
    assert causes(faults, DOCKER, "runtime_default") == ["docker_default_not_nvidia"]
    assert "did you set the docker default runtime" in check(faults, DOCKER, "runtime_default")["diagnosis"][0]["cause"]


def test_containerd_config_rewritten_without_the_import(faults):
    assert rows(faults)[CONTAINERD]["verdict"] == "failed"
    assert check(faults, CONTAINERD, "runtime_registered")["status"] == "failed"
    assert causes(faults, CONTAINERD, "runtime_registered") == ["containerd_dropin_not_imported"]
    evidence = check(faults, CONTAINERD, "runtime_registered")["evidence"]
    assert evidence["dropin"] == "/etc/containerd/conf.d/99-nvidia.toml"


def test_label_removed(faults):
    labels = check(faults, DOCKER, "node_labels")
    assert labels["status"] == "failed"
    assert labels["evidence"]["missing"] == ["gpushare"]
    assert causes(faults, DOCKER, "node_labels") == ["label_missing"]
    assert check(faults, CONTAINERD, "node_labels")["status"] == "ok"


def test_scheduler_config_flag_removed(faults):
    assert rows(faults)[CP]["verdict"] == "failed"
    assert causes(faults, CP, "scheduler_flag") == ["scheduler_flag_removed_systemd"]
    assert check(faults, CP, "scheduler_health")["status"] == "ok"


def test_site_repairs_every_fault(repaired):
    assert {h: r["verdict"] for h, r in rows(repaired).items()} == {
        DOCKER: "degraded", CONTAINERD: "degraded", CP: "ok"}
    for host, check_id in [(DOCKER, "runtime_default"), (CONTAINERD, "runtime_registered"),
                           (DOCKER, "node_labels"), (CP, "scheduler_flag")]:
        assert check(repaired, host, check_id)["status"] == "ok", (host, check_id)


def test_the_repairs_are_real_on_the_nodes(host):
    """The faults report read them live (tests above); after site.yml the live nodes are whole again."""
    name = host.backend.get_hostname()
    if name == DOCKER:
        assert host.check_output("docker info --format '{{.DefaultRuntime}}'") == "nvidia"
    elif name == CONTAINERD:
        assert "runtimes.nvidia]" in host.check_output("containerd config dump")
    else:
        pid = host.check_output("systemctl show -p MainPID --value kube-scheduler")
        process = host.file(f"/proc/{pid}/cmdline").content_string.replace("\0", " ")
        assert "--config=/etc/kubernetes/scheduler-policy-config.yaml" in process
        # the upstream binary the lab's mirror holds, not a stand-in
        assert json.loads(host.check_output("kubectl get --raw /version"))["gitVersion"] == "v1.22.3"
        labels = host.check_output(f"kubectl get node {DOCKER} -o jsonpath='{{.metadata.labels}}'")
        assert '"gpushare":"true"' in labels


def test_kgn_run_wrapper_keeps_runner_artifacts_and_report_in_check_mode():
    """scripts/kgn-run through ansible-runner, in check mode, against this scenario's inventory."""
    import subprocess

    top = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
    out = REPORTS / "kgn-run"
    done = subprocess.run(
        [
            str(top / "scripts" / "kgn-run"),
            "verify",
            "-i",
            os.environ["MOLECULE_INVENTORY_FILE"],
            "-o",
            str(out),
            "--",
            "--check",
        ],
        cwd=top,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    artifacts = out / "runner" / "artifacts" / "verify"
    assert (artifacts / "rc").read_text().strip() == "0"
    assert (artifacts / "status").read_text().strip() == "successful"
    assert "--check" in (artifacts / "command").read_text()
    assert list((artifacts / "job_events").glob("*.json")), "no job events kept"
    assert "PLAY RECAP" in (artifacts / "stdout").read_text()
    assert (out / "summary.txt").read_text().split()[:3] == ["verify", "rc=0", "status=successful"]
    # a check-mode run's report has its own folder; latest stays the last real run's
    assert not (out / "reports" / "latest").exists()
    report = json.loads((out / "reports" / "latest-check" / "report.json").read_text())
    assert report["meta"]["check_mode"] in (True, "True", "true")
    assert {row["host"] for row in report["rows"]} == {DOCKER, CONTAINERD, CP}


# --- the containerd node's driver: installed by hand (the prepare's stand-in for a runfile), adopted ---------


def test_the_report_says_the_hand_installed_driver_is_adopted(healthy, repaired):
    for report in (healthy, repaired):
        found = check(report, CONTAINERD, "driver_package")
        assert found["status"] == "ok", found
        assert found["summary"].startswith("adopted: driver 550."), found["summary"]
        assert "(adopted" in rows(report)[CONTAINERD]["driver"]
    assert not check(healthy, DOCKER, "driver_package")["summary"].startswith("adopted")


def test_the_adopted_driver_is_kept_and_apt_cannot_replace_it(host):
    if host.backend.get_hostname() != CONTAINERD:
        pytest.skip("the adopted driver is on the containerd node")
    # the files are the ones put there by hand, byte for byte, and still no package's
    assert host.run("sha256sum -c --quiet /root/adopted-driver.sha256").rc == 0
    assert host.run("dpkg-query -S /usr/bin/nvidia-smi").rc != 0
    assert host.run("dpkg-query -W -f='${Status}' nvidia-driver nvidia-smi libnvidia-ml1").stdout.count(
        "install ok installed") == 0
    # the owner's non-free source offers the driver packages; the pin refuses every one of them
    pin = host.file("/etc/apt/preferences.d/kgn-nvidia-driver.pref").content_string
    assert "Pin: version *\nPin-Priority: -1\n" in pin
    for package in ("nvidia-driver", "nvidia-smi", "libnvidia-ml1", "nvidia-kernel-dkms"):
        policy = host.check_output(f"apt-cache policy {package}")
        assert "Candidate: (none)" in policy and " -1\n" in policy + "\n", policy
        assert host.run(f"apt-get install -s -q {package}").rc != 0
    upgrade = host.check_output("apt-get -s -q dist-upgrade")
    assert not [line for line in upgrade.splitlines() if line.startswith("Inst ") and "nvidia" in line
                and "container" not in line], upgrade
    # the container toolkit's packages are not blocked
    assert "Candidate: (none)" not in host.check_output("apt-cache policy nvidia-container-toolkit")


def test_the_upgrade_playbook_refuses_the_adopted_driver_and_does_not_cordon():
    import subprocess

    top = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
    done = subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "playbooks/nvidia_driver_upgrade.yml",
         "--limit", CONTAINERD, "-e", "gpu_driver_version=550.163.01"],
        cwd=top, capture_output=True, text=True, timeout=600, check=False,
    )
    out = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, out[-3000:]
    assert "that no package of ours owns" in out and "site.yml adopts it (keeps it as it is)" in out, out[-3000:]
    assert "Cordon and drain the node" not in out


def test_cuda_is_checked_against_the_adopted_driver():
    """No kernel module here, so nvidia-smi cannot answer: the CUDA check must use the version the driver module
    recorded for the adopted driver (550 cannot run CUDA 13.0, which needs 580 or later)."""
    import subprocess

    top = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
    done = subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "playbooks/nvidia_driver.yml",
         "--limit", CONTAINERD, "-e", "cuda_toolkit_enabled=true", "-e", "cuda_toolkit_version=13.0"],
        cwd=top, capture_output=True, text=True, timeout=600, check=False,
    )
    out = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, out[-3000:]
    assert "cuda_toolkit_version=13.0 does not fit the installed driver" in out, out[-3000:]
    assert "No NVIDIA driver found" not in out, out[-3000:]
