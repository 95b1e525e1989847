"""Defaults of the evaluator: one place for every number a result depends on.
Each value that shapes a verdict is also written into the result's provenance."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.core import metrics, shapes
from kernelsweep.runtime.taskcode import PRECISIONS

HARNESS_VERSION = "kernelsweep-evaluator/2"

DEVICES = ("cpu", "cuda")

# Absolute and relative tolerance per precision: KernelBench's (get_tolerance_for_precision,
# atol = rtol); docs/taxonomy.md, "Precision", has the table and where casting differs.
TOLERANCES: dict[str, tuple[float, float]] = {
    "fp32": (1e-4, 1e-4),
    "fp16": (1e-2, 1e-2),
    "bf16": (1e-2, 1e-2),
}


@dataclass(frozen=True)
class ToleranceProfile:
    """How outputs are compared (docs/taxonomy.md, "Tolerance profiles"):
    (atol, rtol) per precision, and whether the bound also grows by the
    reference's own measured rounding error (`scaled`: the reference computed
    again in float64, compare.rounding_allowance)."""

    name: str
    bounds: dict[str, tuple[float, float]]
    scaled: bool


TOLERANCE_PROFILES = {p.name: p for p in (
    # The default: KernelBench's bound, plus ROUNDING_FACTOR times the largest difference between the
    # reference at the evaluation's precision and the same module in float64 (per output), so the
    # same maths summed in another order passes where a long reduction's rounding exceeds 1e-4.
    ToleranceProfile("ours", TOLERANCES, scaled=True),
    ToleranceProfile("kb", TOLERANCES, scaled=False),  # KernelBench's evaluator today
    ToleranceProfile("kb-v0", {p: (1e-2, 1e-2) for p in PRECISIONS}, scaled=False),  # KernelBench v0, 1e-2 for all
)}
TOLERANCE_DEFAULT = "ours"
# The rounding allowance: this many times the reference's own largest rounding error (its
# difference from float64). A candidate as accurate as the reference differs from it by up to
# about twice that; the rest is room for a less accurate order of summation.
ROUNDING_FACTOR = 4.0
# Beyond this share of the output's largest magnitude, a difference between the reference and
# its float64 twin is no rounding (a comparison that flipped, a random draw made in another
# dtype): the float64 reference is then not used, and the plain bound applies.
ROUNDING_CAP = 1e-3
# The float64 twin runs on every correctness trial while the output has at most this many
# floating elements; a larger output's rounding error is measured on the first trial only:
# its largest error over a million elements or more varies little between draws (within 10%
# over five draws of a Linear and a convolution; docs/decisions/2026-12-07-twin-on-the-first-trial.md).
ROUNDING_EVERY_TRIAL_ELEMENTS = 1 << 20


def rounding_allowances(errors: list[float] | None) -> list[float] | None:
    """The absolute allowance added to the bound of each output leaf: ROUNDING_FACTOR times the
    reference's rounding error there (compare.rounding_errors); None: no allowance."""
    return None if errors is None else [ROUNDING_FACTOR * e for e in errors]

# Baseline modes (evaluator/baseline.py): eager PyTorch, the torch.compile modes, the reference's
# forward replayed from CUDA graphs, and eager under cuDNN's benchmark mode. Every mode but eager
# is timed interleaved with eager in its own worker (its ratio to eager carries no drift between
# processes), except cudnn-benchmark: cuDNN's algorithm cache is process-wide and not keyed by the
# benchmark flag, so eager beside it would run the algorithms benchmark mode chose
# (docs/decisions/2026-12-05-baselines-interleaved.md).
COMPILE_MODES = ("inductor-default", "inductor-reduce-overhead", "inductor-max-autotune")
BASELINE_MODES = ("eager", *COMPILE_MODES, "cuda-graph", "cudnn-benchmark")
UNPAIRED_MODES = ("eager", "cudnn-benchmark")

