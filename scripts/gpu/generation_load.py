"""Keep generating with the transformers backend until STOP_FILE exists, and
record each call (for the GPU split check: generation on one GPU while another
times candidates).

    python scripts/gpu/generation_load.py CHECKPOINT STOP_FILE OUT.json
"""

import json
import os
import sys
import time

from kernelsweep.models import load_backend


def main(checkpoint: str, stop_file: str, out: str) -> int:
    backend = load_backend("random", {"backend": "transformers", "path": checkpoint, "device": "cuda",
                                      "dtype": "bfloat16", "chat": False, "max_tokens": 256})
    messages = [{"role": "user", "content": "Write a fused CUDA kernel for bias plus ReLU."}]
    calls = []
    while not os.path.exists(stop_file):
        start = time.time()
        out_list = backend.generate(messages, n=8, temperature=0.8, top_p=1.0, max_tokens=256, seed=len(calls),
                                    key={"model": "random", "method": "load", "task": "none", "sample": 0, "turn": len(calls)})
        calls.append({"start": start, "end": time.time(), "tokens": sum(c.completion_tokens for c in out_list)})
        print(f"call {len(calls)}: {calls[-1]['tokens']} tokens in {calls[-1]['end'] - start:.1f} s", flush=True)
    with open(out, "w") as f:
        json.dump({"visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "calls": calls}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
