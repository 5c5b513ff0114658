"""scheduler_plan: the kube-scheduler section of the host plan, over every Kubernetes minor 1.16-1.37 and both
install styles, the removal when no extender is needed, the user's own config kept, the health URL from flags."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import host_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler import scheduler, scheduler_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_plan import scheduler_health_url
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stacks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import KUBERNETES_SUPPORTED

plan_of = scheduler_plan.scheduler_plan

MINORS = list(range(KUBERNETES_SUPPORTED[0][1], KUBERNETES_SUPPORTED[1][1] + 1))  # every supported minor
CONFIG = "/etc/kubernetes/scheduler-policy-config.yaml"
POLICY = "/etc/kubernetes/scheduler-policy-config.json"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
UNIT = "/etc/systemd/system/kube-scheduler.service"
DROPIN = "/etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf"
NODE_IP = "192.168.233.101"
KUBEADM_FLAGS = ["--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
                 "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf", "--bind-address=127.0.0.1",
                 "--kubeconfig=/etc/kubernetes/scheduler.conf", "--leader-elect=true"]
KUBEASZ_ARGV = ["/opt/kube/bin/kube-scheduler", "--authentication-kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig",
                "--authorization-kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig", "--bind-address=0.0.0.0",
                "--kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig", "--leader-elect=true", "--v=2"]


def kubeadm_text(version="1.30.4", extra=(), annotations=None, volumes=()):
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"creationTimestamp": None, "labels": {"component": "kube-scheduler"}, "name": "kube-scheduler",
                     "namespace": "kube-system"},
        "spec": {"containers": [{"command": ["kube-scheduler", *KUBEADM_FLAGS, *extra],
                                 "image": f"registry.k8s.io/kube-scheduler:v{version}", "name": "kube-scheduler",
                                 "volumeMounts": [{"mountPath": "/etc/kubernetes/scheduler.conf", "name": "kubeconfig",
                                                   "readOnly": True}]}],
                 "hostNetwork": True,
                 "volumes": [{"hostPath": {"path": "/etc/kubernetes/scheduler.conf", "type": "FileOrCreate"},
                              "name": "kubeconfig"}, *volumes]},
        "status": {},
    }
    if annotations:
        pod["metadata"]["annotations"] = annotations
    return yaml.safe_dump(pod, sort_keys=False)


def unit_text(argv=KUBEASZ_ARGV):
    return "[Unit]\nDescription=Kubernetes Scheduler\n\n[Service]\nExecStart=" + " \\\n  ".join(argv) + "\n"


def kubeadm_observed(text=None, files=None, **extra):
    return {"manifest": {"path": MANIFEST, "text": kubeadm_text() if text is None else text, "mode": "0600"},
            "unit": {"name": "kube-scheduler.service", "load_state": "not-found", "fragment": "", "dropins": [],
                     "texts": {}},
            "files": {CONFIG: None, POLICY: None, **(files or {})},
            "exists": {"/etc/kubernetes/scheduler.conf": True},
            "addresses": [NODE_IP, "172.17.0.1"], "default_address": NODE_IP, "kube_proxy_mode": "", **extra}


def systemd_observed(dropins=None, files=None, version="1.23.1", **extra):
    texts = {UNIT: unit_text(), **(dropins or {})}
    return {"manifest": {"path": MANIFEST, "text": None, "mode": None},
            "unit": {"name": "kube-scheduler.service", "load_state": "loaded", "fragment": UNIT,
                     "dropins": list(dropins or {}), "texts": texts, "need_daemon_reload": False},
            "version": {"argv": ["/opt/kube/bin/kube-scheduler", "--version"], "rc": 0,
                        "output": f"Kubernetes v{version}"},
            "files": {CONFIG: None, POLICY: None, **(files or {})},
            "exists": {"/etc/kubernetes/kube-scheduler.kubeconfig": True},
            "addresses": [NODE_IP], "default_address": NODE_IP, "kube_proxy_mode": "", **extra}


def inputs(**extra):
    return {"kubernetes_version": "", "stacks": ["gpushare"], **extra}


def applied(observed, plan):
    """The observation after the plan's files were written (what the next run reads)."""
    observed = json.loads(json.dumps(observed))
    for change in plan["files"] + plan["remove"]:
        if change["path"] == MANIFEST:
            observed["manifest"]["text"] = change["content"]
        elif change["path"] == DROPIN:
            unit = observed["unit"]
            unit["texts"][DROPIN] = change["content"]
            if change["content"] is None:
                unit["dropins"].remove(DROPIN)
                del unit["texts"][DROPIN]
            elif DROPIN not in unit["dropins"]:
                unit["dropins"].append(DROPIN)
        else:
            observed["files"][change["path"]] = change["content"]
    return observed


