"""The run layout: templates, the task-id pattern and the key read back from a
path agree with each other and with the workflow's wildcard constraints."""

import re

import pytest

from kernelsweep.study import layout
from kernelsweep.study.matrix import AGENTIC_ROLES
from kernelsweep.tasks.ids import format_task_id, parse_task_id

KEY = {"model": "qwen-7b.v2", "method": "agentic_n8", "task": "L3-1000", "sample": 2, "turn": 1, "cand": 7,
       "precision": "bf16"}
CELL_FIELDS = ("model", "method", "task", "sample", "precision")


def test_key_of_reads_back_every_template():
    assert layout.key_of(f"/x/results/{layout.CAND.format(**KEY)}/{layout.EVAL}").as_dict() == KEY
    turn = layout.key_of(f"results/{layout.TURN.format(**KEY)}/{layout.SELECT}")
    assert (turn.turn, turn.cand) == (1, None)
    cell = layout.key_of(f"results/{layout.CELL.format(**KEY)}/{layout.FINAL}")
    assert cell.as_dict() == {k: KEY[k] for k in CELL_FIELDS}
    # a results folder that itself lies under a folder named runs/
    assert layout.key_of(f"/runs/a/b/results/{layout.CAND.format(**KEY)}/{layout.CANDIDATE}").as_dict() == KEY


@pytest.mark.parametrize("path", ["results/tasks/L1-001.json", "results/runs/fp32/m/x/L1-1/s0/t0/c0/eval.json",
                                  "results/runs/m/x/L1-001/s0/t0/c0/eval.json",  # from before precision was a part
                                  "t0/c0/eval.json"])
def test_key_of_refuses_paths_outside_the_layout(path):
    with pytest.raises(ValueError, match="is not under runs/"):
        layout.key_of(path)


def test_one_task_id_pattern_for_the_workflow_and_the_tasks():
    wildcard = re.compile(layout.WILDCARDS["task"])
    for level, problem in [(0, 1), (1, 10), (3, 999), (2, 1000)]:
        task = format_task_id(level, problem)
        assert wildcard.fullmatch(task) and parse_task_id(task) == (level, problem)
    assert not wildcard.fullmatch("L1-01")
    assert "{3," not in layout.TASK_ID  # Snakemake would read it as a wildcard


def test_candidate_files_and_numbered_folders(tmp_path):
    turn = tmp_path / layout.TURN.format(**KEY)
    for name in ("c10", "c2", "c0", "cx", "notes"):
        (turn / name).mkdir(parents=True)
    assert [n for n, _ in layout.numbered(turn, "cand")] == [0, 2, 10]
    assert layout.numbered(tmp_path / "missing", "turn") == []
    eval_path = turn / "c2" / layout.EVAL
    assert layout.cand_file(eval_path, layout.CANDIDATE) == turn / "c2" / "candidate.py"
    with pytest.raises(ValueError):
        layout.cand_file(eval_path, layout.SELECT)


def test_folder_helpers_are_the_templates(tmp_path):
    cell = tmp_path / layout.CELL.format(**KEY)
    assert layout.turn_dir(cell, KEY["turn"]) == tmp_path / layout.TURN.format(**KEY)
    assert layout.cand_dir(cell, KEY["turn"], KEY["cand"]) == tmp_path / layout.CAND.format(**KEY)
    assert layout.key_of(cell / layout.REACT_TRACE).as_dict() == {k: KEY[k] for k in CELL_FIELDS}


def test_every_agentic_role_has_a_folder():
    assert set(layout.ROLE_DIRS) == set(AGENTIC_ROLES)
    assert layout.ROLE_DIRS["feedback"].startswith(layout.TURN)  # one feedback per turn
