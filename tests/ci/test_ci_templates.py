"""The CI templates work as written: both parse, and the GitHub one's shell steps, run against a local
git repository with the generator standing in for the profiler, go: first run PASS with a notice ->
regression FAIL -> accepted regression PASS; a fork PR without the store's secret passes with a notice.

The scenario runs the real ``kbase`` on PATH (``--comment-md``, ``--if-no-baseline pass``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.workflow_runner import run_job

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GITHUB = REPO / "ci" / "github" / "kbase.yml"
GITLAB = REPO / "ci" / "gitlab" / "kbase.gitlab-ci.yml"
PROFILE_STEP = "Profile the training job (PLACEHOLDER)"
INSTALL_STEP = "Install kbase"


def _github() -> dict:
    return yaml.safe_load(GITHUB.read_text())


def test_github_template_parses_and_says_what_it_must():
    wf = _github()
    triggers = wf.get("on", wf.get(True))  # PyYAML reads the bare key `on` as True
    assert set(triggers) == {"pull_request", "push"}
    assert wf["permissions"]["pull-requests"] == "write"
    job = wf["jobs"]["kernel-gate"]
    steps = {s.get("name", s.get("uses")): s for s in job["steps"]}
    install = steps[INSTALL_STEP]["run"]
    assert '"$KBASE_PIP_SPEC"' in install and "pip install ." not in install
    assert wf["env"]["KBASE_PIP_SPEC"].startswith("gpu-kbase[postgres] @ git+https://")
    gate = steps["Gate"]["run"]
    for flag in ("--if-no-baseline pass", "--strict", "--comment-md kbase-comment.md", "--junit kbase-junit.xml",
                 "--base-ref", "HEAD~1 HEAD"):
        assert flag in gate, flag
    assert "${{" not in gate  # expressions reach the script through env, never spliced into shell text
    sticky = steps["Post or update the sticky PR comment"]
    assert sticky["uses"].startswith("actions/github-script@") and "<!-- kbase-gate -->" in sticky["with"]["script"]
    assert "always()" in sticky["if"] and "head.repo.full_name == github.repository" in sticky["if"]
    assert fetch_depth_zero(job)


def fetch_depth_zero(job: dict) -> bool:
    return any(s.get("uses", "").startswith("actions/checkout@") and s.get("with", {}).get("fetch-depth") == 0
               for s in job["steps"])


def test_gitlab_template_parses_and_says_what_it_must():
    ci = yaml.safe_load(GITLAB.read_text())
    job = ci["kbase-gate"]
    assert job["artifacts"]["reports"]["junit"] == "kbase-junit.xml" and job["artifacts"]["when"] == "always"
    assert job["variables"]["GIT_DEPTH"] == 0
    image = job["image"]
    assert image.startswith("nvcr.io/nvidia/pytorch:") and image.split(":")[1] >= "25.01"  # Python 3.12
    assert any("sys.version_info >= (3, 11)" in line for line in job["before_script"])
    assert any('"$KBASE_PIP_SPEC"' in line for line in job["before_script"])
    script = "\n".join(job["script"])
    for flag in ("--if-no-baseline pass", "--strict", "--comment-md kbase-comment.md", "--base-ref"):
        assert flag in script, flag
    note = "\n".join(job["after_script"])
    assert "<!-- kbase-gate -->" in note and "merge_requests" in note
    for part in (script, note):  # every shell block is valid bash
        subprocess.run(["bash", "-n"], input=part, text=True, check=True)


PIN = re.compile(r'KBASE_PIP_SPEC: "gpu-kbase\[postgres\] @ git\+https://[^"@]+@(?P<ref>[^"]+)"')


def _pinned_ref() -> str:
    """The ref both templates install kbase at (one, the same in both)."""
    refs = {m["ref"] for path in (GITHUB, GITLAB) for m in PIN.finditer(path.read_text(encoding="utf-8"))}
    assert len(refs) == 1, refs
    return refs.pop()


def test_templates_pin_a_ref_the_repository_has():
    """What the templates install exists: a release tag that ``git tag`` lists, or a commit of this repository
    (a release commit: there are no tags yet), whose ``kbase/version.py`` is a released version (a CHANGELOG
    section); docs/ci.md and ci/README.md name the same ref. A pin of a tag never made (``@v0.2.0`` without the
    tag) fails here."""
    ref = _pinned_ref()
    if _git(REPO, "rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone may lack the pinned commit: clone with full history to check the pin")
    if re.fullmatch(r"[0-9a-f]{40}", ref):
        assert subprocess.run(["git", "cat-file", "-e", f"{ref}^{{commit}}"], cwd=REPO).returncode == 0, \
            f"the templates pin {ref}, which this repository does not have"
    else:
        assert ref in _git(REPO, "tag", "--list").split(), f"the templates pin {ref}, which `git tag` does not list"
    version = re.search(r'__version__ = "([^"]+)"', _git(REPO, "show", f"{ref}:kbase/version.py"))
    assert version is not None
    assert f"\n## {version[1]} " in (REPO / "CHANGELOG.md").read_text(encoding="utf-8")  # a released version
    for doc in (REPO / "docs" / "ci.md", REPO / "ci" / "README.md"):
        assert ref[:12] in doc.read_text(encoding="utf-8"), f"{doc.name} does not name the pinned ref {ref}"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'name = "gpu-kbase"' in pyproject and 'path = "kbase/version.py"' in pyproject


def test_templates_push_only_their_own_new_baselines():
    """The templates' push passes ``--new=head`` (KBASE_DATA_NEW=head): the job's own snapshot goes, a stray
    baseline is refused (tests/ci/test_data_accept.py runs the refusal)."""
    github = {s.get("name"): s for s in _github()["jobs"]["kernel-gate"]["steps"]}
    assert "bash ci/kbase-data.sh push --new=head" in github["Push the baselines (kbase-data branch)"]["run"]
    assert "KBASE_DATA_NEW=head bash ci/kbase-data.sh push" in GITLAB.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=lambda p: p.name)
def test_ci_templates_hold_the_commands_they_document(path):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    text = path.read_text(encoding="utf-8")
    for needed in ('kbase snapshot out/train.sqlite --name "$KBASE_NAME"', "kbase gate",
                   "--junit kbase-junit.xml", "--output kbase-report.json", "nsys export --type sqlite",
                   "KBASE_DB", 'pip install "$KBASE_PIP_SPEC"', "--capture-range=cudaProfilerApi"):
        assert needed in text, needed
    if path.name == "kbase.yml":
        job = next(iter(doc["jobs"].values()))
        checkout = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout"))
        assert checkout["with"]["fetch-depth"] == 0
        assert any(str(s.get("uses", "")).startswith("actions/upload-artifact") for s in job["steps"])
        assert '--base-ref "origin/' in text
    else:
        job = doc["kbase-gate"]
        assert job["artifacts"]["reports"]["junit"] == "kbase-junit.xml"
        assert job["variables"]["GIT_DEPTH"] in (0, "0")


# ------------------------------------------------------------------------------------------ runs


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, text: str, message: str) -> str:
    (repo / "train.py").write_text(text)
    _git(repo, "add", "train.py")
    _git(repo, "-c", "user.name=ci", "-c", "user.email=ci@kbase.invalid", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _profiler(slow: float) -> str:
    """The shell text run instead of nsys: a generated 2-GPU export, one GEMM ``slow`` x slower."""
    code = ("from kbase.synth.generate import ExportSpec, generate_export; from kbase.synth.demo import SLOWED_FAMILY; "
            "from kbase.synth.names import default_kernel_mix; "
            "k = next(k.name for k in default_kernel_mix() if k.name.startswith(SLOWED_FAMILY)); "
            f"generate_export('out/train.sqlite', ExportSpec(n_gpus=2, iterations=8, seed=int({slow} * 100)), "
            f"overwrite=True, slowdown={{k: {slow}}})")
    return f'mkdir -p out\npython -c "{code}"'


class Runner:
    def __init__(self, tmp: Path, bin_dir: Path):
        self.repo = tmp / "repo"
        self.repo.mkdir()
        _git(self.repo, "init", "-q", "-b", "main")
        self.store = f"sqlite:///{tmp / 'store.db'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "KBASE_"))}
        env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        self.env = env
        self.wf = _github()
        self.wf["env"]["KBASE_STORE"] = "database"  # this scenario: the store's URL in the KBASE_DB secret

    def run(self, event: str, slow: float, secret: str | None = None, base_ref: str = ""):
        head = _git(self.repo, "rev-parse", "--abbrev-ref", "HEAD")
        ctx = {"github": {"event_name": event, "base_ref": base_ref, "repository": "org/train",
                          "ref_name": head if event == "push" else "7/merge",
                          "head_ref": head if event == "pull_request" else "",
                          "event": {"pull_request": {"head": {"repo": {"full_name": "org/train"}}}}},
               "secrets": {"KBASE_DB": self.store if secret is None else secret}}
        return run_job(self.wf["jobs"]["kernel-gate"], self.wf["env"], ctx, self.repo, self.env,
                       replace={PROFILE_STEP: _profiler(slow)}, skip=(INSTALL_STEP,))

    def kbase(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["kbase", *args], cwd=self.repo, env={**self.env, "KBASE_DB": self.store},
                              capture_output=True, text=True, check=False)


def _scenario(tmp_path: Path, bin_dir: Path) -> None:
    r = Runner(tmp_path, bin_dir)
    _commit(r.repo, "model = build()\n", "train: first profiled commit")
    first = r.run("push", 1.0)
    assert first.ok, first.log()
    assert "::notice" in first.step("Gate").output and "PASS" in first.summary, first.log()
    assert "<!-- kbase-gate -->" in (r.repo / "kbase-comment.md").read_text()

    c2 = _commit(r.repo, "model = build(gemm_tile='128x256')\n", "train: switch GEMM tile config")
    second = r.run("push", 1.25)
    assert not second.ok and second.step("Gate").rc == 1, second.log()
    comment = (r.repo / "kbase-comment.md").read_text()
    assert "FAIL" in comment and "regressed" in comment and "sm90" in comment
    assert "FAIL" in second.summary and "❌" in second.summary  # the comment and the JUnit table
    assert second.step("Job summary (the PR comment and the JUnit results)").status == "success"

    acc = r.kbase("accept", "*sm90_xmma_gemm*", "--rev", c2, "--reason", "new tile config, accepted",
                  "--name", r.wf["env"]["KBASE_NAME"], "--repo", str(r.repo))
    assert acc.returncode == 0, acc.stderr
    third = r.run("push", 1.25)
    assert third.ok, third.log()
    assert "PASS" in (r.repo / "kbase-comment.md").read_text() and "accepted" in third.summary

    # a fork PR: no secret, so no store; it stores locally and passes with a notice
    main = _git(r.repo, "rev-parse", "HEAD")
    _git(r.repo, "update-ref", "refs/remotes/origin/main", main)
    _git(r.repo, "checkout", "-q", "-b", "fork-feature")
    _commit(r.repo, "model = build(gemm_tile='64x64')\n", "fork: try smaller tiles")
    fork = r.run("pull_request", 1.0, secret="", base_ref="main")
    assert fork.ok, fork.log()
    assert "no KBASE_DB secret" in fork.step("Say which store").output
    assert (r.repo / ".kbase" / "kbase.db").exists()
    assert fork.step("Post or update the sticky PR comment").status == "uses"


def test_github_steps_first_run_regression_accept_fork(tmp_path):
    """With the real kbase on PATH."""
    _scenario(tmp_path, Path(sys.executable).parent)


