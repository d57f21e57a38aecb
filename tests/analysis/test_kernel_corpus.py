"""The labelled corpus of real kernel names (``tests/data/kernel_names.jsonl``): the classifier is right on
every one. Each row: the full name as the profile holds it, its family, expected category and tensor-core
state, a one-line reason, the GPU of the capture (when known) and its source (a file of ../shared/data, or
``owner/repo@commit:path`` of a public trace, test or the library code that prints the name).
``docs/kernel-classification.md`` has the corpus' sources and sizes."""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import pytest

from kbase.analysis import classify

from helpers.shared import KINETO_DIR, NSYS_DIR, SHARED_SKIP_REASON, ro_connect

CORPUS = Path(__file__).resolve().parents[1] / "data" / "kernel_names.jsonl"
FAMILIES = {  # every family the issue names must be there, with at least this many names
    "cuBLAS": 20, "cuBLAS xmma": 3, "cuBLASLt nvjet": 5, "cuDNN": 30, "cuDNN xmma": 3, "CUTLASS": 20,
    "FlashAttention": 8, "Triton (Inductor)": 30, "fbgemm": 20, "NCCL/RCCL": 10, "CUB/Thrust": 5,
    "PyTorch elementwise": 30, "PyTorch reduce": 5, "PyTorch copy/fill": 10,
}


def corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_corpus_shape() -> None:
    rows = corpus()
    names = [r["name"] for r in rows]
    assert len(rows) >= 300 and len(set(names)) == len(names)
    assert CORPUS.stat().st_size < 500_000
    for r in rows:
        assert set(r) == {"name", "family", "category", "tc", "reason", "gpu", "source"}, r
        assert r["category"] in {c.value for c in classify.Category} and r["tc"] in classify.TC_SYMBOL, r
        assert r["reason"] and r["source"].startswith(("shared:", "pytorch/", "facebookresearch/", "AMD-AGI/",
                                                          "GindaChen/", "NVIDIA/", "Dao-AILab/")), r
    count = collections.Counter(r["family"] for r in rows)
    assert {f: count[f] for f in FAMILIES if count[f] < FAMILIES[f]} == {}
    gpus = " ".join(r["gpu"] for r in rows)
    for arch in ("V100", "A100", "H100", "H200", "B200", "MI300"):  # Volta to Blackwell (and ROCm)
        assert arch in gpus, arch
    states = collections.Counter(r["tc"] for r in rows)
    assert states["tc"] >= 80 and states["fallback"] >= 80 and states["na"] >= 300


def test_classifier_is_right_on_every_corpus_name() -> None:
    """Zero mismatches; a false ⚠ (the column an engineer acts on first) is listed apart."""
    false_warn, wrong = [], []
    for r in corpus():
        kind = classify.classify(r["name"])
        got = (kind.category.value, kind.rule.state.value)
        if got != (r["category"], r["tc"]):
            entry = f"{r['family']}: {r['name'][:120]} expected {r['category']}/{r['tc']}, got {got} ({kind.rule.why})"
            (false_warn if got[1] == "fallback" else wrong).append(entry)
    assert false_warn == [], "false ⚠:\n" + "\n".join(false_warn)
    assert wrong == [], "\n".join(wrong)


def test_kinds_of_agrees_with_classify_on_the_corpus() -> None:
    rows = corpus()
    kinds = classify.kinds_of([r["name"] for r in rows], {})
    assert [(k.category, k.tc) for k in kinds] == [(r["category"], r["tc"]) for r in rows]


def test_fbgemm_embedding_kernels_are_not_matmul() -> None:
    """The held-out case: fbgemm's embedding lookups (a namespace 'fbgemm', 'gemm' nowhere in the own
    name) are memory-bound table work, never ⚠."""
    rows = [r for r in corpus() if r["family"] == "fbgemm"]
    assert any(r["name"].startswith(("split_embedding", "void split_embedding")) for r in rows)
    assert {classify.tensor_core_state(r["name"])[0] for r in rows} == {classify.TC_NA}


def _shared_names(path: Path) -> set[str]:
    if path.suffix == ".sqlite":
        conn = ro_connect(path)
        try:
            return {v for (v,) in conn.execute("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                                "JOIN StringIds s ON s.id = k.demangledName")}
        finally:
            conn.close()
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return {e["name"] for e in events if str(e.get("cat", "")).lower() == "kernel"}


def test_corpus_names_from_shared_data_are_real() -> None:
    """Every name whose source is a file of ../shared/data is a kernel name of that very file."""
    rows = [r for r in corpus() if r["source"].startswith("shared:")]
    assert len(rows) >= 200
    by_file = collections.defaultdict(set)
    for r in rows:
        by_file[r["source"].removeprefix("shared:")].add(r["name"])
    for rel, names in sorted(by_file.items()):
        path = (NSYS_DIR if rel.startswith("nsys/") else KINETO_DIR) / rel.split("/", 1)[1]
        if not path.is_file():
            pytest.skip(SHARED_SKIP_REASON)
        assert names <= _shared_names(path), (rel, sorted(names - _shared_names(path))[:3])
