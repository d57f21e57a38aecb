"""The gate's output files, every one rendered from the one ``GateResult`` the terminal shows: the JSON
report (``--output``, schema ``kbase.diff/4``), the pull-request comment (``--comment-md``), JUnit XML
(``--junit``) and GitHub's step summary (``$GITHUB_STEP_SUMMARY``, appended).

Paths are checked before any work (``check_gate_files``): a file that cannot be written is exit 2 before
a verdict is printed; files are written before the terminal output, so a write that fails after all is
exit 2 with no verdict printed either.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    """Refuse, before any work is done or any verdict printed, an output file that cannot or must not be
    written (``safe_write.check_output_file``: folder missing or a file, a folder, no permission, a link)."""
    from kbase.safe_write import check_output_file

    if path is None or str(path) == "":
        return
    check_output_file(path, field)


def write_output(path: Path | str, text: str, field: str, append: bool = False) -> None:
    """Write (or append) an output file without following a link (``safe_write``); a failure is one line
    naming the option, exit 2."""
    from kbase.safe_write import write_output_file

    write_output_file(path, text, field, append=append)


def check_gate_files(files: GateFiles) -> None:
    for path, field in files.targets():
        check_writable(path, field)


def write_gate_files(result: GateResult, files: GateFiles, *, show_all: bool = False) -> dict[str, Any]:
    """Write ``files`` from ``result``; returns the ``kbase.diff/4`` document (verdict included) they and
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
