"""The command line a person meets: kernel lookup in ``history``/``accept``/``gate --ignore``, history's
workload/branch filters, change and sparkline, ``--quiet`` everywhere, ``accept --list/--revoke``,
``--show-policy`` as TOML, strict JSON with a ``schema`` on every output, ``.kbase/`` ignored by git."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

import pytest

from helpers.cli import run_kbase
from helpers.shared import KINETO_DIR, SHARED_SKIP_REASON

A = KINETO_DIR / "v100_resnet50_w4_repeat_a.pt.trace.json.gz"
B = KINETO_DIR / "v100_resnet50_w4_repeat_b.pt.trace.json.gz"
REV1, REV2 = "1" * 40, "2" * 40


def strict_json(text: str) -> dict:
    """Parse as a strict consumer (JSON.parse, fromJSON) would: NaN / Infinity are errors."""
    def no_constant(name: str):
        raise AssertionError(f"non-standard JSON constant {name}")

    doc = json.loads(text, parse_constant=no_constant)
    assert isinstance(doc, dict) and isinstance(doc.get("schema"), str), text[:300]
    return doc


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's repository (two commits) and store with its two baselines."""
    root = tmp_path_factory.mktemp("demo")
    r = run_kbase("demo", "--dir", str(root))
    assert r.rc == 0, r
    return {"repo": root / "repo", "db": f"sqlite:///{root / 'kbase.db'}", "root": root, "stdout": r.stdout}


def test_demo_ends_with_its_finding_on_a_line_of_its_own(demo):
    lines = demo["stdout"].splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith("injected: ")]
    assert len(found) == 1 and "gate exit 1" in lines[found[0]] and lines[found[0] - 1] == "", lines[-5:]
    assert "\\n" not in demo["stdout"]  # no newline written as the two characters \n


@pytest.fixture(scope="module")
def resnet_store(tmp_path_factory):
    """A store holding the shared ResNet A/A traces: workload rn on branches a and b, and rn2."""
    if not (A.is_file() and B.is_file()):
        pytest.skip(SHARED_SKIP_REASON)
    db = f"sqlite:///{tmp_path_factory.mktemp('rn') / 'k.db'}"
    for path, rev, name in ((A, REV1, "rn"), (B, REV2, "rn"), (A, REV1, "rn2")):
        r = run_kbase("snapshot", str(path), "--db", db, "--no-git", "--rev", rev, "--name", name, "--quiet")
        assert r.rc == 0, r
        assert len(r.stdout.strip().splitlines()) == 1 and r.stdout.startswith("stored baseline @"), r
    return db


def test_history_dgrad_on_resnet(resnet_store):
    r = run_kbase("history", "dgrad", "--db", resnet_store, "--all-workloads")
    if r.rc == 2:  # several kernels: the candidates are listed with their ids
        assert "kernels match" in r.stderr and "#" in r.stderr, r
    else:
        assert r.rc == 0 and "dgrad_engine" in r.stdout, r
    r = run_kbase("history", "dgrad_engine", "--db", resnet_store, "--format", "json", "--all-workloads")
    assert r.rc == 0, r
    doc = strict_json(r.stdout)
    assert doc["schema"] == "kbase.history/1" and "dgrad_engine" in doc["kernel"]["name"]
    assert {b["workload"] for b in doc["baselines"]} == {"rn", "rn2"} and len(doc["baselines"]) == 3
    rn = [b for b in doc["baselines"] if b["workload"] == "rn"]
    assert rn[0]["change_pct"] is None and isinstance(rn[1]["change_pct"], float)  # vs previous of rn
    expected = (rn[1]["per_iter_ns"] - rn[0]["per_iter_ns"]) / rn[0]["per_iter_ns"] * 100
    assert abs(rn[1]["change_pct"] - expected) < 1e-9


