"""Worker: build a candidate's extensions without evaluating it. Importing
the candidate runs its load_inline/load calls, which the build hooks send to
the hash-keyed build cache; the evaluation later finds them there. Runs with
no GPU visible (the parent hides them), so compiling never holds one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelsweep.runtime import taskcode
from kernelsweep.evaluator.untrusted import frame
from kernelsweep.evaluator.untrusted.buildhooks import BuildHooks


def body(ctx: frame.WorkerContext) -> dict[str, Any]:
    cfg = ctx.config
    ctx.hooks = BuildHooks(cfg["build_root"], ctx.channel, cfg.get("cuda_arch")).install()
    ctx.candidate_file = str(Path(cfg["candidate"]).resolve())
    ctx.phase("import")
    import_error = None
    try:
        taskcode.load_module(ctx.candidate_file, "kernelsweep_candidate", register=True)
    except BaseException as exc:  # noqa: BLE001 - reported, classified by the parent
        import_error = ctx.describe(exc)
    records = [dict(r) for r in ctx.hooks.records]
    for r in records:
        if r.get("ok"):
            r.pop("output", None)
    return {"builds": records, "import_error": import_error, "compile_s": ctx.hooks.compile_s}


if __name__ == "__main__":
    frame.run(body)
