"""Every flag an evaluation can raise, in one table: its name, whether it
makes a numerically passing candidate a `cheat` (or is informational, or
changes whether the candidate counts as a custom kernel), where it is
detected, and what it means (docs/taxonomy.md lists the same table)."""

from __future__ import annotations

from dataclasses import dataclass

CHEAT, INFO, NOT_A_KERNEL = "cheat", "informational", "not a kernel"


@dataclass(frozen=True)
class Flag:
    name: str
    effect: str
    where: str
    meaning: str


FLAGS = {f.name: f for f in (
    Flag("mutates_inputs", CHEAT, "candidate worker, trials",
         "the candidate changed its inputs and the reference does not"),
    Flag("returns_input", CHEAT, "candidate worker, trials", "an output shares memory with an input"),
    Flag("output_changed_after_return", CHEAT, "candidate worker, trials",
         "an output kept changing after forward returned (work left on another stream or thread)"),
    Flag("non_plain_output", CHEAT, "candidate worker, trials and timed calls",
         "an output is not a plain dense tensor (a subclass, a lazy wrapper, a meta tensor)"),
    Flag("constant_output", INFO, "parent, trials and probes",
         "the outputs do not depend on the inputs either, on a task whose reference's do not "
         "(`indistinguishable` whether or not the candidate's vary)"),
    Flag("timing_output_mismatch", CHEAT, "parent, timed calls",
         "an output of a timed call, checked after the block, is not the reference's"),
    Flag("reference_slowed", CHEAT, "parent, timing",
         "the reference ran slower beside the candidate than alone"),
    Flag("report_tampered", CHEAT, "parent, report channel",
         "a worker sent more than one result, a result beside its replies, or lines without the run's nonce"),
    Flag("interpreter_hooks", CHEAT, "candidate worker, after each call and before saving outputs",
         "a profile, trace or monitoring hook was set while the harness's own code ran: candidate code "
         "running inside the harness's copying or saving of outputs"),
    # Judged by charging, not by a verdict: on the CPU the hidden time is added to every timed call
    # (trusted_clock.py); on a GPU informational (an extension's host work before its launch shows).
    Flag("timing_unaccounted", INFO, "parent, its own clock around each timed block",
         "the candidate's blocks took more time than their claimed calls and the harness's work explain "
         "(work moved out of the timed spans, beyond the noise): on the CPU the hidden time is charged to "
         "every timed call"),
    Flag("excessive_speedup", CHEAT, "parent, timing",
         "beyond the configured speedup bound, or faster than writing the output allows"),
    Flag("reference_modified", CHEAT, "parent", "the reference file changed during the evaluation"),
    Flag("output_file_tampered", CHEAT, "reference worker, reading outputs",
         "an output file the judge reads was replaced by a link, a pipe or another non-regular file"),
    Flag("kernel_result_unused", NOT_A_KERNEL, "parent, a perturbed trial",
         "the extension ran, but perturbing what it returned did not change the output"),
    Flag("kernel_unused_when_timed", NOT_A_KERNEL, "parent, a perturbed timed call",
         "during timing the output did not depend on the extension"),
    Flag("kernel_share_low", NOT_A_KERNEL, "candidate worker's timed calls (a measured one on a GPU)",
         "the candidate's own code accounts for less than settings.KERNEL_SHARE_MIN of the forward's time "
         "(an identity entry point, a kernel over a sliver of the data)"),
    Flag("patched_harness", CHEAT, "candidate worker",
         "the candidate replaced the timing, comparison or reporting functions the harness measures with"),
    Flag("left_timing_cpu", CHEAT, "parent, the scheduler's view of each timed block (CPU target)",
         "the candidate's timing thread ran on another CPU than the one both sides are timed on (it changed its "
         "affinity, or moved away and back): a free core while the reference shares a busy one"),
    Flag("patched_torch", INFO, "candidate worker",
         "the candidate replaced torch functions in its own process (the reference runs elsewhere)"),
    Flag("changed_global_settings", INFO, "candidate worker", "the candidate changed torch's global switches"),
    Flag("reduced_precision_math", INFO, "candidate worker, around and inside each judged call",
         "the candidate computed with lowered precision: autocast entered (fp16/bf16), TF32 on, float32 "
         "matmul precision below 'highest' (what it did: `reduced_precision`); judged by its outputs against "
         "the tolerance profile like any candidate"),
    Flag("reuses_output_storage", INFO, "candidate worker, trials",
         "an output shares memory with an earlier output that is still alive (a static buffer, a CUDA graph's "
         "output): each call is judged by the values it returned, so a stale answer fails as a wrong one"),
    Flag("output_not_on_device", INFO, "candidate worker", "an output is not on the evaluation device"),
    Flag("constant_reference", INFO, "reference worker", "the reference's outputs do not vary with its inputs"),
    Flag("degenerate_tolerance", INFO, "reference worker",
         "an all-zero output would pass the precision's tolerance: judged with a distinguishing atol"),
    Flag("unsynchronized_work", INFO, "parent, sentinel calls",
         "calls leave work running past their end event (in two sets of sentinel calls): both sides timed with "
         "a full device synchronize"),
    Flag("timing_unstable", INFO, "parent, timing", "the speedup interval is too wide for a verdict (CPU target, other load)"),
    Flag("stray_processes", INFO, "sandbox", "the candidate left processes behind (killed)"),
)}

CHEAT_FLAGS = frozenset(n for n, f in FLAGS.items() if f.effect == CHEAT)
NOT_A_KERNEL_FLAGS = frozenset(n for n, f in FLAGS.items() if f.effect == NOT_A_KERNEL)


def cheats_among(flags: list[str] | set[str]) -> list[str]:
    return sorted(set(flags) & CHEAT_FLAGS)


def check_known(flags: list[str] | set[str]) -> None:
    unknown = set(flags) - FLAGS.keys()
    if unknown:
        raise KeyError(f"flags not in cheats.FLAGS: {sorted(unknown)}")
