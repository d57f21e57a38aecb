"""What the calibration scripts share (``calibrate.py``, ``calibrate_history.py``): the real A/A pair's file
names, the classes that count as detected, settings on a scratch store, the kernels a diff flagged."""

from __future__ import annotations

import tempfile
from pathlib import Path

import kbase

KINETO = "kineto/v100_resnet50_w4_repeat_{}.pt.trace.json.gz"
TEST_DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "kineto"
DETECTED = ("regressed", "regressed_below_floor")  # significant; the gate fails on the first (min_effect_pct)


def calibration_settings(**kw) -> kbase.Settings:
    return kbase.Settings.load(db="sqlite:///" + str(Path(tempfile.gettempdir()) / "kbase-calibrate.db"), **kw)


def flagged_kernels(rows) -> list[str]:
    return list(rows.loc[rows["class"].isin(["regressed", "regressed_below_floor", "improved"]), "name"])


def fresh_sets(data: Path) -> dict[str, list[Path]]:
    """Real fresh-process captures, by configuration group (pairs within a group differ only by the process and
    the DataLoader's workers)."""
    k = data / "kineto"
    return {
        "June 2021 (4 processes)": [TEST_DATA / "v100_resnet50_w0_jun2021_a.pt.trace.json.gz",
                                    TEST_DATA / "v100_resnet50_w0_jun2021_b.pt.trace.json.gz",
                                    k / "v100_resnet50_w4_repeat_a.pt.trace.json.gz",
                                    k / "v100_resnet50_w4_repeat_b.pt.trace.json.gz"],
        "January 2021 (2 processes)": [TEST_DATA / "v100_resnet50_w0_jan2021.pt.trace.json.gz",
                                       TEST_DATA / "v100_resnet50_w4_jan2021.pt.trace.json.gz"],
        "December 2020 (2 processes)": [k / "v100_resnet50_workers0.pt.trace.json.gz",
                                        k / "v100_resnet50_workers4.pt.trace.json.gz"],
    }
