"""What to compare: turn ``HEAD~1``, ``@12`` or ``run.sqlite`` into a diff side.

- ``@ID``: that stored baseline.
- an existing file or directory: a profile, whose leaderboard is computed on the fly (nothing stored).
- anything else: a git revision. Its baselines (repeat captures pooled) are used; when it has none,
  first-parent ancestry is walked (at most ``ANCESTRY_LIMIT`` commits) to the nearest commit that
  has one, and the note says which commit and how many were skipped (``strict`` makes it an error).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kbase.compare.diff import Side, side_from_leaderboards
from kbase.errors import InputError
from kbase.gitrepo import ANCESTRY_LIMIT


@dataclass
class Resolved:
    side: Side
    commit: str | None
    baseline_ids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def is_profile_ref(ref: str) -> bool:
    return not ref.startswith("@") and Path(ref).exists()


def _meta_from_baselines(bs) -> dict:
    b = bs[-1]
    return {"workload": b.workload, "gpu_models": b.gpu_models, "gpu_count": b.gpu_count,
            "window_spec": b.window_spec, "commit": b.commit, "baselines": [x.id for x in bs]}


def _from_baselines(engine, bs, label: str, notes: list[str]) -> Resolved:
    from kbase.store import load_leaderboard

    newest = bs[-1]
    same = [b for b in bs if b.fingerprint == newest.fingerprint]
    if len(same) < len(bs):
        notes.append(f"{label}: {len(bs) - len(same)} baseline(s) at this commit have another GPU/window fingerprint and were not pooled")
    if len(same) > 1:
        notes.append(f"{label}: pooled {len(same)} repeat captures ({', '.join(f'@{b.id}' for b in same)})")
    lbs = [load_leaderboard(engine, b.id) for b in same]
    side = side_from_leaderboards(lbs, label, _meta_from_baselines(same))
    return Resolved(side=side, commit=newest.commit, baseline_ids=[b.id for b in same], notes=notes)


def resolve(ref: str, *, engine=None, workload: str | None = None, repo: Path | None = None, spec=None,
            strict: bool = False, open_engine=None) -> Resolved:
    """One side of a diff. ``open_engine()`` is called only when the store is needed."""
    from kbase.store import DEFAULT_WORKLOAD, baselines_at, get_baseline

    if is_profile_ref(ref):
        from kbase.analysis.leaderboard import build_leaderboard
        from kbase.readers import read_profile
        from kbase.analysis.window import WindowSpec, select_window

        spec = spec or WindowSpec()
        lb = build_leaderboard(select_window(read_profile(Path(ref)), spec))
        meta = {"workload": workload, "gpu_models": ",".join(lb.summary["gpu_models"]),
                "gpu_count": int(lb.summary["gpus"]), "window_spec": spec.key(), "commit": None, "baselines": []}
        return Resolved(side=side_from_leaderboards([lb], f"{ref} (profile, not stored)", meta), commit=None)
    if engine is None:
        engine = open_engine()
    token = ref[1:] if ref.startswith("@") else None
    if token is not None:
        if not token.isdigit():
            raise InputError(f"{ref!r}: a baseline id looks like @12")
        b = get_baseline(engine, int(token))
        return _from_baselines(engine, [b], f"@{b.id} ({b.commit[:12]})", [])
    from kbase.gitrepo import first_parents, open_repo, resolve_commit

    workload = workload or DEFAULT_WORKLOAD
    repo_obj = open_repo(repo)
    commit = resolve_commit(repo_obj, ref).hexsha
    chain = first_parents(repo_obj, commit, ANCESTRY_LIMIT)
    found = baselines_at(engine, workload, chain)
    for skipped, c in enumerate(chain):
        if c in found:
            notes = []
            if skipped:
                if strict:
                    raise InputError(f"no baseline of workload {workload!r} at {ref} ({commit[:12]}); --strict forbids "
                                     f"walking back (nearest: {c[:12]}, {skipped} commit(s) back)")
                notes.append(f"{ref}: no baseline at {commit[:12]}; using {c[:12]} ({skipped} commit(s) back on first-parent history)")
            return _from_baselines(engine, found[c], f"{ref} ({c[:12]})", notes)
    raise InputError(f"no baseline of workload {workload!r} at {ref} ({commit[:12]}) or its "
                     f"{len(chain) - 1} first-parent ancestor(s); run kbase snapshot there first")


def describe(resolved: Resolved) -> dict:
    s = resolved.side
    return {"label": s.label, "commit": resolved.commit, "baselines": resolved.baseline_ids, "unit": s.unit,
            "units": s.n_units, "gpus": s.n_gpus, "aligned": s.aligned, "workload": s.meta.get("workload"),
            "gpu_models": s.meta.get("gpu_models"), "window_spec": s.meta.get("window_spec")}


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, default=str, ensure_ascii=False)