def gpushare(version, kubeconfig):
    extenders = stacks.stack_extenders(["gpushare"], {"gpushare": f"http://{NODE_IP}:32766"})
    return scheduler.scheduler_config(version, extenders, kubeconfig, None)


# --- every minor, both styles ------------------------------------------------------------------------------------
@pytest.mark.parametrize("minor", MINORS)
def test_kubeadm_every_minor_patches_the_manifest_with_the_variants_flag_and_document(minor):
    version = f"1.{minor}.3"
    plan = plan_of(inputs(), kubeadm_observed(kubeadm_text(version)))
    variant = scheduler.scheduler_variant(version)
    assert (plan["action"], plan["style"], plan["version"]) == ("configure", "kubeadm", version)
    assert plan["version_source"].startswith("the image tag")
    config, manifest = plan["files"]
    assert config["path"] == variant["path"] and config["mode"] == "0644"
    parsed = json.loads(config["content"]) if variant["format"] == "policy" else yaml.safe_load(config["content"])
    assert parsed == gpushare(version, "/etc/kubernetes/scheduler.conf")
    assert manifest["path"] == MANIFEST and manifest["mode"] == "0600"
    pod = yaml.safe_load(manifest["content"])
    command = pod["spec"]["containers"][0]["command"]
    assert command == ["kube-scheduler", *KUBEADM_FLAGS, f"{variant['flag']}={variant['path']}"]
    assert plan["argv"] == command
    assert pod["metadata"]["annotations"] == {
        "kube-gpu-nodes/scheduler-config-sha256": scheduler_plan.config_hash(config["content"])}
    volume = {"hostPath": {"path": variant["path"], "type": "File"}, "name": "kgn-scheduler-config"}
    assert volume in pod["spec"]["volumes"]
    assert plan["health_url"] == "https://127.0.0.1:10259/healthz"
    assert plan["watch"] == [variant["path"], MANIFEST]
    assert plan["prevalidate"] is None and plan["remove"] == [] and plan["assumed"] == []


@pytest.mark.parametrize("minor", MINORS)
def test_systemd_every_minor_rebuilds_execstart_in_our_drop_in(minor):
    version = f"1.{minor}.0"
    plan = plan_of(inputs(), systemd_observed(version=version))
    variant = scheduler.scheduler_variant(version)
    assert (plan["action"], plan["style"], plan["version"]) == ("configure", "systemd", version)
    config, dropin = plan["files"]
    parsed = json.loads(config["content"]) if variant["format"] == "policy" else yaml.safe_load(config["content"])
    assert parsed == gpushare(version, "/etc/kubernetes/kube-scheduler.kubeconfig")
    assert dropin["path"] == DROPIN and dropin["mode"] == "0644"
    assert plan["argv"] == [*KUBEASZ_ARGV, f"{variant['flag']}={variant['path']}"]
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_patch import systemd_exec_start

    assert systemd_exec_start([unit_text(), dropin["content"]]) == plan["argv"]
    assert f"ExecStart rebuilt from {UNIT}\n" in dropin["content"]
    assert plan["watch"] == [variant["path"], UNIT, DROPIN]
    check = ["unshare", "--net", KUBEASZ_ARGV[0], "--config=%s", "--write-config-to=%s.out"]
    expected_check = None if variant["format"] == "policy" else check
    assert plan["prevalidate"] == expected_check


@pytest.mark.parametrize("minor", MINORS)
@pytest.mark.parametrize("style", ["kubeadm", "systemd"])
def test_a_second_plan_on_the_written_files_changes_nothing(minor, style):
    version = f"1.{minor}.1"
    observed = kubeadm_observed(kubeadm_text(version)) if style == "kubeadm" else systemd_observed(version=version)
    first = plan_of(inputs(), observed)
    second = plan_of(inputs(), applied(observed, first))
    assert second["files"] == first["files"] and second["remove"] == [] and second["argv"] == first["argv"]