def test_history_filters_sparkline_and_suggestions(resnet_store):
    r = run_kbase("history", "dgrad_engine", "--db", resnet_store, "--name", "rn", "--format", "json")
    assert {b["workload"] for b in strict_json(r.stdout)["baselines"]} == {"rn"}
    r = run_kbase("history", "dgrad_engine", "--db", resnet_store, "--name", "rn", "--branch", "no-such-branch",
                  "--format", "json")
    assert strict_json(r.stdout)["baselines"] == []
    r = run_kbase("history", "dgrad_engine", "--db", resnet_store)  # two workloads stored, none named
    assert r.rc == 2 and "rn, rn2" in r.stderr and "--name" in r.stderr, r
    r = run_kbase("history", "dgrad_engine", "--db", resnet_store, "--all-workloads")
    assert r.rc == 0, r
    assert re.search(r"^rn: [▁▂▃▄▅▆▇█]{2}  \(2 baseline", r.stdout, re.M), r.stdout
    assert "workload" in r.stdout and "Δ vs prev" in r.stdout
    r = run_kbase("history", "dgrad_engin", "--db", resnet_store, "--name", "rn")  # a typo
    assert r.rc == 0, r  # a substring still finds it
    r = run_kbase("history", "dgard_engine", "--db", resnet_store, "--name", "rn")
    assert r.rc == 2 and "did you mean: dgrad_engine" in r.stderr and not r.stdout, r
    r = run_kbase("history", "wgrad_alg0_engine", "--db", resnet_store, "--name", "rn")
    if r.rc == 2:
        ids = re.findall(r"#[0-9a-f]{6}", r.stderr)
        assert len(ids) >= 2, r
        r = run_kbase("history", ids[0], "--db", resnet_store, "--name", "rn", "--quiet")
        assert r.rc == 0 and ids[0] in r.stdout and len(r.stdout.strip().splitlines()) == 1, r


def test_accept_list_revoke_and_lookup(demo):
    db, repo = demo["db"], str(demo["repo"])
    base = ("--db", db, "--repo", repo, "--name", "demo-train")
    r = run_kbase("accept", "flash_fwd", "--rev", "HEAD", "--reason", "known", *base)
    assert r.rc == 0 and "accepted #" in r.stderr, r
    acc_id = int(re.search(r"accepted #(\d+)", r.stderr).group(1))
    r = run_kbase("accept", "vectorized_elementwise_kernel", "--rev", "HEAD", "--reason", "x", *base)
    assert r.rc == 2 and "kernels match" in r.stderr, r  # ambiguous: nothing stored
    r = run_kbase("accept", "--list", *base, "--format", "json")
    doc = strict_json(r.stdout)
    assert doc["schema"] == "kbase.acceptances/1" and [a["id"] for a in doc["acceptances"]] == [acc_id]
    assert "flash_fwd_kernel" in doc["acceptances"][0]["pattern"]
    r = run_kbase("accept", "--list", *base, "--wide")  # every column, whatever the width here
    assert r.rc == 0 and f"#{acc_id}" in r.stdout and "known" in r.stdout, r
    r = run_kbase("accept", "--revoke", str(acc_id), *base)
    assert r.rc == 0 and f"revoked #{acc_id}" in r.stderr, r
    r = run_kbase("accept", "--revoke", str(acc_id), *base)
    assert r.rc == 2, r
    assert strict_json(run_kbase("accept", "--list", *base, "--format", "json").stdout)["acceptances"] == []
    r = run_kbase("accept", "flash_fwd", "--rev", "HEAD", "--reason", "again", *base)
    assert r.rc == 0, r
    assert int(re.search(r"accepted #(\d+)", r.stderr).group(1)) > acc_id  # a revoked id is never reused
    r = run_kbase("accept", *base)
    assert r.rc == 2 and "PATTERN" in r.stderr, r


