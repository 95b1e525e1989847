"""The in-process transformers backend on the real embedded model (Gemma 3 270M)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from model_helpers import MESSAGES, make_key

from kernelsweep.models import ModelSetupError, load_backend
from kernelsweep.models.messages import render_plain_prompt

TOKENS = 8  # ~1-10 tokens/s on a shared 2-core machine: keep calls short


def backend(checkpoint, **over):
    return load_backend("gemma", {"backend": "transformers", "path": str(checkpoint), **over})


def call(b, *, n=1, temperature=0.0, seed=1, top_p=1.0):
    return b.generate(MESSAGES, n=n, temperature=temperature, top_p=top_p, max_tokens=TOKENS, seed=seed,
                      key=make_key())


def test_missing_checkpoint_says_how_to_prepare(tmp_path):
    with pytest.raises(ModelSetupError, match="checkpoint not found.*kernelsweep prepare-model"):
        backend(tmp_path / "models" / "gemma3-270m")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelSetupError, match="not a complete checkpoint.*prepare-model"):
        backend(tmp_path / "empty")


def test_cuda_on_a_machine_without_it(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    (tmp_path / "config.json").write_text("{}")  # checked before any weights are read
    with pytest.raises(ModelSetupError, match="CUDA is not available"):
        call(backend(tmp_path, device="cuda"))
    with pytest.raises(ModelSetupError, match="device must be"):
        call(backend(tmp_path, device="tpu"))


@pytest.mark.slow
def test_greedy_is_reproducible_and_seed_independent(embedded_checkpoint):
    b = backend(embedded_checkpoint)
    first = call(b, n=2, seed=1)
    again = call(b, n=1, seed=2)
    assert first[0].text == first[1].text == again[0].text and first[0].text.strip()
    c = first[0]
    assert c.request == {"prompt": render_plain_prompt(MESSAGES)}  # base model: no chat template
    assert c.finish_reason in ("stop", "length") and 0 < c.completion_tokens <= TOKENS
    assert c.prompt_tokens > 10 and c.latency_s > 0 and c.meta["batch"]["rows"] == 1
    assert c.meta["generation"]["do_sample"] is False
    # Loaded once per process: a second backend on the same checkpoint shares the model.
    single = backend(embedded_checkpoint, threads=1)
    assert single._loaded()[0] is b._loaded()[0]
    import torch

    assert torch.get_num_threads() == 1 and call(single)[0].text == first[0].text


@pytest.mark.slow
def test_sampling_same_seed_same_text_across_processes(embedded_checkpoint):
    b = backend(embedded_checkpoint)
    one = [c.text for c in call(b, n=2, temperature=1.0, seed=7)]
    two = [c.text for c in call(b, n=2, temperature=1.0, seed=7)]
    other = [c.text for c in call(b, n=2, temperature=1.0, seed=8)]
    assert one == two and one != other
    assert all(c.meta["generation"]["top_k"] == 0 for c in call(b, n=1, temperature=1.0, seed=9))
    script = (
        "import json, sys\nfrom kernelsweep.models import load_backend\n"
        f"b = load_backend('gemma', {{'backend': 'transformers', 'path': {str(embedded_checkpoint)!r}}})\n"
        f"out = b.generate({MESSAGES!r}, n=2, temperature=1.0, top_p=1.0, max_tokens={TOKENS}, seed=7, key={{}})\n"
        "print(json.dumps([c.text for c in out]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == one


@pytest.mark.slow
def test_chat_true_needs_a_template(embedded_checkpoint):
    with pytest.raises(ModelSetupError, match="no chat template"):
        call(backend(embedded_checkpoint, chat=True))


def test_a_base_model_answer_ends_at_the_next_turn_heading():
    from kernelsweep.models.messages import TURN_STOPS, end_of_turn

    assert "\n### User" in TURN_STOPS and "\n### Instructions" in TURN_STOPS
    answer = "Fuse the loop.\n```python\nclass ModelNew: pass\n```\n"
    assert end_of_turn(answer + "\n### User\nHere is a module") == len(answer)
    assert end_of_turn("### Instructions\nYou are a kernel engineer") == 0  # restating the prompt at once
    assert end_of_turn(answer) is None
    assert end_of_turn("x = 1  ### User is not a heading here\n") is None
