"""MIG: parsers on sourced nvidia-smi outputs (tests/unit/modules/fixtures/mig/README.md), the profile tables, the
layouts, the fit checks with what would fit, the strategies, and the ordered plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig

FIXTURES = Path(__file__).resolve().parents[1] / "modules" / "fixtures"


def _read(name):
    return (FIXTURES / name).read_text()


def _gpu(index, product="NVIDIA A100-PCIE-40GB", mib=40960, mode="Disabled", pending=None, processes=()):
    return {"index": index, "pci_bus_id": f"00000000:{index:02d}:00.0", "product_name": product,
            "memory_total_mib": mib, "mig_current": mode, "mig_pending": pending or mode, "mig_devices": [],
            "processes": [{"pid": p, "name": "python3"} for p in processes]}


def test_lgip_of_an_a100_40gb():
    rows = mig.parse_lgip(_read("mig/a100-pcie-40gb-lgip.txt"))
    assert [(r["name"], r["id"], r["total"]) for r in rows] == [
        ("1g.5gb", 19, 7), ("1g.5gb+me", 20, 1), ("2g.10gb", 14, 3), ("3g.20gb", 9, 2), ("4g.20gb", 5, 1),
        ("7g.40gb", 0, 1)]
    assert rows[3]["memory_gib"] == 19.62 and all(r["gpu"] == 0 for r in rows)


def test_lgipp_matches_the_a100_table():
    rows = {r["id"]: r for r in mig.parse_lgipp(_read("mig/a100-pcie-40gb-lgipp.txt"))}
    table = mig.MODELS["A100-40GB"]["profiles"]
    for spec in table.values():
        if spec["id"] in rows:
            assert (rows[spec["id"]]["starts"], rows[spec["id"]]["size"]) == (spec["starts"], spec["size"]), spec
    assert set(rows) == {19, 20, 14, 9, 5, 0}


def test_lgi_and_lci():
    gis = mig.parse_lgi(_read("mig/a100-pcie-40gb-lgi.txt"))
    assert [(g["name"], g["profile_id"], g["id"], g["start"], g["size"]) for g in gis] == [
        ("3g.20gb", 9, 1, 0, 4), ("3g.20gb", 9, 2, 4, 4)]
    cis = mig.parse_lci(_read("mig/a100-pcie-40gb-lci.txt"))
    assert [(c["gi"], c["name"], c["id"]) for c in cis] == [
        (1, "3g.20gb", 0), (2, "1c.3g.20gb", 0), (2, "1c.3g.20gb", 1), (2, "1c.3g.20gb", 2)]
    # GI 2 is split into three 1c compute instances: not the one-CI-per-GI layout the role makes
    state = mig.current_state([_gpu(0, mode="Enabled")], gis, cis)
    assert state == [{"index": 0, "mig": True, "pending": True, "profiles": ["3g.20gb", "3g.20gb"],
                      "complete": False}]
    assert mig.parse_lgi("No GPU instances found: Not Found") == []


def test_query_xml_with_mig_devices():
    gpus = mig.parse_query_xml(_read("a100-sxm4-80gb-mig.xml"))
    assert gpus[0]["product_name"] == "NVIDIA A100-SXM4-80GB"
    assert (gpus[0]["mig_current"], gpus[0]["mig_pending"]) == ("Enabled", "Enabled")
    assert [(d["gi"], d["ci"], d["memory_total_mib"]) for d in gpus[0]["mig_devices"]] == [
        (3, 0, 19968), (4, 0, 19968), (5, 0, 19968), (6, 0, 19968)]
    assert gpus[0]["processes"] == []
    assert mig.model_of(gpus[0]["product_name"], gpus[0]["memory_total_mib"]) == "A100-80GB"
    with pytest.raises(KgnError, match="output is not XML"):
        mig.parse_query_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


@pytest.mark.parametrize("product, mib, model", [
    ("NVIDIA A100-PCIE-40GB", 40960, "A100-40GB"), ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
    ("NVIDIA A30", 24576, "A30-24GB"), ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
    ("NVIDIA H100 NVL", 95830, "H100-94GB"), ("NVIDIA H200", 143771, "H200-141GB"),
    ("NVIDIA B200", 183359, "B200-180GB"), ("Tesla T4", 15360, None), ("NVIDIA L4", 23034, None)])
def test_model_of(product, mib, model):
    assert mig.model_of(product, mib) == model


@pytest.mark.parametrize("model", sorted(mig.MODELS))
def test_every_named_layout_fits_its_model(model):
    for name in mig.named_layouts(model):
        state = mig._named(name, model)
        assert state is not None, name
        assert not mig.fit_problems(model, state["profiles"]), (model, name)
        assert mig.creation_order(model, state["profiles"]) is not None


def test_named_layouts_as_mig_parted_counts_them():
    # config-default.yaml: all-1g.10gb is 7 on 80GB GPUs and 4 on A100-40GB; all-3g.40gb 2; all-balanced per model
    assert mig._named("all-1g.10gb", "A100-80GB")["profiles"] == ["1g.10gb"] * 7
    assert mig._named("all-1g.10gb", "A100-40GB")["profiles"] == ["1g.10gb"] * 4
    assert mig._named("all-3g.40gb", "H100-80GB")["profiles"] == ["3g.40gb"] * 2
    assert mig._named("all-1g.10gb.me", "H100-80GB")["profiles"] == ["1g.10gb+me"]
    assert sorted(mig._named("all-balanced", "A100-40GB")["profiles"]) == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert sorted(mig._named("all-balanced", "A30-24GB")["profiles"]) == ["1g.6gb", "1g.6gb", "2g.12gb"]
    assert mig._named("all-2g.20gb", "A100-40GB") is None


def test_creation_order_avoids_a_placement_dead_end():
    # created largest first, 3g.20gb takes slices 0-3, 2g.10gb 4-5, one 1g.5gb 6 and the last finds none
    assert mig._first_free("A100-40GB", ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]) is None
    order = mig.creation_order("A100-40GB", ["1g.5gb", "3g.20gb", "1g.5gb", "2g.10gb"])
    assert order is not None and sorted(order) == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert mig._first_free("A100-40GB", order) is not None


@pytest.mark.parametrize("profiles, why", [
    (["4g.20gb", "3g.20gb", "1g.5gb"], "8 compute slices"),
    (["3g.20gb"] * 3, "at most 2"),
    (["4g.20gb", "4g.20gb"], "at most 1"),
    (["1g.5gb+me", "1g.5gb+me"], "at most 1"),
    (["3g.40gb"], "not a profile of A100-40GB"),
])
def test_fit_problems(profiles, why):
    assert why in " ".join(mig.fit_problems("A100-40GB", profiles))


def test_misfit_refusal_names_what_would_fit():
    layout = [{"devices": [0], "profiles": ["4g.20gb", "3g.20gb", "1g.5gb"]}]
    with pytest.raises(KgnError) as err:
        mig.mig_plan(layout, "mixed", True, [_gpu(0), _gpu(1)])
    text = str(err.value)
    assert "GPU 0 (NVIDIA A100-PCIE-40GB): profiles 4g.20gb, 3g.20gb, 1g.5gb do not fit" in text
    assert "what fits: 4g.20gb, 3g.20gb (no room left)" in text
    assert "all-balanced" in text and "nothing was changed" in text


def test_mig_refused_on_a_gpu_without_it():
    with pytest.raises(KgnError, match=r"GPU 0 \(Tesla T4\) has no MIG"):
        mig.expand_layout("all-1g.5gb", [_gpu(0, product="Tesla T4", mib=15360)])
    # whole GPUs are fine anywhere
    assert mig.expand_layout("all-disabled", [_gpu(0, product="Tesla T4")])[0]["mig"] is False


def test_layout_for_another_model_names_the_layouts_that_fit():
    with pytest.raises(KgnError, match=r"layout all-3g\.40gb does not apply to A100-40GB GPUs; layouts that fit: "
                                       r"all-balanced, all-1g\.5gb"):
        mig.expand_layout("all-3g.40gb", [_gpu(0)])


@pytest.mark.parametrize("layout, problem", [
    ("all-3g", "write \"\""), ("3g.40gb", "write \"\""), ([], "non-empty list"),
    ([{"devices": "some", "profiles": []}], "devices is 'some'"),
    ([{"devices": [0], "profiles": ["3g"]}], "profiles is ['3g']"),
    ([{"devices": [0], "profiles": []}, {"devices": [0, 1], "profiles": []}], "names GPU 0 in more than one"),
    ([{"devices": [0], "profile": []}], "must be a mapping with devices"),
])
def test_layout_syntax(layout, problem):
    assert problem in " ".join(mig.layout_problems(layout))


@pytest.mark.parametrize("layout", ["", "all-disabled", "all-balanced", "all-1g.10gb", "all-1g.10gb.me",
                                    [{"devices": [0, 1], "profiles": ["3g.40gb", "3g.40gb"]},
                                     {"devices": "all", "profiles": []}]])
def test_layout_syntax_accepted(layout):
    assert mig.layout_problems(layout) == []


def test_gpu_index_not_on_the_node():
    with pytest.raises(KgnError, match="names GPU 3, but this node has GPU 0, 1"):
        mig.expand_layout([{"devices": [3], "profiles": ["7g.40gb"]}], [_gpu(0), _gpu(1)])


def test_strategies():
    balanced = mig.expand_layout("all-balanced", [_gpu(0)])
    assert "mixes profiles 1g.5gb, 2g.10gb, 3g.20gb" in mig.strategy_problems("single", balanced)[0]
    assert mig.strategy_problems("mixed", balanced) == []
    assert "strategy is none" in mig.strategy_problems("none", balanced)[0]
    assert mig.strategy_problems("none", balanced, device_plugin=False) == []
    half = mig.expand_layout([{"devices": [0], "profiles": ["3g.20gb", "3g.20gb"]}], [_gpu(0), _gpu(1)])
    assert "GPU 1 would have no MIG instance" in mig.strategy_problems("single", half)[0]
    whole = mig.expand_layout("all-3g.20gb", [_gpu(0), _gpu(1)])
    assert mig.strategy_problems("single", whole) == []


def test_resources_per_strategy():
    whole = mig.expand_layout("all-3g.20gb", [_gpu(0), _gpu(1)])
    single = mig.mig_resources("single", whole, "NVIDIA A100-PCIE-40GB")
    assert single == {"resources": {"nvidia.com/gpu": 4},
                      "labels": {"nvidia.com/mig.strategy": "single",
                                 "nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB-MIG-3g.20gb"}}
    mixed = mig.expand_layout([{"devices": [0], "profiles": ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]}],
                              [_gpu(0), _gpu(1)])
    assert mig.mig_resources("mixed", mixed)["resources"] == {
        "nvidia.com/gpu": 1, "nvidia.com/mig-3g.20gb": 1, "nvidia.com/mig-2g.10gb": 1, "nvidia.com/mig-1g.5gb": 2}


def test_plan_from_whole_gpus_enables_resets_and_creates_in_order():
    plan = mig.mig_plan([{"devices": [0], "profiles": ["1g.5gb", "3g.20gb", "1g.5gb", "2g.10gb"]},
                         {"devices": "all", "profiles": []}], "mixed", True, [_gpu(0), _gpu(1)])
    assert plan["changed"] and [g["change"] for g in plan["gpus"]] == [True, False]
    argv = [" ".join(c["argv"]) for c in plan["commands"]]
    assert argv[0] == "nvidia-smi -i 0 -mig 1"
    assert argv[1] == "nvidia-smi -i 0 --gpu-reset" and plan["commands"][1]["when"] == "pending"
    assert argv[2].startswith("nvidia-smi mig -i 0 -cgi ") and argv[2].endswith(" -C") and len(argv) == 3
    ids = [int(i) for i in argv[2].split()[5].split(",")]
    by_id = {19: "1g.5gb", 14: "2g.10gb", 9: "3g.20gb"}
    assert mig._first_free("A100-40GB", [by_id[i] for i in ids]) is not None
    assert plan["gpus"][0]["before"] == "MIG off (whole GPU)"
    assert plan["gpus"][0]["after"].startswith("MIG ")


def test_plan_of_a_matching_layout_changes_nothing():
    gis = mig.parse_lgi(_read("mig/a100-pcie-40gb-lgi.txt"))
    cis = [c for c in mig.parse_lci(_read("mig/a100-pcie-40gb-lci.txt")) if c["gi"] == 1]
    cis.append({"gpu": 0, "gi": 2, "name": "3g.20gb", "profile_id": 2, "id": 0, "start": 0, "size": 3})
    plan = mig.mig_plan("all-3g.20gb", "single", True, [_gpu(0, mode="Enabled")], gis, cis, {0: ["3g.20gb"]})
    assert plan["changed"] is False and plan["commands"] == []


def test_plan_of_a_half_made_layout_destroys_first():
    gis = mig.parse_lgi(_read("mig/a100-pcie-40gb-lgi.txt"))
    cis = mig.parse_lci(_read("mig/a100-pcie-40gb-lci.txt"))
    plan = mig.mig_plan("all-3g.20gb", "single", True, [_gpu(0, mode="Enabled")], gis, cis)
    assert [" ".join(c["argv"]) for c in plan["commands"]] == [
        "nvidia-smi mig -i 0 -dci", "nvidia-smi mig -i 0 -dgi", "nvidia-smi mig -i 0 -cgi 9,9 -C"]


def test_plan_back_to_whole_gpus():
    gis = mig.parse_lgi(_read("mig/a100-pcie-40gb-lgi.txt"))
    plan = mig.mig_plan("all-disabled", "none", True, [_gpu(0, mode="Enabled")], gis, [])
    assert [" ".join(c["argv"]) for c in plan["commands"]] == [
        "nvidia-smi mig -i 0 -dci", "nvidia-smi mig -i 0 -dgi", "nvidia-smi -i 0 -mig 0",
        "nvidia-smi -i 0 --gpu-reset"]


def test_plan_refuses_a_profile_the_driver_does_not_offer():
    # the sourced lgip (an older driver) has no 1g.10gb on the A100-40GB
    offered = {0: [r["name"] for r in mig.parse_lgip(_read("mig/a100-pcie-40gb-lgip.txt"))]}
    with pytest.raises(KgnError, match=r"the driver does not offer 1g\.10gb"):
        mig.mig_plan("all-1g.10gb", "single", True, [_gpu(0, mode="Enabled")], [], [], offered)


def test_busy_gpus_are_named_in_the_plan():
    plan = mig.mig_plan("all-7g.40gb", "single", True, [_gpu(0, processes=[4242])])
    assert plan["gpus"][0]["busy"] == [4242]


def test_not_managed():
    assert mig.mig_plan("", "none", True, []) == {"managed": False, "gpus": [], "commands": [], "changed": False,
                                                  "resources": {}}


def test_live_problems():
    plan = mig.mig_plan("all-3g.20gb", "single", True, [_gpu(0)])
    assert mig.live_problems(plan, [{"index": 0, "mig": False, "pending": True, "profiles": [], "complete": True}]) \
        == ["GPU 0: MIG mode is off, wanted on (pending: a reboot makes it current)"]
    assert mig.live_problems(plan, [{"index": 0, "mig": True, "pending": True, "profiles": ["3g.20gb", "3g.20gb"],
                                     "complete": True}]) == []


def test_gpu_pods_of_a_node():
    answer = {"items": [
        {"metadata": {"namespace": "ml", "name": "train"}, "status": {"phase": "Running"},
         "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
        {"metadata": {"namespace": "ml", "name": "infer"}, "status": {"phase": "Pending"},
         "spec": {"containers": [{}, {"resources": {"requests": {"nvidia.com/mig-3g.20gb": "1"}}}]}},
        {"metadata": {"namespace": "ml", "name": "done"}, "status": {"phase": "Succeeded"},
         "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
        {"metadata": {"namespace": "kube-system", "name": "nvidia-device-plugin-daemonset-x"},
         "status": {"phase": "Running"}, "spec": {"containers": [{"resources": {}}]}},
    ]}
    assert mig.mig_gpu_pods(answer) == ["ml/infer", "ml/train"]
    import json
    assert mig.mig_gpu_pods(json.dumps(answer)) == ["ml/infer", "ml/train"]
    assert mig.mig_gpu_pods('{"items": []}') == []
    with pytest.raises(KgnError, match="did not answer JSON"):
        mig.mig_gpu_pods("error: the server doesn't have a resource type")