@pytest.mark.parametrize("minor", MINORS)
@pytest.mark.parametrize("style", ["kubeadm", "systemd"])
def test_every_minor_and_style_goes_back_to_the_installers_command_when_no_extender_is_needed(minor, style):
    version = f"1.{minor}.2"
    observed = kubeadm_observed(kubeadm_text(version)) if style == "kubeadm" else systemd_observed(version=version)
    configured = applied(observed, plan_of(inputs(), observed))
    removal = plan_of(inputs(stacks=[]), configured)
    variant = scheduler.scheduler_variant(version)
    assert removal["action"] == "remove" and removal["left_alone"] is False
    assert {"path": variant["path"], "content": None} in removal["remove"]
    if style == "kubeadm":
        assert removal["files"] == [{"path": MANIFEST, "content": removal["files"][0]["content"], "mode": "0600"}]
        assert yaml.safe_load(removal["files"][0]["content"]) == yaml.safe_load(kubeadm_text(version))
        assert removal["argv"] == ["kube-scheduler", *KUBEADM_FLAGS]
    else:
        assert removal["files"] == [] and {"path": DROPIN, "content": None} in removal["remove"]
        assert removal["argv"] == KUBEASZ_ARGV
    assert removal["health_url"] == "https://127.0.0.1:10259/healthz"
    # once back, nothing more: the scheduler is not on our config and is left alone
    back = plan_of(inputs(stacks=[]), applied(configured, removal))
    assert back["action"] == "leave" and back["files"] == [] and back["remove"] == []


# --- version and style -------------------------------------------------------------------------------------------
def test_version_input_wins_and_the_binary_answers_when_the_image_has_no_tag():
    assert plan_of(inputs(kubernetes_version="1.22.4"), systemd_observed())["version"] == "1.22.4"
    observed = kubeadm_observed(kubeadm_text().replace("kube-scheduler:v1.30.4", "kube-scheduler@sha256:abc"),
                                version={"argv": ["kube-scheduler", "--version"], "rc": 0,
                                         "output": "Kubernetes v1.29.2"})
    plan = plan_of(inputs(), observed)
    assert plan["version"] == "1.29.2" and plan["version_source"] == "`kube-scheduler --version`"


def test_an_undetectable_version_fails_and_says_what_was_tried():
    observed = kubeadm_observed(kubeadm_text().replace(":v1.30.4", ":latest"),
                                version={"argv": ["kube-scheduler", "--version"], "rc": None, "output": ""})
    with pytest.raises(KgnError, match=r"no image tag in .*kube-scheduler.yaml and `kube-scheduler --version` gave "
                                       r"nothing \(not installed\). Set kubernetes_version"):
        plan_of(inputs(), observed)


def test_style_auto_prefers_the_manifest_and_refuses_neither():
    both = kubeadm_observed()
    both["unit"] = systemd_observed()["unit"]
    assert plan_of(inputs(kubernetes_version="1.30.4"), both)["style"] == "kubeadm"
    neither = {**kubeadm_observed(), "manifest": {"path": MANIFEST, "text": None, "mode": None}}
    with pytest.raises(KgnError, match=r"has neither the kubeadm manifest .* nor a loaded systemd unit"):
        plan_of(inputs(kubernetes_version="1.30.4"), neither)
    # nothing needed and no scheduler here: nothing to do, truthfully
    plan = plan_of(inputs(kubernetes_version="1.30.4", stacks=[]), neither)
    assert plan["left_alone"] and "no kube-scheduler was found" in plan["reason"]


def test_a_forced_style_must_exist():
    with pytest.raises(KgnError, match="style is kubeadm, but this host has no static pod manifest"):
        plan_of(inputs(style="kubeadm"), systemd_observed())
    with pytest.raises(KgnError, match=r"style is systemd, but the unit kube-scheduler\.service is not loaded"):
        plan_of(inputs(style="systemd"), kubeadm_observed())


def test_backup_folder_inside_the_static_pod_folder_is_refused():
    with pytest.raises(KgnError, match="is inside /etc/kubernetes/manifests: the kubelet runs every file there"):
        plan_of(inputs(backup_dir="/etc/kubernetes/manifests/backups"), kubeadm_observed())
    plan_of(inputs(backup_dir="/etc/kubernetes/manifests-backup"), kubeadm_observed())  # a sibling is fine


def test_a_missing_kubeconfig_is_refused():
    observed = kubeadm_observed(exists={"/etc/kubernetes/scheduler.conf": False})
    with pytest.raises(KgnError, match=r"kubeconfig /etc/kubernetes/scheduler\.conf does not exist"):
        plan_of(inputs(), observed)