# Seeds: weights are initialised under INIT_SEED (as KernelBench; public, the
# weights are no secret). A candidate's correctness and timing inputs come
# from seeds drawn secretly per evaluation (recorded in its provenance);
# baselines, which run no candidate, use the fixed bases below.
INIT_SEED = 42
TRIAL_SEED_BASE = 1000
TIMING_SEED_BASE = 2000

# A speedup above this is physically implausible for KernelBench tasks: the
# timing was fooled, so the candidate is labelled a cheat (excessive_speedup).
SPEEDUP_BOUND = 1000.0
# A custom kernel does the work: the candidate's own code (its extension's calls, or its own
# kernels on a GPU) must account for at least this share of the forward's time. An identity
# entry point or a kernel over a sliver of the data falls far below; a fused epilogue beside a
# library GEMM can too, and is then judged as PyTorch with a kernel on the side.
KERNEL_SHARE_MIN = 0.1
# A failed build's one line (diagnostics.headline) kept in the record; the log keeps the rest.
BUILD_ERROR_CHARS = 300
# Peak memory bandwidth assumed when the device reports none; deliberately
# generous so that the floor (output bytes / peak) only catches the impossible.
FALLBACK_PEAK_BYTES_PER_S = {"cuda": 10e12, "cpu": 1e12}

# Timing input sets are generated before timing and cycled; at most this many
# bytes of them are kept, but never fewer than two sets (fresh inputs per call).
TIMING_POOL_BYTES = {"cuda": 4 << 30, "cpu": 512 << 20}

# Correctness trials: the previous trial's inputs stay alive through the next trial's
# call (untrusted/candidate._trial_inputs) where they are at most this many bytes,
# so no trial's inputs, nor the harness's copies of them, lie where the previous
# trial's did; bigger sets are released once the next set is made.
HELD_INPUT_BYTES = {"cuda": 2 << 30, "cpu": 256 << 20}

# Shape variants (kernelsweep.core.shapes): a variant whose inputs exceed both the
# task's own inputs and this many bytes is dropped (a larger shape only where
# memory allows; both workers hold the task's and the variant's model at once).
VARIANT_BYTES = {"cuda": 2 << 30, "cpu": 256 << 20}
# ...and their models are built on the host before the device is held (in both
# workers' preparation), as is the reference's float64 twin under a scaled
# tolerance profile, while the task's model has at most this many bytes of
# parameters and buffers: each worker then holds every variant's model on the
# host (the larger variant's about twice the task's), and the reference its twin
# (twice the task's), until they are used.
AHEAD_MODEL_BYTES = {"cuda": 1 << 30, "cpu": 128 << 20}

# Logs: a child's stdout+stderr are kept up to this many bytes (head and tail);
# the rest is counted and dropped so that a flood cannot fill the disk.
LOG_CAP_BYTES = 4 << 20
LOG_EXCERPT_BYTES = 4000
# The private report channel accepts at most this much from one child, and at
# most MESSAGE_CAP_BYTES in one message (a longer line is a violation, skipped
# unparsed: the parent never decodes an unbounded line).
REPORT_CAP_BYTES = 16 << 20
MESSAGE_CAP_BYTES = 1 << 20
# A wait on a worker (its hello, a phase, a reply) ends at the worker's own
# limits plus WAIT_GRACE_S, and DRAIN_GRACE_S after the worker exited: a process
# it started outside its group may hold the report pipe open.
WAIT_GRACE_S = 30.0
DRAIN_GRACE_S = 5.0

DEFAULT_CUDA_ARCH = "9.0"

# Under the late claim the parent writes this file into an evaluation's shared
# folder once the reference's worker said hello: "prepared" when the init
# inputs are saved there (the candidate's worker then builds
# ModelNew from them before the device is taken), anything else when not.
REFERENCE_PREPARED = "reference-prepared"


