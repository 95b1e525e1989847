"""Code extraction on messy responses and on the 150 real ones of the replay set."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelsweep.prompting.extract import METHODS, extract_code

REPO = Path(__file__).resolve().parents[1]
MODULE = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"


def replay_rows() -> list[dict]:
    folder = Path(os.environ.get("KERNELSWEEP_SHARED", REPO.parent / "shared")) / "replay" / "kernelbench-agentic"
    if not folder.is_dir():
        pytest.skip(f"replay set not found at {folder} (set KERNELSWEEP_SHARED to the shared folder)")
    rows = []
    for path in sorted(folder.glob("*.jsonl")):
        rows += [dict(json.loads(line), _file=path.name) for line in path.read_text().splitlines() if line.strip()]
    return rows


def test_all_150_real_responses_match_the_study_extraction():
    rows = replay_rows()
    assert len(rows) == 150
    for row in rows:
        result = extract_code(row["raw_response"])
        where = f"{row['_file']} {row['task']} t{row['turn']}"
        assert result.method == "fenced_python", where
        assert result.blocks == 1 and result.chosen == 0, where
        # Same code; ours ends with one newline (a well-formed file), theirs with none.
        assert result.code == row["extracted_code"].strip() + "\n", where
        assert result.method in METHODS


def test_fenced_python_with_prose_around():
    text = f"Here is my solution.\n\n```python\n{MODULE}```\n\nIt is fast because of fusion."
    result = extract_code(text)
    assert (result.code, result.method, result.blocks, result.chosen) == (MODULE, "fenced_python", 1, 0)


@pytest.mark.parametrize("opening", ["```py", "```Python", "``` python", "~~~python", "````python"])
def test_fence_variants(opening):
    closing = opening.split("python")[0].split("py")[0].split("Python")[0].strip()
    text = f"{opening}\n{MODULE}{closing}\n"
    result = extract_code(text)
    assert result.code == MODULE and result.method == "fenced_python"


def test_untagged_fence_is_fenced_any():
    result = extract_code(f"```\n{MODULE}```")
    assert result.code == MODULE and result.method == "fenced_any"


def test_tilde_block_is_not_closed_by_backticks():
    text = f"~~~python\n{MODULE}```\nprint('still inside')\n~~~\n"
    result = extract_code(text)
    assert result.code == MODULE + "```\nprint('still inside')\n"


def test_indented_fence_in_a_list_is_dedented():
    indented = "".join(("   " + line if line else "") + "\n" for line in MODULE.splitlines())
    result = extract_code(f"1. Replace the model:\n   ```python\n{indented}   ```\n")
    assert result.code == MODULE and result.method == "fenced_python"


def test_unterminated_fence_cut_at_max_tokens():
    text = "Sure.\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x *"
    result = extract_code(text)
    assert result.method == "unterminated_fence"
    assert result.code.startswith("import torch\nclass ModelNew") and result.code.endswith("return x *\n")


def test_block_defining_modelnew_wins_over_a_longer_block():
    cuda = "```cpp\n" + "__global__ void k(float* x) { x[0] = 1; }\n" * 20 + "```\n"
    usage = "```python\nmodel = ModelNew()\nprint(model(torch.randn(4)))\n```\n"
    result = extract_code(f"The kernel:\n{cuda}The module:\n```python\n{MODULE}```\nUsage:\n{usage}")
    assert result.code == MODULE and result.blocks == 3 and result.chosen == 1


def test_last_parseable_modelnew_block_wins():
    first = MODULE.replace("return x", "return x +")  # a first, broken attempt
    second = MODULE.replace("return x", "return x * 2")
    text = f"Attempt:\n```python\n{first}```\nCorrected:\n```python\n{second}```\n"
    assert extract_code(text).code == second
    # When no ModelNew block parses, the last one is still the candidate (a syntax error, not no_code).
    text = f"```python\n{first}```\n```python\n{first.replace('x +', 'x -')}```\n"
    result = extract_code(text)
    assert result.chosen == 1 and "x -" in result.code


def test_without_modelnew_the_longest_python_block_wins():
    short, long = "import torch\n", "import torch\nx = torch.ones(3)\ny = x + 1\n"
    text = f"```python\n{short}```\n```bash\npip install something-much-longer-than-both-blocks\n```\n```python\n{long}```"
    result = extract_code(text)
    assert result.code == long and result.chosen == 2 and result.method == "fenced_python"


def test_non_python_block_alone_is_still_code():
    text = "```cpp\n__global__ void add(float* a) { a[0] += 1; }\n```"
    result = extract_code(text)
    assert result.method == "fenced_any" and "__global__" in result.code


def test_prose_only_is_no_code():
    for text in ("I cannot help with that.", "Sorry", "", "   \n\n", None,
                 "To optimise this, import the data first and then define the class carefully."):
        result = extract_code(text)
        assert (result.code, result.method) == (None, "none"), text


def test_empty_fence_is_no_code():
    assert extract_code("```python\n\n```").method == "none"


def test_bare_python_response():
    result = extract_code(MODULE)
    assert (result.code, result.method, result.blocks, result.chosen) == (MODULE, "raw_python", 0, None)


def test_bare_python_after_prose_with_trailing_prose():
    text = f"Here you go:\n{MODULE}\nThis keeps the interface unchanged."
    result = extract_code(text)
    assert result.method == "raw_python" and result.code == MODULE


def test_broken_bare_module_is_still_code():
    text = "import torch\nclass ModelNew(torch.nn.Module:\n    pass\n"
    result = extract_code(text)
    assert result.method == "raw_python" and "class ModelNew" in result.code


def test_module_before_a_lone_closing_fence():
    # What a base model writes when the prompt itself opened the fence.
    result = extract_code(MODULE + "```\n\nThis module returns its input.")
    assert (result.code, result.method) == (MODULE, "raw_python")


def test_closed_reasoning_trace_is_ignored():
    draft = "```python\nclass ModelNew: pass  # draft\n```"
    result = extract_code(f"<think>Let me draft.\n{draft}\n</think>\nFinal:\n```python\n{MODULE}```")
    assert result.code == MODULE and result.blocks == 1


def test_reasoning_opened_by_the_template():
    result = extract_code(f"drafting...\n```python\nclass ModelNew: pass\n```\n</think>\n```python\n{MODULE}```")
    assert result.code == MODULE and result.blocks == 1


def test_module_after_prose_before_a_lone_fence():
    result = extract_code(f"Here it is:\n{MODULE}```\nDone.")
    assert (result.code, result.method) == (MODULE, "raw_python")


def test_crlf_line_endings():
    text = f"```python\r\n{MODULE}```\r\n".replace("\n", "\r\n").replace("\r\r\n", "\r\n")
    assert extract_code(text).code == MODULE


def test_to_dict_is_json_ready():
    data = extract_code(f"```python\n{MODULE}```").to_dict()
    assert json.loads(json.dumps(data)) == {"code": MODULE, "method": "fenced_python", "blocks": 1, "chosen": 0}
