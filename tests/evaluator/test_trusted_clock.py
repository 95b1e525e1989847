"""The parent's own clock around each timed block (evaluator/trusted_clock.py):
hidden time is what the candidate's claimed times and the harness's own
work (the reference's block on the same inputs) cannot explain; judged, and
charged to every timed call, only beyond the noise."""

from kernelsweep.evaluator.trusted_clock import Block, audit, charged


def _blocks(windows, claimed, calls=4):
    """Each block twice: MIN_BLOCKS pairs at least."""
    return [Block(w, [c] * calls) for w, c in zip(windows, claimed)] * 2


def test_an_honest_candidate_hides_nothing():
    ref = _blocks([50, 52, 49, 51], [5, 5, 5, 5])       # 20 ms claimed, ~30 ms of harness work per block
    cand = _blocks([35, 36, 34, 35], [1.2, 1.2, 1.2, 1.2])
    got = audit(ref, cand, charge=True)
    assert not got["unaccounted"] and abs(got["hidden_ms_per_call"]) < 0.5
    assert 1.0 < got["trusted_ms_per_call"] < 1.5
    assert charged([1.2, 1.3], got) == [1.2, 1.3]  # nothing charged within the noise


def test_work_moved_out_of_the_timed_spans_is_judged():
    ref = _blocks([50, 52, 49, 51], [5, 5, 5, 5])
    cand = _blocks([50, 51, 50, 52], [0.1, 0.1, 0.1, 0.1])  # claims 0.1 ms, its blocks take as long as the reference's
    got = audit(ref, cand, charge=True)
    assert got["unaccounted"] and got["hidden_ms_per_call"] > 4
    assert got["trusted_ms_per_call"] > 4  # the time the candidate really takes per call
    assert got["charged_ms_per_call"] == got["hidden_ms_per_call"]
    assert min(charged([0.1] * 4, got)) > 4  # judged at the time the parent saw pass


def test_a_modest_deferral_is_charged_though_under_the_claimed_time():
    """Half of a 2 ms call moved out of the timed span (a 2x fake, under any
    speedup bound): above the noise, so charged, though not above the claim."""
    ref = _blocks([50, 50.4, 50, 50.4], [5, 5, 5, 5])  # 30 ms of harness work per block of 4
    cand = _blocks([38, 39, 38, 40], [1, 1, 1, 1])    # claims 1 ms a call, its blocks show 2
    got = audit(ref, cand, charge=True)
    assert got["unaccounted"] and 0.9 < got["charged_ms_per_call"] < 1.3


def test_noise_alone_is_never_judged():
    """A loaded machine: the reference's own unexplained time swings by tens
    of milliseconds between blocks; a few ms of difference decides nothing."""
    ref = _blocks([60, 90, 45, 120, 70, 85], [2] * 6)
    cand = _blocks([75, 80, 95, 60, 100, 70], [0.5] * 6)
    got = audit(ref, cand, charge=True)
    assert not got["unaccounted"] and got["noise_ms_per_call"] > 2


def test_no_blocks_no_judgement():
    assert audit([], [], charge=True)["unaccounted"] is False


def test_on_a_gpu_hidden_time_is_flagged_not_charged():
    """CUDA events time the device: an extension's host work before its launch
    is hidden behind the cache flush in every event-timed benchmark, and shows
    here (~0.1 ms a call for honest kernels on an H100)."""
    ref = _blocks([50, 50.4, 50, 50.4], [5, 5, 5, 5])
    cand = _blocks([38, 39, 38, 40], [1, 1, 1, 1])
    got = audit(ref, cand, charge=False)
    assert got["unaccounted"] and got["charged_ms_per_call"] == 0.0
    assert charged([1.0, 1.1], got) == [1.0, 1.1]


