"""Tokens per second of the embedded model through both live backends.

    python benchmarks/generation_speed.py [--tokens 64] [--n 1 4] [--repeats 2] [--skip-server]

In-process transformers and `transformers serve` (openai backend, completions
mode, n concurrent requests) on the same prepared checkpoint, same prompt.
Greedy decoding for n=1, temperature 1.0 for n>1. Figures include prefill; the
first call of each backend is a warm-up and is not counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from kernelsweep.models import load_backend
from kernelsweep.models.embedded import cache_dir, prepare
from kernelsweep.models.server import LocalServer

MESSAGES = [
    {"role": "system", "content": "You are an expert CUDA programmer. Answer with one Python code block."},
    {"role": "user", "content": "Rewrite this PyTorch module as ModelNew with a custom kernel:\n\n"
                                "class Model(nn.Module):\n    def forward(self, a, b):\n"
                                "        return torch.relu(a + b)\n"},
]


def measure(backend, *, n: int, tokens: int, repeats: int) -> dict:
    temperature = 0.0 if n == 1 else 1.0
    backend.generate(MESSAGES, n=n, temperature=temperature, top_p=1.0, max_tokens=4, seed=0, key={})  # warm-up
    rates, generated, seconds = [], 0, 0.0
    for r in range(repeats):
        start = time.perf_counter()
        out = backend.generate(MESSAGES, n=n, temperature=temperature, top_p=1.0, max_tokens=tokens, seed=r + 1,
                               key={})
        elapsed = time.perf_counter() - start
        count = sum(c.completion_tokens or 0 for c in out)
        rates.append(count / elapsed)
        generated += count
        seconds += elapsed
    return {"n": n, "tokens": generated, "seconds": seconds, "tok_s": statistics.median(rates),
            "per_seq_tok_s": statistics.median(rates) / n}


def report(name: str, rows: list[dict]) -> None:
    for row in rows:
        print(f"{name:<26} n={row['n']:<2} {row['tokens']:>5} tokens in {row['seconds']:7.1f} s   "
              f"{row['tok_s']:6.2f} tokens/s total   {row['per_seq_tok_s']:6.2f} per sequence", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None, help="prepared checkpoint (default: the test cache)")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--n", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads for both backends")
    parser.add_argument("--skip-server", action="store_true")
    args = parser.parse_args()

    checkpoint = Path(args.checkpoint) if args.checkpoint else prepare(cache_dir())
    import torch

    print(f"checkpoint {checkpoint}; torch threads {args.threads or torch.get_num_threads()}; "
          f"{args.tokens} tokens per sequence; load average {os.getloadavg()[0]:.1f}")

    start = time.perf_counter()
    local = load_backend("local", {"backend": "transformers", "path": str(checkpoint), "device": "cpu",
                                   "threads": args.threads})
    local._loaded()
    print(f"in-process load: {time.perf_counter() - start:.1f} s")
    report("transformers (in-process)", [measure(local, n=n, tokens=args.tokens, repeats=args.repeats)
                                         for n in args.n])

    if not args.skip_server:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            with LocalServer(str(checkpoint), device="cpu", log_path=Path(tmp) / "serve.log",
                             threads=args.threads) as server:
                print(f"transformers serve ready: {time.perf_counter() - start:.1f} s")
                remote = load_backend("served", {"backend": "openai", "base_url": server.base_url,
                                                 "model": server.model_id, "chat": False, "n_per_request": False})
                report("openai (transformers serve)", [measure(remote, n=n, tokens=args.tokens,
                                                               repeats=args.repeats) for n in args.n])
                remote.close()


if __name__ == "__main__":
    main()
