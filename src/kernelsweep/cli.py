"""The `kernelsweep` command. Each subcommand lives in its own module, which
exposes `configure(parser)` and `main(args) -> int`; modules are imported only
when their subcommand runs, so `kernelsweep --help` stays fast and light."""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Order is the order shown in --help.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "tasks": ("kernelsweep.tasks.cli", "materialise and validate KernelBench / demo tasks"),
    "eval": ("kernelsweep.evaluator.cli_eval", "evaluate a candidate against a reference (isolated)"),
    "compile": ("kernelsweep.evaluator.cli_compile", "build a candidate's extensions into the hash-keyed cache"),
    "baseline": ("kernelsweep.evaluator.cli_baseline", "time eager PyTorch and torch.compile on a reference"),
    "profile": ("kernelsweep.profiling", "profile a reference with torch.profiler (guided prompts)"),
    "prepare-model": ("kernelsweep.models.embedded", "prepare the embedded Gemma 3 270M checkpoint"),
    "serve": ("kernelsweep.models.server", "start a local OpenAI-compatible server (transformers serve)"),
    "generate": ("kernelsweep.stages.generate", "sample one model call of the study matrix"),
    "prompt": ("kernelsweep.stages.prompt", "build the prompt of one turn"),
    "select": ("kernelsweep.stages.select", "select the best candidate so far"),
    "final": ("kernelsweep.stages.final", "write the final record of one study cell"),
    "report": ("kernelsweep.report.cli", "aggregate raw results into tables, figures and REPORT.md"),
    "gpu-slots": ("kernelsweep.gpu_slots", "run a command on a claimed GPU/CPU timing slot"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelsweep",
        description="Measure how well language models write GPU kernels (KernelBench).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in SUBCOMMANDS:
        build_parser().parse_args(argv)  # prints help or a clear usage error
        return 2
    name, rest = argv[0], argv[1:]
    module_name, help_text = SUBCOMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"kernelsweep {name}", description=help_text)
    module.configure(parser)
    args = parser.parse_args(rest)
    return int(module.main(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