def test_systemd_kubeconfig_comes_from_the_units_flag():
    argv = [*KUBEASZ_ARGV[:4], "--kubeconfig=/etc/kubernetes/other.kubeconfig", *KUBEASZ_ARGV[5:]]
    observed = systemd_observed()
    observed["unit"]["texts"][UNIT] = unit_text(argv)
    plan = plan_of(inputs(), observed)
    assert plan["kubeconfig"] == "/etc/kubernetes/other.kubeconfig"
    assert "/etc/kubernetes/other.kubeconfig" in plan["files"][0]["content"]


# --- the user's own config ---------------------------------------------------------------------------------------
USER_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled:
      - name: ImageLocality
extenders:
- urlPrefix: http://10.0.0.9:8888/mine
  filterVerb: filter
"""


def test_kubeadm_merges_the_users_config_keeps_their_file_and_restores_their_flag_on_removal():
    mine = "/etc/kubernetes/my-scheduler.yaml"
    observed = kubeadm_observed(kubeadm_text(extra=[f"--config={mine}"]), files={mine: USER_CONFIG})
    plan = plan_of(inputs(), observed)
    doc = yaml.safe_load(plan["files"][0]["content"])
    assert [e["urlPrefix"] for e in doc["extenders"]] == ["http://10.0.0.9:8888/mine",
                                                          f"http://{NODE_IP}:32766/gpushare-scheduler"]
    assert doc["profiles"][0]["plugins"]["score"]["disabled"] == [{"name": "ImageLocality"}]
    assert all(change["path"] != mine for change in plan["files"] + plan["remove"])  # never touched
    pod = yaml.safe_load(plan["files"][1]["content"])
    assert f"--config={mine}" not in pod["spec"]["containers"][0]["command"]
    assert json.loads(pod["metadata"]["annotations"]["kube-gpu-nodes/scheduler-replaced-flags"]) == [f"--config={mine}"]
    configured = applied(observed, plan)
    again = plan_of(inputs(), configured)
    assert again["files"] == plan["files"]  # merged from our file now; the replaced flag stays recorded
    removal = plan_of(inputs(stacks=[]), configured)
    assert removal["argv"] == ["kube-scheduler", *KUBEADM_FLAGS, f"--config={mine}"]
    assert removal["remove"] == [{"path": CONFIG, "content": None}]
    assert yaml.safe_load(removal["files"][0]["content"]) == yaml.safe_load(kubeadm_text(extra=[f"--config={mine}"]))


def test_systemd_users_config_flag_comes_back_with_the_unit_on_removal():
    mine = "/etc/kubernetes/my-scheduler.yaml"
    observed = systemd_observed(version="1.30.1", files={mine: USER_CONFIG.replace(
        "/etc/kubernetes/scheduler.conf", "/etc/kubernetes/kube-scheduler.kubeconfig")})
    observed["unit"]["texts"][UNIT] = unit_text([*KUBEASZ_ARGV, f"--config {mine}"])
    plan = plan_of(inputs(), observed)
    assert plan["config"]["existing_path"] == mine
    assert len(yaml.safe_load(plan["files"][0]["content"])["extenders"]) == 2
    assert plan["argv"] == [*KUBEASZ_ARGV, f"--config={CONFIG}"]
    removal = plan_of(inputs(stacks=[]), applied(observed, plan))
    assert removal["argv"] == [*KUBEASZ_ARGV, "--config", mine]
    assert removal["remove"] == [{"path": DROPIN, "content": None}, {"path": CONFIG, "content": None}]


def test_a_scheduler_on_the_users_own_config_is_left_alone_when_no_extender_is_needed():
    mine = "/etc/kubernetes/my-scheduler.yaml"
    observed = kubeadm_observed(kubeadm_text(extra=[f"--config={mine}"]), files={mine: USER_CONFIG})
    plan = plan_of(inputs(stacks=["nvidia_device_plugin"]), observed)
    assert plan["action"] == "leave" and plan["left_alone"] and plan["files"] == [] and plan["remove"] == []
    assert plan["reason"].startswith("left alone: no extender needed")
    assert plan["watch"] == [mine, MANIFEST] and plan["argv"] == plan["current_argv"]


def test_extra_extenders_alone_configure_the_scheduler():
    extra = [{"url_prefix": "http://10.0.0.7:80/x", "filter_verb": "filter"}]
    plan = plan_of(inputs(stacks=[], extra_extenders=extra, kubernetes_version="1.30.4"), kubeadm_observed())
    assert plan["action"] == "configure"
    assert [e["urlPrefix"] for e in yaml.safe_load(plan["files"][0]["content"])["extenders"]] == ["http://10.0.0.7:80/x"]


def test_variant_switch_removes_the_previous_variants_file_and_flag():
    observed = kubeadm_observed(kubeadm_text("1.18.20"))
    at_118 = applied(observed, plan_of(inputs(), observed))
    at_125 = plan_of(inputs(kubernetes_version="1.25.16"), at_118)
    assert at_125["remove"] == [{"path": POLICY, "content": None}]
    pod = yaml.safe_load(at_125["files"][1]["content"])
    command = pod["spec"]["containers"][0]["command"]
    assert command[-1] == f"--config={CONFIG}" and not [a for a in command if a.startswith("--policy-config-file")]
    assert [v["hostPath"]["path"] for v in pod["spec"]["volumes"]] == ["/etc/kubernetes/scheduler.conf", CONFIG]
    doc = yaml.safe_load(at_125["files"][0]["content"])
    assert [e["urlPrefix"] for e in doc["extenders"]] == [f"http://{NODE_IP}:32766/gpushare-scheduler"]  # carried once


def test_a_drop_in_written_but_not_loaded_yet_counts():
    observed = systemd_observed()
    plan = plan_of(inputs(), observed)
    interrupted = applied(observed, plan)  # the module adds our drop-in when it is on disk but not in DropInPaths
    assert plan_of(inputs(), interrupted)["current_argv"] == plan["argv"]


def test_a_later_drop_in_of_the_admin_is_kept_in_the_rebuilt_execstart():
    admin = "/etc/systemd/system/kube-scheduler.service.d/10-admin.conf"
    observed = systemd_observed(dropins={admin: "[Service]\nExecStart=\nExecStart=" + " ".join(
        [*KUBEASZ_ARGV, "--v=4"]) + "\n"})
    plan = plan_of(inputs(), observed)
    assert plan["argv"] == [*KUBEASZ_ARGV, "--v=4", f"--config={CONFIG}"]
    assert f"ExecStart rebuilt from {UNIT} + {admin}" in plan["files"][1]["content"]


@pytest.mark.parametrize("style", ["kubeadm", "systemd"])
def test_a_newer_minor_is_refused_and_the_opt_in_plans_the_newest_known_variant_and_says_so(style):
    observed = kubeadm_observed(kubeadm_text("1.38.2")) if style == "kubeadm" else systemd_observed(version="1.38.2")
    with pytest.raises(KgnError, match=r"newer than 1\.37, the newest release .* kubernetes_version_allow_newer: true"):
        plan_of(inputs(), observed)
    plan = plan_of(inputs(allow_newer=True), observed)
    known = plan_of(inputs(), kubeadm_observed(kubeadm_text("1.37.0")) if style == "kubeadm"
                    else systemd_observed(version="1.37.0"))
    assert plan["version"] == "1.38.2" and plan["newer_than_known"] is True and known["newer_than_known"] is False
    assert "is newer than 1.37" in plan["version_note"] and plan["variant"]["variant_minor"] == "1.37"
    assert plan["config"]["text"] == known["config"]["text"]  # the 1.37 document
    with pytest.raises(KgnError, match="must be true or false"):
        plan_of(inputs(allow_newer="yes"), observed)


USER_95 = "/etc/systemd/system/kube-scheduler.service.d/95-user-verbosity.conf"


def test_a_later_drop_in_that_sets_execstart_is_refused_naming_it_and_the_choices():
    """systemd runs the command of the last file that sets ExecStart=: a 95- drop-in shadows our 90- one."""
    observed = systemd_observed(dropins={USER_95: "[Service]\nExecStart=\nExecStart=" + " ".join(
        [*KUBEASZ_ARGV[:-1], "--v=4"]) + "\n"})
    with pytest.raises(KgnError) as err:
        plan_of(inputs(), observed)
    message = " ".join(str(err.value).split())
    assert message.startswith(f"{USER_95} sets ExecStart= and sorts after this project's drop-in "
                              "90-kube-gpu-nodes-scheduler-config.conf, so systemd runs its command (")
    assert f"--v=4), without --config={CONFIG}" in message
    assert f"move the flags you need into {UNIT} or into a drop-in that sorts before" in message
    assert "rename it to 50-user-verbosity.conf" in message and f"remove the ExecStart lines from {USER_95}" in message
    assert "taking the stacks that need an extender out of gpu_sharing_stacks" in message
    # also once our drop-in is there (the file came after a run): the same refusal, nothing planned
    configured = applied(systemd_observed(), plan_of(inputs(), systemd_observed()))
    configured["unit"]["dropins"].append(USER_95)
    configured["unit"]["texts"][USER_95] = observed["unit"]["texts"][USER_95]
    with pytest.raises(KgnError, match=r"95-user-verbosity\.conf sets ExecStart="):
        plan_of(inputs(), configured)


def test_a_later_drop_in_without_execstart_and_an_earlier_one_with_it_are_fine():
    later = plan_of(inputs(), systemd_observed(dropins={USER_95: "[Service]\nEnvironment=GODEBUG=x\n"}))
    assert later["argv"] == [*KUBEASZ_ARGV, f"--config={CONFIG}"]
    earlier = "/etc/systemd/system/kube-scheduler.service.d/50-user-verbosity.conf"
    renamed = plan_of(inputs(), systemd_observed(dropins={earlier: "[Service]\nExecStart=\nExecStart=" + " ".join(
        [*KUBEASZ_ARGV[:-1], "--v=4"]) + "\n"}))
    assert renamed["argv"] == [*KUBEASZ_ARGV[:-1], "--v=4", f"--config={CONFIG}"]


def test_going_back_to_the_installers_command_with_a_later_drop_in_is_not_refused():
    observed = systemd_observed(dropins={USER_95: "[Service]\nExecStart=\nExecStart=/opt/kube/bin/kube-scheduler "
                                                  "--v=4\n"})
    plan = plan_of(inputs(stacks=[]), observed)
    assert plan["action"] == "leave" and plan["argv"] == ["/opt/kube/bin/kube-scheduler", "--v=4"]


# --- extender URLs ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("proxy", "observed_extra", "expected"), [
    ("iptables", {}, "http://127.0.0.1:32766"),
    ("ipvs", {}, f"http://{NODE_IP}:32766"),
    ("", {}, f"http://{NODE_IP}:32766"),  # kube-proxy did not answer
    ("", {"default_address": None}, f"http://{NODE_IP}:32766"),  # no default route: hostname -I
])
def test_auto_url_follows_the_observed_kube_proxy_and_addresses(proxy, observed_extra, expected):
    plan = plan_of(inputs(kubernetes_version="1.30.4"),
                   kubeadm_observed(kube_proxy_mode=proxy, **observed_extra))
    assert plan["extender_urls"] == {"gpushare": expected}


def test_node_ip_input_wins_and_loopback_is_refused_under_ipvs():
    plan = plan_of(inputs(kubernetes_version="1.30.4", node_ip="10.9.9.9"), kubeadm_observed())
    assert plan["extender_urls"] == {"gpushare": "http://10.9.9.9:32766"}
    with pytest.raises(KgnError, match="'loopback' cannot work: kube-proxy runs in ipvs mode"):
        plan_of(inputs(url_mode="loopback"), kubeadm_observed(kube_proxy_mode="ipvs"))


# --- render without observation ------------------------------------------------------------------------------------
def test_render_without_observation_assumes_the_installers_layout_and_says_so():
    assume = {"kubeadm_manifest": kubeadm_text("1.27.2"), "systemd_exec_start": KUBEASZ_ARGV, "address": "10.3.3.3"}
    plan = plan_of(inputs(kubernetes_version="1.27.2", assume=assume), {})
    assert plan["style"] == "kubeadm"
    assert plan["extender_urls"] == {"gpushare": "http://10.3.3.3:32766"}
    text = " ".join(plan["assumed"])
    assert "kubeadm static pod" in text and "10.3.3.3" in text and "kube-proxy's mode is unknown" in text
    plan = plan_of(inputs(kubernetes_version="1.23.1", style="systemd", assume=assume), {})
    assert plan["argv"] == [*KUBEASZ_ARGV, f"--config={CONFIG}"]
    assert "kube-scheduler.service as kubeasz renders it" in plan["files"][1]["content"]
    with pytest.raises(KgnError, match="rendering the scheduler config needs kubernetes_version"):
        plan_of(inputs(style="systemd", assume=assume), {})


def test_render_without_extender_plans_no_file():
    assume = {"kubeadm_manifest": kubeadm_text("1.16.15")}
    plan = plan_of(inputs(kubernetes_version="1.16.15", stacks=["nvidia_device_plugin"], assume=assume), {})
    assert plan["left_alone"] and plan["files"] == [] and plan["remove"] == []


# --- health URL ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "version", "expected"), [
    (["kube-scheduler"], "1.30.0", "https://127.0.0.1:10259/healthz"),
    (["kube-scheduler", "--bind-address=0.0.0.0"], "1.30.0", "https://127.0.0.1:10259/healthz"),
    (["kube-scheduler", "--bind-address=10.1.2.3", "--secure-port=10300"], "1.30.0", "https://10.1.2.3:10300/healthz"),
    (["kube-scheduler", "--bind-address", "10.1.2.3"], "1.30.0", "https://10.1.2.3:10259/healthz"),
    (["kube-scheduler", "--bind-address=::"], "1.30.0", "https://[::1]:10259/healthz"),
    (["kube-scheduler", "--bind-address=fd00::5"], "1.30.0", "https://[fd00::5]:10259/healthz"),
    (["kube-scheduler", "--secure-port=0"], "1.18.0", "http://127.0.0.1:10251/healthz"),
    (["kube-scheduler", "--secure-port=0", "--port=10999", "--address=10.0.0.1"], "1.20.0",
     "http://10.0.0.1:10999/healthz"),
])
def test_health_url_comes_from_the_flags(argv, version, expected):
    assert scheduler_health_url(argv, scheduler.scheduler_variant(version)) == expected
    assert scheduler_health_url(argv, version) == expected


def test_health_url_without_any_endpoint_is_refused():
    with pytest.raises(KgnError, match="serves no health endpoint"):
        scheduler_health_url(["kube-scheduler", "--secure-port=0"], "1.24.0")
    with pytest.raises(KgnError, match="serves no health endpoint"):
        scheduler_health_url(["kube-scheduler", "--secure-port=0", "--port=0"], "1.20.0")


def test_plan_health_url_follows_the_patched_flags():
    observed = kubeadm_observed(kubeadm_text().replace("--bind-address=127.0.0.1", "--bind-address=10.4.4.4"))
    assert plan_of(inputs(), observed)["health_url"] == "https://10.4.4.4:10259/healthz"


# --- restart annotation, reads, serialization ---------------------------------------------------------------------
def test_restart_manifest_changes_only_the_restart_annotation():
    plan = plan_of(inputs(), kubeadm_observed())
    entry = scheduler_plan.restart_manifest(plan, "2030-01-01T00:00:00Z")
    before, after = yaml.safe_load(plan["files"][1]["content"]), yaml.safe_load(entry["content"])
    assert after["metadata"]["annotations"].pop("kube-gpu-nodes/restarted-at") == "2030-01-01T00:00:00Z"
    assert after == before and entry["path"] == MANIFEST and entry["mode"] == "0600"
    # a later plan keeps the annotation the repair set: no change, no second restart
    observed = applied(kubeadm_observed(), {"files": [plan["files"][0], entry], "remove": []})
    assert plan_of(inputs(), observed)["files"][1]["content"] == entry["content"]
    # and the removal takes it away with ours
    removal = plan_of(inputs(stacks=[]), observed)
    assert "annotations" not in yaml.safe_load(removal["files"][0]["content"])["metadata"]


def test_reads_name_the_current_config_the_kubeconfig_and_the_version_probe():
    mine = "/etc/kubernetes/my.yaml"
    observed = {"manifest": {"text": None}, "unit": systemd_observed()["unit"]}
    observed["unit"]["texts"][UNIT] = unit_text([*KUBEASZ_ARGV, f"--config={mine}"])
    reads = scheduler_plan.scheduler_reads(inputs(), observed)
    assert reads == {"files": [POLICY, CONFIG, mine], "exists": ["/etc/kubernetes/kube-scheduler.kubeconfig"],
                     "version_argv": ["/opt/kube/bin/kube-scheduler", "--version"], "kube_proxy": True}
    reads = scheduler_plan.scheduler_reads(inputs(url_mode="node_ip"), kubeadm_observed())
    assert reads["version_argv"] is None and reads["kube_proxy"] is False  # the image tag says it


def test_config_text_is_json_for_a_policy_and_yaml_otherwise():
    policy = scheduler.scheduler_variant("1.17.0")
    doc = gpushare("1.17.0", "")
    assert scheduler_plan.config_text(doc, policy) == json.dumps(doc, indent=2)
    v1 = scheduler.scheduler_variant("1.30.0")
    text = scheduler_plan.config_text(gpushare("1.30.0", "/k"), v1)
    assert text.startswith("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert "managedResources:\n  - name: aliyun.com/gpu-mem\n" in text and text.endswith("\n")


def test_host_plan_has_the_kube_scheduler_section():
    section = host_plan({"kube_scheduler": inputs()}, {"kube_scheduler": kubeadm_observed()})["kube_scheduler"]
    assert section == plan_of(inputs(), kubeadm_observed())


def test_unknown_inputs_are_refused():
    with pytest.raises(KgnError, match="unknown input"):
        plan_of({"stack": ["gpushare"]}, kubeadm_observed())


@pytest.mark.parametrize(
    ("damage", "said"),
    [(b"\x91\xfe binary \x00", "is not UTF-8 text"), (b"extenders: [unclosed\n", "is not valid YAML/JSON")],
)
def test_a_damaged_current_config_is_refused_and_named(damage, said):
    """host.read gives undecodable bytes as U+FFFD: the plan refuses them with the file's name."""
    mine = "/etc/kubernetes/my-scheduler.yaml"
    observed = kubeadm_observed(kubeadm_text(extra=[f"--config={mine}"]),
                                files={mine: damage.decode("utf-8", "replace")})
    with pytest.raises(KgnError, match=f"the scheduler's current config {mine} {said}.*left as it is"):
        plan_of(inputs(), observed)


