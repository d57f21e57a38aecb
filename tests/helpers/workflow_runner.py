"""Run a GitHub Actions job's shell steps locally, the way a runner would, for the template tests.

- ``run:`` steps run as ``bash --noprofile --norc -eo pipefail`` (Actions' default shell) in the
  repository, with the workflow, job and step ``env`` (``${{ ... }}`` looked up in a context dict),
  and ``GITHUB_ENV`` / ``GITHUB_OUTPUT`` / ``GITHUB_STEP_SUMMARY`` files like a runner's;
- ``uses:`` steps (checkout, setup-python, github-script, upload-artifact) are skipped and listed;
- a step runs when its ``if:`` holds (default ``success()``): the small expression subset the
  templates use (``always()``, ``success()``, ``==``, ``!=``, ``&&``, ``||``, ``hashFiles``, context
  paths, ``steps.<id>.outcome``, ``env.X`` of the workflow and job) is evaluated here;
- ``replace``: step name -> shell text run instead (the generator standing in for the profiler);
  ``skip``: step names not run (installing kbase: the tests run the checkout's kbase).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepResult:
    name: str
    status: str  # "success" | "failure" | "skipped" | "uses"
    rc: int = 0
    output: str = ""


@dataclass
class JobResult:
    steps: list[StepResult] = field(default_factory=list)
    summary: str = ""

    @property
    def ok(self) -> bool:
        return all(s.status != "failure" for s in self.steps)

    def step(self, name: str) -> StepResult:
        return next(s for s in self.steps if s.name == name)

    def log(self) -> str:
        return "\n".join(f"--- {s.name}: {s.status} (rc {s.rc})\n{s.output}" for s in self.steps)


def _lookup(path: str, ctx: dict):
    value = ctx
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return ""
        value = value[part]
    return value


def expression(expr: str, ctx: dict, cwd: Path, failed: bool):
    """Evaluate a GitHub expression of the subset the templates use."""
    expr = re.sub(r"\bhashFiles\('([^']*)'\)", lambda m: repr("h" if (cwd / m.group(1)).exists() else ""), expr)
    expr = expr.replace("always()", "True").replace("success()", repr(not failed)).replace("failure()", repr(failed))
    expr = expr.replace("cancelled()", "False")
    expr = re.sub(r"\b(github|secrets|env|matrix|inputs|steps|runner)(\.[A-Za-z_][\w-]*)+",
                  lambda m: repr(_lookup(m.group(0), ctx)), expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    return eval(expr, {"__builtins__": {}}, {"True": True, "False": False})


def _render(value, ctx: dict, cwd: Path) -> str:
    return _EXPR.sub(lambda m: str(expression(m.group(1), ctx, cwd, False)), str(value))


def run_job(job: dict, workflow_env: dict, ctx: dict, cwd: Path, base_env: dict, *,
            replace: dict[str, str] | None = None, skip: tuple[str, ...] = (), timeout: float = 300) -> JobResult:
    """Run ``job``'s steps in ``cwd`` and return what each did and the job summary."""
    replace = replace or {}
    files = {k: cwd.parent / f"{cwd.name}.{k.lower()}" for k in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    for f in files.values():
        f.write_text("")
    env = {**base_env, "GITHUB_ACTIONS": "true", "CI": "true", **{k: str(v) for k, v in files.items()}}
    env.update({k: _render(v, ctx, cwd) for k, v in workflow_env.items()})
    env.update({k: _render(v, ctx, cwd) for k, v in job.get("env", {}).items()})
    ctx = {**ctx, "env": {**{k: env[k] for k in (*workflow_env, *job.get("env", {}))}, **ctx.get("env", {})},
           "steps": {}}
    result = JobResult()
    failed = False
    for i, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i}"
        if "uses" in step:
            result.steps.append(StepResult(name, "uses"))
            continue
        if name in skip or not expression(step.get("if", "success()"), ctx, cwd, failed):
            result.steps.append(StepResult(name, "skipped"))
            if step.get("id"):
                ctx["steps"][step["id"]] = {"outcome": "skipped", "conclusion": "skipped"}
            continue
        step_env = {**env, **{k: _render(v, ctx, cwd) for k, v in step.get("env", {}).items()}}
        for line in files["GITHUB_ENV"].read_text().splitlines():  # what earlier steps exported
            if "=" in line:
                k, v = line.split("=", 1)
                step_env[k] = v
        script = replace.get(name, step["run"])
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd,
                              env=step_env, capture_output=True, text=True, timeout=timeout, check=False)
        status = "success" if proc.returncode == 0 else "failure"
        failed = failed or status == "failure"
        if step.get("id"):
            ctx["steps"][step["id"]] = {"outcome": status, "conclusion": status}
        result.steps.append(StepResult(name, status, proc.returncode, proc.stdout + proc.stderr))
    result.summary = files["GITHUB_STEP_SUMMARY"].read_text()
    return result