def test_a_few_paused_blocks_or_too_few_blocks_decide_nothing():
    """A loaded machine pauses the candidate in half of eight blocks: the
    median moves, the lower quartile does not. And three block pairs are too
    few to judge at all (the CPU's blocks hold two calls; ten timed calls)."""
    ref = [Block(50, [5] * 4)] * 8
    cand = [Block(w, [1.2] * 4) for w in (35, 90, 35, 95, 35, 90, 35, 95)]
    assert not audit(ref, cand, charge=True)["unaccounted"]
    paused = [Block(w, [1.2] * 4) for w in (90, 95, 90)]
    assert not audit(ref[:3], paused, charge=True)["unaccounted"]


def test_a_worker_kept_waiting_by_other_jobs_is_excused_that_wait():
    """CI's other test worker shares the candidate's core (run_queue.py): its
    windows grow by the time it waited to run, every block alike. That wait
    is the machine's, not hidden work; the rest of the window still is."""
    ref = _blocks([50, 52, 49, 51], [5, 5, 5, 5])
    waited = [Block(w + 20, [1.2] * 4, excused_ms=20) for w in (35, 36, 34, 35)] * 2
    assert not audit(ref, waited, charge=True)["unaccounted"]
    assert audit(ref, [Block(b.window_ms, b.claimed_ms) for b in waited], charge=True)["unaccounted"]
    hiding = [Block(w + 20, [0.1] * 4, excused_ms=20) for w in (50, 51, 50, 52)] * 2
    got = audit(ref, hiding, charge=True)
    assert got["unaccounted"] and got["hidden_ms_per_call"] > 4 and got["excused_ms_per_call"] == 5


def test_a_wait_that_began_before_the_block_is_excused_only_up_to_the_window():
    """The kernel counts a wait when the thread next runs: a worker woken
    behind another job just before its block brings a wait longer than the
    block itself. Only the window's time outside the claimed calls can be
    excused, so such blocks do not read as time given back."""
    stale = Block(10.0, [1.0, 1.0], excused_ms=30.0)
    assert stale.excused_in_window_ms == 8.0 and stale.unexplained_ms == 0.0
    ref = _blocks([50, 52, 49, 51], [5, 5, 5, 5])
    woken_late = [Block(w, [5.0] * 4, excused_ms=200.0) for w in (50, 51, 50, 52)] * 2
    got = audit(ref, woken_late, charge=True)
    # Before, 200 ms excused of a 50 ms window: trusted -45 ms a call. Now at most the harness's work is lost.
    assert got["trusted_ms_per_call"] >= -(52 - 20) / 4 and got["excused_ms_per_call"] <= (52 - 20) / 4


def test_the_cpu_time_of_other_threads_is_recorded():
    """Informational: a helper busy on another core beside the harness's work."""
    ref = [Block(50, [5] * 4, others_ms=0.2)] * 8
    cand = [Block(35, [1.2] * 4, others_ms=8.2)] * 8
    assert audit(ref, cand, charge=True)["other_threads_ms_per_call"] == 2.0
    assert audit(ref, [Block(35, [1.2] * 4)] * 8, charge=True)["other_threads_ms_per_call"] is None


def test_a_helper_busy_beside_the_harness_is_charged_on_the_cpu():
    """Its window is the honest one's (it works on another core while the
    harness flushes), its other threads' CPU time is not: charged on the CPU,
    recorded on a GPU."""
    ref = [Block(50 + i % 2, [5] * 4, others_ms=0.1 * (i % 3)) for i in range(8)]
    cand = [Block(35 + i % 2, [1.2] * 4, others_ms=8.0 + 0.1 * (i % 3)) for i in range(8)]
    got = audit(ref, cand, charge=True)
    assert got["unaccounted"] and got["charged_ms_per_call"] == got["other_threads_ms_per_call"] == 2.0
    assert audit(ref, cand, charge=False)["charged_ms_per_call"] == 0.0
    quiet = [Block(35 + i % 2, [1.2] * 4, others_ms=0.1 * (i % 3)) for i in range(8)]
    assert not audit(ref, quiet, charge=True)["unaccounted"]