# --- GPU-sharing extenders already in the scheduler's config -----------------------------------------------------
def users_config_with(url, resource):
    return USER_CONFIG.replace("- urlPrefix: http://10.0.0.9:8888/mine\n  filterVerb: filter\n",
                               f"- urlPrefix: {url}\n  filterVerb: filter\n  bindVerb: bind\n"
                               f"  managedResources:\n  - name: {resource}\n")


@pytest.mark.parametrize("style", ["kubeadm", "systemd"])
def test_switching_stacks_replaces_the_extender_of_the_earlier_run(style):
    observed = kubeadm_observed() if style == "kubeadm" else systemd_observed()
    gpushare_run = applied(observed, plan_of(inputs(kubernetes_version="1.23.1"), observed))
    switched = plan_of(inputs(kubernetes_version="1.23.1", stacks=["nano_gpu"]), gpushare_run)
    doc = yaml.safe_load(switched["files"][0]["content"])
    assert [e["managedResources"][0]["name"] for e in doc["extenders"]] == ["nano-gpu/gpu-percent"]


def test_a_hand_made_extender_of_the_chosen_stack_is_replaced_by_ours():
    mine = "/etc/kubernetes/my-scheduler.yaml"
    text = users_config_with("http://10.0.0.9:12345/gpushare-scheduler", "aliyun.com/gpu-mem")
    plan = plan_of(inputs(), kubeadm_observed(kubeadm_text(extra=[f"--config={mine}"]), files={mine: text}))
    doc = yaml.safe_load(plan["files"][0]["content"])
    assert [e["urlPrefix"] for e in doc["extenders"]] == [f"http://{NODE_IP}:32766/gpushare-scheduler"]
    assert doc["profiles"][0]["plugins"]["score"]["disabled"] == [{"name": "ImageLocality"}]  # the rest is kept