def test_show_policy_is_toml_that_loads_back(demo, tmp_path):
    from kbase.policy import load_policy

    r = run_kbase("gate", "--show-policy", "--repo", str(demo["repo"]), "--max-increase-pct", "7.5",
                  "--ignore", "*memcpy*")
    assert r.rc == 0, r
    assert r.stdout.startswith("[tool.kbase.gate]\n")
    cfg = tomllib.loads(r.stdout)["tool"]["kbase"]["gate"]
    assert load_policy(cfg, {}, where="pasted").as_dict() == {**cfg, "kernels": {}}
    assert cfg["max_increase_pct"] == 7.5 and cfg["ignore"] == ["*memcpy*"]


def test_quiet_is_one_line(demo):
    base = ("--db", demo["db"], "--repo", str(demo["repo"]), "--name", "demo-train")
    for args in (("list",), ("show", "@1"), ("diff", "@1", "@2"), ("gate", "@1", "@2"),
                 ("history", "flash_fwd_kernel")):
        r = run_kbase(*args, *base, "--quiet")
        assert r.rc in (0, 1), r
        assert len(r.stdout.strip().splitlines()) == 1 and not r.stderr.strip(), r
    export = demo["root"] / "train_v1.sqlite"
    r = run_kbase("top", str(export), "--quiet")
    assert r.rc == 0 and len(r.stdout.strip().splitlines()) == 1 and "kernels" in r.stdout, r


def test_every_json_output_is_strict_with_schema(demo):
    base = ("--db", demo["db"], "--repo", str(demo["repo"]), "--name", "demo-train")
    export = str(demo["root"] / "train_v1.sqlite")
    outputs = {
        "top": run_kbase("top", export, "-f", "json"),
        "show": run_kbase("show", "@1", *base, "-f", "json"),
        "list": run_kbase("list", *base, "-f", "json"),
        "diff": run_kbase("diff", "@1", "@2", *base, "-f", "json"),
        "gate": run_kbase("gate", "@1", "@2", *base, "-f", "json"),
        "history": run_kbase("history", "flash_fwd_kernel", *base, "-f", "json"),
        "accept": run_kbase("accept", "--list", *base, "-f", "json"),
        "snapshot": run_kbase("snapshot", export, *base, "-f", "json"),
    }
    for cmd, r in outputs.items():
        assert r.rc in (0, 1), (cmd, r)
        doc = strict_json(r.stdout)
        assert doc["schema"].startswith("kbase."), cmd
    diff = strict_json(outputs["diff"].stdout)
    assert set(diff["counts"]) == {"regressed", "regressed_below_floor", "improved", "new", "gone", "swapped",
                                   "unchanged", "within_noise", "cannot_judge"}
    assert all(" " not in k["class"] for k in diff["kernels"])
    per_iter = strict_json(outputs["list"].stdout)["baselines"][-1]["kernel_ns_per_iter"]
    assert abs(per_iter - diff["totals"]["kernel"]["before"]) <= 1e-6 * per_iter  # one unit: list = diff


def test_default_store_folder_is_ignored_by_git(demo, tmp_path):
    repo = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(demo["repo"]), str(repo)], check=True)
    r = run_kbase("db", "upgrade", "--repo", str(repo))  # list alone creates no store
    assert r.rc == 0, r
    assert (repo / ".kbase" / "kbase.db").is_file()
    assert (repo / ".kbase" / ".gitignore").read_text().splitlines()[-1] == "*"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert status.stdout == "", status.stdout


def test_incomparable_prints_both_sides_in_one_unit():
    from kbase.units import ABSENT, fmt_ns_pair

    assert fmt_ns_pair(1e9, 999_999_999.0) == ("1.000 s", "1.000 s")
    assert fmt_ns_pair(2_000_000, 999_000) == ("2.000 ms", "0.999 ms")
    assert fmt_ns_pair(None, 5e3) == (ABSENT, "5.00 µs")


def test_p_values_read_as_people_read_them():
    from kbase.units import ABSENT, fmt_p

    assert fmt_p(2e-246) == "< 1e-6" and fmt_p(0.03) == "0.03" and fmt_p(float("nan")) == ABSENT


