"""The comparison reads, then computes: ``api.comparing`` reads both sides, the history and the acceptances into
``comparison.inputs`` values; ``comparison.compare`` computes on them with a ``ComparisonPolicy`` and reads nothing
(issue 40, item 5)."""

from __future__ import annotations

import ast
import inspect
import pickle
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import kbase
from kbase.analysis.capture import capture_of_leaderboard
from kbase.comparison.compare import compare, gate
from kbase.comparison.history import noise_of
from kbase.comparison.inputs import ComparisonInputs, GateInputs, HistoryInputs, SideInputs
from kbase.comparison.side import SideMeta
from kbase.policy import ComparisonPolicy, Policy

ROOT = Path(__file__).resolve().parents[2]
COMPARISON = ROOT / "kbase" / "comparison"
TRACES = ROOT / "tests" / "data" / "kineto"
A, B = TRACES / "v100_resnet50_w0_jun2021_a.pt.trace.json.gz", TRACES / "v100_resnet50_w0_jun2021_b.pt.trace.json.gz"
# the comparison's reading modules: they resolve references in git and load captures and history from the store
READING = {"resolve.py", "reads.py"}


def _runtime_imports(path: Path) -> list[str]:
    """The kbase modules ``path`` imports when it runs (anywhere, deferred ones too), not those under
    ``if TYPE_CHECKING:`` (annotations only)."""
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return [m for m in out if m.startswith("kbase")]


def test_no_comparison_module_knows_settings():
    for path in sorted(COMPARISON.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "kbase.settings" not in text, path.name
        assert "Settings" not in text.replace("ComparisonPolicy", ""), path.name


def test_the_computing_modules_read_neither_store_nor_git():
    computing = [p for p in sorted(COMPARISON.glob("*.py")) if p.name not in READING]
    assert {p.name for p in computing} >= {"compare.py", "diff.py", "gate.py", "history.py", "inputs.py", "side.py"}
    for path in computing:
        found = [m for m in _runtime_imports(path) if m.startswith(("kbase.store", "kbase.gitrepo", "kbase.api"))]
        assert not found, (path.name, found)
        assert "StoreReader" not in path.read_text(encoding="utf-8"), path.name


def test_the_pure_comparison_takes_inputs_and_a_policy():
    for fn, inputs in ((compare, ComparisonInputs), (gate, GateInputs)):
        params = list(inspect.signature(fn).parameters.values())
        assert [p.name for p in params[:2]] == ["inputs", "policy"]
        assert params[0].annotation in (inputs.__name__, inputs)
        assert params[1].annotation in ("ComparisonPolicy", ComparisonPolicy)


def _side(path: Path, label: str) -> SideInputs:
    lb = kbase.top(path, sketches=True)
    meta = SideMeta(gpu_models=",".join(lb.summary.gpu_models), gpu_count=int(lb.summary.gpus))
    return SideInputs(label=label, captures=(capture_of_leaderboard(lb),), meta=meta)


@pytest.fixture(scope="module")
def traces_inputs() -> ComparisonInputs:
    return ComparisonInputs(before=_side(A, "a"), after=_side(B, "b"))


def test_the_comparison_runs_with_no_store_loaded(traces_inputs, tmp_path):
    """Inputs built in memory, compared in a process that has never loaded the store, git or the settings: the same
    table and verdict as ``kbase.gate`` of the two files (which reads them itself)."""
    pickled = tmp_path / "inputs.pickle"
    pickled.write_bytes(pickle.dumps(GateInputs(traces_inputs)))
    child = f"""
import pickle, sys
from kbase.comparison.compare import gate
from kbase.policy import ComparisonPolicy
inputs = pickle.loads(open({str(pickled)!r}, "rb").read())
result = gate(inputs, ComparisonPolicy())
loaded = sorted(m for m in sys.modules if m.startswith(("kbase.store", "kbase.settings", "kbase.gitrepo", "kbase.api",
                                                        "sqlite3", "psycopg", "git")))  # (psycopg2 too)
assert not loaded, loaded
print(result.verdict.status.value, len(result.comparison.result))
print(",".join(result.comparison.result.table["class"].tolist()))
"""
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert run.returncode == 0, run.stderr
    head, classes = run.stdout.splitlines()
    through_api = kbase.gate(str(A), str(B), kbase.Settings.load(repo=ROOT))
    assert head == f"{through_api.verdict.status.value} {len(through_api.comparison.result)}"
    assert classes == ",".join(through_api.comparison.result.table["class"].tolist())


def test_history_noise_from_inputs_in_memory(traces_inputs):
    """The noise model on history held in memory: five past baselines whose levels move 1% apart give every kernel a
    measured run-to-run sd, and the diff takes it as the kernels' between-process noise."""
    from kbase.comparison.compare import pool

    before = pool(traces_inputs.before).side
    names = before.kernels.index.tolist()
    per_iter = before.kernels["per_unit_ns"]
    levels = per_iter[:, None] * np.array([1.0, 1.01, 0.99, 1.0, 1.02])[None, :]
    past = tuple(SimpleNamespace(id=i, aligned=True, iterations_used=10, gpu_count=1, summary_json="{}")
                 for i in range(1, 6))
    history = HistoryInputs(past=past, where="in memory", aligned=True, names=tuple(names),  # type: ignore[arg-type]
                            levels=levels)
    noise, notes = noise_of(history, before, Policy())
    assert noise is not None and notes[-1].startswith("history noise: 5 past baselines on in memory")
    assert all(0.0 < noise.sd[n] < 0.05 for n in names)
    too_few = HistoryInputs(past=past[:4], where="in memory", aligned=True)  # type: ignore[arg-type]
    assert noise_of(too_few, before, Policy())[0] is None
    result = compare(ComparisonInputs(traces_inputs.before, traces_inputs.after, history), ComparisonPolicy())
    sources = {s for s in result.result.table["run_noise_source"].tolist() if s}
    assert sources == {"history"}


def test_the_policy_is_built_from_the_settings_once_and_frozen(tmp_path):
    import dataclasses

    s = kbase.Settings.load(repo=tmp_path, environ={}, gpu_hour_cost=2.5, gpus=8, policy={"fpr": 0.01})
    policy = s.comparison_policy()
    assert policy.gate is s.policy and policy.gate.fpr == 0.01
    assert policy.pricing is not None and (policy.pricing.gpu_hour_cost, policy.pricing.gpus) == (2.5, 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.gate.fpr = 0.5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.pricing = None  # type: ignore[misc]