def default_build_dir() -> Path:
    env = os.environ.get("KERNELSWEEP_BUILD_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kernelsweep" / "build"


BUILD_SHARING = ("candidate", "content")


def candidate_build_dir(cache_root: Path, candidate_sha256: str, sharing: str = "candidate") -> Path:
    """Where a candidate's builds go. "candidate" (the default): its own part of
    the build cache, keyed by its hash, so no candidate can plant a build (or
    a recorded failure) that another candidate would load. "content": one
    folder for all, builds keyed by their sources and flags only, so identical
    extensions build once; only for candidates you trust (test fixtures)."""
    if sharing == "content":
        return Path(cache_root) / "shared"
    return Path(cache_root) / "candidates" / candidate_sha256[:24]


@dataclass(frozen=True)
class EvalSettings:
    """Everything one evaluation depends on besides the two source files. Its
    defaults are the only defaults: the CLI, the evaluate stage and the
    workflow schema take them from here (tests/evaluator checks the schema)."""

    device: str = "cuda"
    precision: str = "fp32"
    trials: int = 5
    timing_trials: int = 100
    warmup: int = 10
    timeout_s: float = 240.0
    compile_timeout_s: float = 600.0
    speedup_bound: float = SPEEDUP_BOUND
    equivalence_margin: float = metrics.EQUIVALENCE_MARGIN
    cuda_arch: str | None = None
    # Host memory limit of CPU-device children (address space); None = 75% of RAM.
    cpu_memory_limit_bytes: int | None = None
    # See candidate_build_dir: "content" trusts every candidate not to poison the cache.
    build_sharing: str = "candidate"
    # Shape variants checked for correctness besides the task's own shape
    # (kernelsweep.core.shapes.RULES, the first n; 0 = the task's shape only).
    shape_variants: int = 2
    # How outputs are compared: a name of TOLERANCE_PROFILES.
    tolerance: str = TOLERANCE_DEFAULT

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.trials < 1:
            raise ValueError("trials must be at least 1")
        if self.timing_trials < 2:
            raise ValueError("timing-trials must be at least 2 (the speedup interval needs two samples)")
        if self.warmup < 0:
            raise ValueError("warmup must not be negative")
        if self.timeout_s <= 0 or self.compile_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        metrics.check_margin(self.equivalence_margin)
        if not 0 <= self.shape_variants <= shapes.MAX_VARIANTS:
            raise ValueError(f"shape_variants must be between 0 and {shapes.MAX_VARIANTS}, not {self.shape_variants}")
        if self.tolerance not in TOLERANCE_PROFILES:
            raise ValueError(f"tolerance must be one of {', '.join(TOLERANCE_PROFILES)}, not {self.tolerance!r}")
        if self.build_sharing not in BUILD_SHARING:
            raise ValueError(f"build_sharing must be one of {', '.join(BUILD_SHARING)}, not {self.build_sharing!r}")

    @property
    def profile(self) -> ToleranceProfile:
        return TOLERANCE_PROFILES[self.tolerance]

    @property
    def atol(self) -> float:
        return self.profile.bounds[self.precision][0]

    @property
    def rtol(self) -> float:
        return self.profile.bounds[self.precision][1]


@dataclass(frozen=True)
class BaselineSettings:
    """Everything a reference's baseline timing depends on besides the
    reference and the device. Its defaults are the only defaults: `kernelsweep
    baseline`, run_baseline and the workflow schema's `baseline` section take
    them from here (tests/evaluator/test_settings_schema.py checks the schema)."""

    modes: tuple[str, ...] = BASELINE_MODES
    timing_trials: int = 100
    warmup: int = EvalSettings.warmup
    # Per mode, in its own worker: max-autotune's compile and autotuning included.
    timeout_s: float = 1800.0


def cpu_memory_limit(explicit: int | None) -> int:
    if explicit:
        return explicit
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 << 30
    # Leave room for the harness and other jobs; torch itself maps ~2 GiB of
    # address space, so never go below 4 GiB.
    return max(4 << 30, int(total * 0.75))
