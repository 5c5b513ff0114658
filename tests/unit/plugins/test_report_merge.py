"""One fleet report from several runs' reports (report.merge): the slices of a sliced job, or separate runs."""

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import report as r
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError


def row(host, verdict="ok", status="ok"):
    return {"host": host, "role": "GPU node", "verdict": verdict,
            "checks": [{"id": "driver_loaded", "title": "driver", "status": status, "summary": status,
                        "diagnosis": []}]}


def run(stamp, limit, *rows):
    return r.report(list(rows), {"generated": stamp, "inventory": "inv", "limit": limit, "check_mode": False})


def test_every_host_once_and_the_newest_row_wins():
    first = run("20261128T100000Z", "gpu1,gpu2", row("gpu1"), row("gpu2", "failed", "failed"))
    later = run("20261128T110000Z", "gpu2,gpu3", row("gpu2"), row("gpu3"))
    merged = r.merge([("s1/report.json", later), ("s2/report.json", first)])  # the order given does not matter
    assert [x["host"] for x in merged["rows"]] == ["gpu1", "gpu2", "gpu3"]
    assert merged["summary"] == {"ok": 3, "degraded": 0, "pending": 0, "failed": 0} and merged["problems"] == []
    sources = merged["meta"]["merged_from"]
    assert [(s["report"], s["limit"], s["kept"]) for s in sources] == [
        ("s2/report.json", "gpu1,gpu2", ["gpu1"]), ("s1/report.json", "gpu2,gpu3", ["gpu2", "gpu3"])]
    assert merged["meta"]["generated"] == "20261128T110000Z"
    text = r.report_markdown(merged)
    assert "- merged from s2/report.json (20261128T100000Z, limit gpu1,gpu2): 1 of its 2 row(s) kept" in text


def test_slices_of_one_run_merge_to_the_run_over_all():
    whole = run("20261128T090000Z", "", row("cp"), row("gpu1"), row("gpu2", "degraded", "warn"))
    slices = [run(f"20261128T09100{i}Z", ",".join(hosts), *[x for x in whole["rows"] if x["host"] in hosts])
              for i, hosts in enumerate((["cp", "gpu2"], ["gpu1"]))]
    merged = r.merge([(f"slice-{i}", s) for i, s in enumerate(slices)])
    assert merged["rows"] == whole["rows"] and merged["summary"] == whole["summary"]
    assert merged["problems"] == whole["problems"]


@pytest.mark.parametrize("bad,words", [
    ([], "give at least one report"),
    ([("x.json", {"rows": []})], "x.json is not a GPU node report"),
    ([("x.json", {"meta": {}, "rows": []})], "x.json has no meta.generated"),
    ([("x.json", {"meta": {"generated": "1", "check_mode": True}, "rows": []})], "check-mode run's report"),
    ([("x.json", {"meta": {"generated": "1", "merged_from": []}, "rows": []})], "already a merged report"),
    ([("x.json", {"meta": {"generated": "1"}, "rows": [{"verdict": "ok"}]})], "x.json has a row without a host"),
])
def test_what_is_not_a_run_report_is_refused_by_name(bad, words):
    with pytest.raises(KgnError, match=words):
        r.merge(bad)