def test_another_gpu_sharing_extender_in_the_users_config_is_refused_with_the_choices():
    mine = "/etc/kubernetes/my-scheduler.yaml"
    text = users_config_with("http://10.0.0.9:39999/scheduler", "nano-gpu/gpu-percent")
    with pytest.raises(KgnError) as err:
        plan_of(inputs(), kubeadm_observed(kubeadm_text(extra=[f"--config={mine}"]), files={mine: text}))
    said = str(err.value)
    assert f"config {mine} already has the extender http://10.0.0.9:39999/scheduler for nano-gpu/gpu-percent" in said
    assert "(the nano_gpu stack's resources), which kube-gpu-nodes did not configure" in said
    assert "add nano_gpu to gpu_sharing_stacks" in said and f"remove the entry from {mine}" in said
    assert said.endswith("(the scheduler is then left alone)")  # the module adds "Nothing was changed."


def test_an_extender_for_other_resources_is_kept_beside_ours():
    mine = "/etc/kubernetes/my-scheduler.yaml"
    text = users_config_with("http://10.0.0.9:8080/fpga", "example.com/fpga").replace("  bindVerb: bind\n", "")
    plan = plan_of(inputs(), kubeadm_observed(kubeadm_text(extra=[f"--config={mine}"]), files={mine: text}))
    assert [e["urlPrefix"] for e in yaml.safe_load(plan["files"][0]["content"])["extenders"]] == [
        "http://10.0.0.9:8080/fpga", f"http://{NODE_IP}:32766/gpushare-scheduler"]
