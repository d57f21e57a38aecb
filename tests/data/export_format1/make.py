"""Make a format-1 export folder with kbase 8503b53 (the last commit before kernel-table format 2) on the path:
``PYTHONPATH=/tmp/old python make.py OUT`` writes OUT/export and OUT/expected.json."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from kbase.store import open_store
from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history, write_bulk_history


def main(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    spec = HistorySpec(commits=2, steps=[InjectedStep(1, _kernel("nvjet_hsh_256x128"), 1.3, "gemm")], iterations=3,
                       n_gpus=1)
    h = generate_history(root / "h", spec)
    store = open_store(h.db_url)
    write_bulk_history(store.engine, 2, workload="bulk", n_kernels=12, iterations=4, gpus=2, op_split=0.5)
    store.close()

    def kb(*args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "kbase.cli", *args, "--db", h.db_url, "--repo", str(h.repo)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r
        return r.stdout

    kb("export", str(root / "export"))
    listed = json.loads(kb("list", "--format", "json"))["baselines"]
    shown = {f"{b['workload']}@{b['commit']}": json.loads(kb("show", f"@{b['id']}", "--name", b["workload"],
                                                              "--format", "json")) for b in listed}
    diffs = {}
    for w in ("train", "bulk"):
        ids = [b["id"] for b in listed if b["workload"] == w]
        diffs[w] = json.loads(kb("diff", f"@{min(ids)}", f"@{max(ids)}", "--name", w, "--format", "json"))
    (root / "expected.json").write_text(json.dumps({"show": shown, "diff": diffs}, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
