import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the synthetic results writer

from synthetic import write_small_study  # noqa: E402

from kernelsweep.report.spec import parse_study  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_study(tmp_path):
    """(results folder, STUDY.json path, StudySpec) of the hand-computed small study."""
    results = tmp_path / "results"
    study = write_small_study(results)
    path = tmp_path / "study.json"
    path.write_text(json.dumps(study))
    return results, path, parse_study(study)


@pytest.fixture
def shared_dir():
    shared = Path(os.environ.get("KERNELSWEEP_SHARED", REPO.parent / "shared"))
    if not shared.is_dir():
        pytest.skip(f"shared material not found at {shared} (set KERNELSWEEP_SHARED)")
    return shared
