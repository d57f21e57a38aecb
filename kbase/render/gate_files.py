"""The gate's output files, every one rendered from the one ``GateResult`` the terminal shows: the JSON
report (``--output``, schema ``kbase.diff/3``), the pull-request comment (``--comment-md``), JUnit XML
(``--junit``) and GitHub's step summary (``$GITHUB_STEP_SUMMARY``, appended).

Paths are checked before any work (``check_gate_files``): a file that cannot be written is exit 2 before
a verdict is printed; files are written before the terminal output, so a write that fails after all is
exit 2 with no verdict printed either.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbase.errors import SettingsError

if TYPE_CHECKING:
    from kbase.comparison.result import GateResult


@dataclass(frozen=True)
class GateFiles:
    """Where the gate writes its files (None: not written); each field is the setting's name in messages."""

    output: Path | None = None
    comment_md: Path | None = None
    junit: Path | None = None
    step_summary: Path | str | None = None

    def targets(self) -> list[tuple[Path | str | None, str]]:
        return [(self.output, "output"), (self.junit, "junit"), (self.step_summary, "step_summary"),
                (self.comment_md, "comment_md")]


def check_writable(path: Path | str | None, field: str) -> None:
    """Refuse, before any work is done or any verdict printed, an output file that cannot be written: its
    folder missing or a file, the path a folder, or no write permission."""
    if path is None or str(path) == "":
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise SettingsError("is a directory, not a file", field=field, value=str(p))
    if not parent.exists():
        raise SettingsError(f"cannot be written: folder {parent} does not exist", field=field, value=str(p))
    if not parent.is_dir():
        raise SettingsError(f"cannot be written: {parent} is a file, not a folder", field=field, value=str(p))
    target = p if p.exists() else parent
    if not os.access(target, os.W_OK):
        raise SettingsError(f"cannot be written: {target} is not writable", field=field, value=str(p))


def write_output(path: Path | str, text: str, field: str, append: bool = False) -> None:
    """Write (or append) an output file; a failure is one line naming the option, exit 2."""
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise SettingsError(f"cannot be written ({exc.strerror})", field=field, value=str(path)) from None


def check_gate_files(files: GateFiles) -> None:
    for path, field in files.targets():
        check_writable(path, field)


def write_gate_files(result: GateResult, files: GateFiles, *, show_all: bool = False) -> dict[str, Any]:
    """Write ``files`` from ``result``; returns the ``kbase.diff/3`` document (verdict included) they and
    every other output of the gate are rendered from."""
    from kbase.render import diff as render_diff

    verdict = result.verdict
    doc = render_diff.diff_doc(result.comparison, verdict)
    if files.output:
        write_output(files.output, render_diff.diff_json(doc) + "\n", "output")
    if files.comment_md:
        from kbase.render.comment import comment_markdown

        write_output(files.comment_md, comment_markdown(doc), "comment_md")
    if files.junit:
        from kbase.render.junit import junit_xml

        write_output(files.junit, junit_xml(doc, verdict), "junit")
    if files.step_summary:
        write_output(files.step_summary, render_diff.diff_md(doc, show_all, verdict), "step_summary", append=True)
    return doc


def write_no_baseline_comment(path: Path, workload: str, head: str, reason: str) -> None:
    """``--if-no-baseline pass``: the comment says why nothing was compared."""
    from kbase.render.comment import no_baseline_markdown

    write_output(path, no_baseline_markdown(workload, head, reason), "comment_md")
