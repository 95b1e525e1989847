"""The `kernelsweep` command. Each subcommand lives in its own module (or a
class of one, `module:Class`), which exposes `configure(parser)` and
`main(args) -> int`; modules are imported only
when their subcommand runs, so `kernelsweep --help` stays fast and light."""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Order is the order shown in --help.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "tasks": ("kernelsweep.tasks.cli", "materialise and validate KernelBench / demo tasks"),
    "eval": ("kernelsweep.evaluator.cli:Eval", "evaluate a candidate against a reference (confined)"),
    "compile": ("kernelsweep.evaluator.cli:Compile", "build a candidate's extensions into its own build cache"),
    "baseline": ("kernelsweep.evaluator.cli:Baseline", "time eager PyTorch and torch.compile on a reference"),
    # The study's baseline stage: `baseline`, but a timing the machine failed is never recorded.
    "baseline-task": ("kernelsweep.stages.baseline", "time a task's baselines for the study (machine faults fail)"),
    "compile-turn": ("kernelsweep.stages.evaluate:CompileTurn", "build a turn's candidates (study stage)"),
    "evaluate-candidate": ("kernelsweep.stages.evaluate:EvaluateCandidate", "evaluate one candidate (study stage)"),
    "evaluate-turn": ("kernelsweep.stages.evaluate_turn", "evaluate a turn's candidates, then select (study stage)"),
    "profile": ("kernelsweep.profiling", "profile a reference with torch.profiler (guided prompts)"),
    "prepare-model": ("kernelsweep.models.embedded", "prepare the embedded Gemma 3 270M checkpoint"),
    "serve": ("kernelsweep.models.server", "start a local OpenAI-compatible server (transformers serve)"),
    "serve-run": ("kernelsweep.models.run_server", "serve an in-process model to the generation jobs of one run"),
    "generate": ("kernelsweep.stages.generate", "sample one model call of the study matrix"),
    "prompt": ("kernelsweep.stages.prompt", "build the prompt of one turn"),
    "final": ("kernelsweep.stages.final", "write the final record of one study cell"),
    "react": ("kernelsweep.agent.cell", "run one cell of the tool-using agent (react), resuming its trace"),
    "report": ("kernelsweep.report.cli", "aggregate raw results into tables, figures and REPORT.md"),
    "manifest": ("kernelsweep.stages.manifest", "write the study file the report reads"),
    "gpu-slots": ("kernelsweep.runtime.gpu_slots", "run a command on a claimed GPU/CPU timing slot"),
    "relayout": ("kernelsweep.study.relayout", "move results from before precision was a path part to where they belong"),
    "confinement": ("kernelsweep.evaluator.confine", "can candidate workers be confined here? (a run checks first)"),
    "check": ("kernelsweep.commands.check", "before a run: does every configured model answer, is the results disk usable"),
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
    module_name, _, attribute = module_name.partition(":")
    module = importlib.import_module(module_name)
    if attribute:
        module = getattr(module, attribute)
    parser = argparse.ArgumentParser(prog=f"kernelsweep {name}", description=help_text)
    module.configure(parser)
    args = parser.parse_args(rest)
    try:
        return int(module.main(args) or 0)
    except OSError as error:  # every subcommand: a full disk is named, not a traceback
        from kernelsweep.core.fileio import storage_fault

        if storage_fault(error) is None:
            raise
        print(f"kernelsweep {name}: {storage_fault(error)}", file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
