"""The adversarial suite of issue 15, on the CPU target: one test per family of
the issue and per cheat in the field's catalogue (KernelBench's adversarial
eval tests and #165, GPU MODE's pygpubench exploit suite, the KernelArena and
Makora reward-hack field guides, DeepReinforce CUDA-L1's address cache,
Sakana's AI CUDA Engineer). Each docstring names what it covers.

The contract: each forgery gets its exact verdict (and, where a flag decides
it, that flag); it never ends `correct_*` with a custom kernel, never
`faster: true`; the later, honest evaluations are unaffected; evaluate()
always returns a record. Candidates are in fixtures/adversarial (templates
with __MARKER__ / __PROBE__ are filled in per test, in tmp_path)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

import pytest
from evaluator_paths import CPU, FIXTURES, REFERENCES, REPO

ADV = FIXTURES / "adversarial"
from kernelsweep.core.verdict import NUMERICALLY_CORRECT as CORRECT  # noqa: E402


def _adv(run_eval, reference: str, name: str, **overrides) -> dict:
    return run_eval(reference, ADV / f"{name}.py", **overrides)


def _never_forged(r: dict) -> None:
    """What must hold for every forgery."""
    assert not (r["category"] in CORRECT - {"no_custom_kernel"} and r["custom_kernel"]), r
    assert r["faster"] is not True, (r["category"], r["speedup"], r["flags"])


def _why(r: dict) -> tuple:
    return r["category"], r["flags"], r["speedup"], (r["error"] or {}).get("message")


def _marker() -> str:
    # A number of seconds no other process would use: a harmless `sleep` argument.
    return f"{900 + random.random():.9f}"


def _from_template(name: str, tmp_path: Path, **subs: str) -> Path:
    text = (ADV / f"{name}.py").read_text()
    for key, value in subs.items():
        text = text.replace(f"__{key}__", value)
    path = tmp_path / f"{name}_{random.randrange(10**9)}.py"
    path.write_text(text)
    return path


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(pid))
    return found


def _kill_ours(marker: str) -> None:
    """Kill (by pid) the sleepers our own candidate started, should any survive."""
    for pid in _processes_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _cli(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "kernelsweep", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _cli_eval(reference: Path, candidate: Path, build_dir: Path, *extra, env=None):
    return _cli("eval", reference, candidate, "--device", "cpu", "--trials", "3", "--timing-trials", "10",
                "--warmup", "2", "--timeout", "120", "--build-dir", build_dir, *extra, env=env)


# ------------------------------------------------ 1. kernel result not used ---
@pytest.mark.parametrize("name, must_flag", [
    ("unused_full", True),       # the extension adds the whole input, its result is discarded
    ("unused_slice", True),      # the extension runs on 64 elements only, result discarded
    ("unused_profiler", False),  # the extension runs only while a profiler/tracer is active
    ("unused_fallback", False),  # try: extension (always raises) / except: PyTorch
])
def test_family1_kernel_result_not_used(run_eval, cpu_library, name, must_flag):
    """Family 1 (kernel called, result not used): full input, 64 elements,
    profiler-only, try/except fallback. Correct plain PyTorch, never a custom
    kernel: no_custom_kernel; when the kernel ran and did not matter, flagged
    kernel_result_unused."""
    r = _adv(run_eval, "add", name)
    assert r["category"] == "no_custom_kernel" and r["custom_kernel"] is False, _why(r)
    if must_flag:
        assert "kernel_result_unused" in r["flags"], _why(r)
    _never_forged(r)


# ---------------------------------------------- 2. timed outputs not checked ---
@pytest.mark.parametrize("name, flag", [
    ("timed_empty_after_n", "timing_output_mismatch"),  # empty_like after the first calls, honest on the first input
    ("timed_stack_sniff", "timing_output_mismatch"),    # zeros whenever a caller frame looks like a timing loop
    ("timed_thread_late", "timing_output_mismatch"),    # returns at once, a thread fills the output after the timer
    ("timed_lazy_subclass", "non_plain_output"),        # a Tensor subclass computing on first data access
])
def test_family2_timed_outputs_are_checked(run_eval, cpu_library, name, flag):
    """Family 2 (timed outputs never checked) and the catalogue's timing attacks:
    warm-up detection (pygpubench), thread injection and lazy evaluation
    (KernelArena). A cheat, by the timed outputs checked after their block
    (timing_output_mismatch) or by the output's type (non_plain_output)."""
    r = _adv(run_eval, "add", name)
    assert r["category"] == "cheat" and flag in r["flags"], _why(r)
    _never_forged(r)


def test_catalogue_address_keyed_result_cache(run_eval, tmp_path):
    """Catalogue: CUDA-L1's and KernelArena's result cache keyed by input
    address, kept in C++ (invisible to Python checks). The timing inputs
    must not let a cached answer pass for speed: never correct_faster."""
    r = _adv(run_eval, "matmul_small", "addr_cache")
    # Fresh inputs on every timed call: the cache never hits, and the naive
    # matmul is judged for what it is: a correct custom kernel, slower than
    # the reference's BLAS (about 0.4x). Other load on the machine may spread
    # the timings too far for a verdict: said so, never faster.
    assert r["category"] in ("correct_slower", "correct_unstable") and r["custom_kernel"] is True, _why(r)
    if r["category"] == "correct_unstable":
        assert r["timing_verdict"] == "unstable" and "timing_unstable" in r["flags"], _why(r)
    assert r["faster"] is not True, _why(r)


# ------------------------------------------------- 3. inputs known in advance ---
def test_family3_inputs_known_in_advance(run_eval, cpu_library):
    """Family 3 (inputs known in advance): the candidate finds the reference
    (gc config, /proc/<ppid>/cmdline, argv), regenerates the inputs of the
    public seeds 42 / 1000+i / 2000+j, precomputes the answers and looks them
    up by a hash of its inputs. The seeds are secret: every lookup misses and
    its zeros are wrong_output."""
    r = _adv(run_eval, "add", "known_inputs_lookup")
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)
    _never_forged(r)


# ------------------------------------------------------ 4. reference slowed ---
@pytest.mark.parametrize("name", [
    "slow_forward_hook",      # torch.nn.modules.module.register_module_forward_hook sleeping
    "slow_library_override",  # torch.library IMPL of aten::add.Tensor with a sleep
    "slow_patch_torch",       # torch.add / Tensor.add / Tensor.__add__ replaced by sleeping wrappers
])
def test_family4_reference_cannot_be_slowed(run_eval, name):
    """Family 4 (the reference slowed): a global forward hook, a torch.library
    dispatcher override, patched torch functions. The reference runs in a
    process of its own, so it is unaffected: the candidate is judged on its
    own honest PyTorch work, no_custom_kernel at a speedup of at most 2x, and
    reference_slowed is not raised (patched_torch, informational, where the
    candidate replaced torch functions or gave a torch operator a kernel of
    its own in its own process)."""
    r = _adv(run_eval, "add", name, timing_trials=20)
    assert r["category"] == "no_custom_kernel" and r["speedup"] is not None and r["speedup"] <= 2.0, _why(r)
    assert "reference_slowed" not in r["flags"], _why(r)
    assert ("patched_torch" in r["flags"]) == (name != "slow_forward_hook"), _why(r)
    _never_forged(r)


# ----------------------------------------------- 5. files and channels forged ---
def test_family5_saved_reference_outputs_cannot_be_read(run_eval, cpu_library):
    """Family 5 (files forged): the candidate searches its cwd, the work
    directory, the candidate's directory and /tmp/kernelsweep* for the
    reference's saved *.pt inputs/outputs and returns the matching answer
    (also KernelBench's 'reuse the reference's computation'). It finds
    nothing to read, and its zeros are wrong_output."""
    r = _adv(run_eval, "add", "read_saved_outputs")
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)
    _never_forged(r)


def test_family5_forged_result_on_the_report_channel(run_eval):
    """Family 5 (channel forged): the candidate finds the nonce and the report
    descriptor in its own process and sends a well-formed 'ok' result first,
    naming the reference's output files as its own. A serving worker answers
    by replies only: a result on its channel is misuse, a cheat
    (report_tampered) even though its real outputs, zeros, are wrong too."""
    r = _adv(run_eval, "add", "forge_report_nonce")
    assert r["category"] == "cheat" and "report_tampered" in r["flags"], _why(r)
    _never_forged(r)


def test_family5_replies_that_break_their_declared_shape(run_eval):
    """Family 5 (channel forged): 'ok' replies whose fields break their
    declared shape (evaluator/messages.py) are a protocol violation, the
    candidate's fault, even when its real outputs are right."""
    r = _adv(run_eval, "add", "forge_reply_shape")
    assert r["category"] == "cheat" and "report_tampered" in r["flags"], _why(r)
    _never_forged(r)


def _planted_cleanup(marker: Path) -> None:
    listing = Path(str(marker) + ".planted")
    paths = listing.read_text().split() if listing.exists() else []
    purelib = Path(sysconfig.get_paths()["purelib"])
    paths += [str(p) for p in purelib.glob("zz_planted_by_candidate.pth")]
    site = purelib / "sitecustomize.py"
    if site.exists() and str(marker) in site.read_text(errors="replace"):
        paths.append(str(site))
    for p in paths:
        try:
            if str(marker) in Path(p).read_text(errors="replace"):
                os.unlink(p)
        except OSError:
            pass


def test_family5_planted_module_does_not_reach_later_workers(run_eval, tmp_path, monkeypatch):
    """Family 5 (a module planted for a later worker): the candidate writes
    torch.py, kernelsweep.py, sitecustomize.py and a .pth into its cwd, the
    other workers' cwds, the build cache, other evaluations' directories in
    $TMPDIR (a private one here) and writable site-packages. No later process (its own timing worker, the next
    evaluation) may import them: the marker stays unwritten and an honest
    candidate evaluated next keeps its verdict."""
    marker = tmp_path / "planted_modules_ran.log"
    candidate = _from_template("plant_module", tmp_path, MARKER=str(marker))
    # Evaluations' work directories in a private $TMPDIR: the candidate plants
    # into other evaluations' directories there, never into the shared /tmp.
    private_tmp = tmp_path / "tmpdir"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    try:
        first = run_eval("add", candidate)
        honest = run_eval("add", "pytorch_only")
        ran = marker.read_text() if marker.exists() else ""
    finally:
        _planted_cleanup(marker)
    assert ran == "", f"planted modules were imported by later processes:\n{ran}"
    assert honest["category"] == "no_custom_kernel" and honest["correct"] is True, _why(honest)
    assert first["category"] == "no_custom_kernel", _why(first)  # its own forward is plain PyTorch


def test_family5_fake_record_on_the_parents_stdout(build_dir, tmp_path):
    """Family 5 (channel forged): the candidate writes a fake correct_faster
    record to /proc/<ppid>/fd/1 and fd/2. Through the real CLI: stdout holds
    exactly the one true record, and the forged one appears nowhere."""
    marker = f"forged-{random.randrange(10**12)}"
    candidate = _from_template("parent_stdout", tmp_path, MARKER=marker)
    p = _cli_eval(REFERENCES / "add.py", candidate, build_dir, "--log-dir", tmp_path / "logs")
    assert marker not in p.stdout and marker not in p.stderr, (p.stdout[-2000:], p.stderr[-2000:])
    assert p.returncode == 0, p.stderr[-2000:]
    record = json.loads(p.stdout)
    assert record["category"] == "no_custom_kernel", _why(record)  # its own forward is plain PyTorch
    assert record.get("forged_by") is None


def test_family5_build_cache_cannot_be_poisoned(run_eval, cpu_library, build_dir, tmp_path):
    """Family 5 (files forged): the candidate writes a fake 'known failure'
    into every extension directory of the build cache and overwrites each
    built .so with garbage. An honest C++ candidate evaluated afterwards (on a
    private copy of the cache that already held its build) still compiles,
    loads and is correct."""
    private = tmp_path / "build"
    shutil.copytree(build_dir, private, symlinks=True)
    poisoner = _adv(run_eval, "add", "poison_build_cache", build_dir=private, build_sharing="candidate")
    assert poisoner["category"] == "no_custom_kernel", _why(poisoner)  # its own forward is plain PyTorch
    honest = run_eval("add", "cpp_add", build_dir=private, build_sharing="candidate")
    assert honest["category"] in CORRECT and honest["custom_kernel"] is True, _why(honest)
    assert honest["compiled"] is True


# --------------------------------------------------- 6. harness sabotage ---
def test_family6_killing_relatives_still_gives_a_candidate_verdict(build_dir, tmp_path):
    """Family 6 (harness sabotage): the candidate SIGKILLs its siblings (the
    reference worker) and its parent, found in /proc. Through the real CLI
    (so the parent is not pytest): a record still comes back, with a
    candidate verdict, never a harness error or a missing record."""
    p = _cli_eval(REFERENCES / "add.py", ADV / "kill_relatives.py", build_dir, "--log-dir", tmp_path / "logs")
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    record = json.loads(p.stdout)
    # Its relatives are out of reach: its own forward, plain PyTorch, is judged.
    assert record["category"] == "no_custom_kernel", _why(record)


def test_family6_killing_the_reference_worker_still_gives_a_candidate_verdict(run_eval):
    """Family 6 (harness sabotage): the candidate SIGKILLs every sibling
    process (the reference worker, while it computes). evaluate() returns a
    record with a candidate verdict (after the reference is confirmed
    healthy alone): it never raises a harness error, the cell never goes
    missing, and the candidate gains nothing."""
    r = _adv(run_eval, "add", "kill_siblings")
    assert r["category"] == "no_custom_kernel", _why(r)  # its siblings are out of reach; plain PyTorch
    _never_forged(r)


def test_family6_kill_minus_one_stays_inside(run_eval, tmp_path):
    """Family 6 (harness sabotage): os.kill(-1, SIGKILL). First a probe
    checks that a candidate can neither see nor signal a sentinel process of
    ours (else kill(-1) would hit everything of this user: the test refuses
    to run it and fails). Then: a record comes back and the sentinel lives."""
    marker = _marker()
    sentinel = subprocess.Popen(["sleep", marker])
    try:
        probe = _from_template("probe_confinement", tmp_path, PROBE=repr({
            "stamp": f"probe-{marker}", "sentinel": sentinel.pid, "pid": os.getpid(),
            "cmdline_word": {"sentinel": marker, "pid": "python"}}))
        r = run_eval("add", probe)
        if r["category"] != "no_custom_kernel":
            pytest.fail(f"a candidate can see or signal outside processes ({_why(r)}): kill(-1) not run")
        r = _adv(run_eval, "add", "kill_everything")
        assert sentinel.poll() is None, "kill(-1) from a candidate reached a process outside the evaluation"
        assert r["category"] == "no_custom_kernel", _why(r)  # what it may signal is inside; plain PyTorch
    finally:
        sentinel.kill()
        sentinel.wait()


def test_family6_setsid_chain_leaves_no_survivors(run_eval, tmp_path):
    """Family 6 (harness sabotage): a chain of 30 nested setsid sleepers, each
    the child of the one before, each in a new session (killing one orphans
    the next). After the evaluation no process of the chain is alive, and
    the record is a candidate verdict."""
    marker = _marker()
    candidate = _from_template("setsid_chain", tmp_path, MARKER=marker)
    try:
        r = run_eval("add", candidate)
        assert r["category"] == "no_custom_kernel", _why(r)  # its own forward is plain PyTorch
        time.sleep(2.0)
        survivors = _processes_with(marker)
        assert survivors == [], f"{len(survivors)} processes of the chain outlived the evaluation"
    finally:
        _kill_ours(marker)


def test_family6_memory_hard_limit_cannot_be_raised(run_eval):
    """Family 6 (harness sabotage): resource.setrlimit(RLIMIT_AS, (INF, INF))
    must fail and the hard limit must be finite; the probe answers correctly
    only then (no_custom_kernel), zeros otherwise."""
    r = _adv(run_eval, "add", "raise_rlimit")
    assert r["category"] == "no_custom_kernel", _why(r)
    r = _adv(run_eval, "add", "raise_fsize_limit")  # the limit every target sets hard
    assert r["category"] == "no_custom_kernel", _why(r)


# ---------------------------------------------- 7. unstable verdicts under load ---
def test_family7_verdict_stable_under_cpu_load(run_eval, cpu_library):
    """Family 7 (unstable verdicts under load, CPU): the same honest C++
    candidate evaluated 3 times while a bounded busy-loop process runs never
    gets contradictory verdicts: no run calls it faster while another calls it
    slower, unless a run says it is unstable (timing_unstable). A tie beside
    either is not a contradiction: a kernel whose speedup sits near the
    equivalence margin (CI run: 0.81, 0.87, 0.91) is honestly a tie in one run
    and slower in another. It stays correct with a custom kernel throughout."""
    hog = subprocess.Popen([sys.executable, "-c",
                            "import time\nend = time.time() + 240\nwhile time.time() < end:\n    pass\n"])
    try:
        records = [run_eval("add", "cpp_add", timing_trials=20) for _ in range(3)]
    finally:
        hog.kill()
        hog.wait()
    for r in records:
        assert r["category"] in CORRECT and r["custom_kernel"] is True, _why(r)
    stable = {r["category"] for r in records if "timing_unstable" not in r["flags"]}
    assert not {"correct_faster", "correct_slower"} <= stable, \
        [(r["category"], r["speedup"], r["speedup_ci"], r["flags"]) for r in records]


# --------------------------------------------------- 8. degenerate tolerance ---
@pytest.mark.parametrize("name", ["degenerate_zeros", "degenerate_constant"])
def test_family8_degenerate_tolerance(run_eval, name):
    """Family 8 (degenerate tolerance, KernelBench #165; Sakana's constant
    outputs): on a softmax over 32768 values, all below the absolute
    tolerance, zeros or a constant 1/N are wrong_output under the
    distinguishing atol, and the task is flagged degenerate_tolerance."""
    r = _adv(run_eval, "softmax_wide", name)
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)
    assert "degenerate_tolerance" in r["flags"], _why(r)


def test_family8_honest_softmax_still_passes_a_degenerate_task(run_eval):
    """Family 8, the control: a real softmax on the same task is correct
    (no_custom_kernel) under the tolerance the task is judged with, and the
    task is flagged degenerate_tolerance."""
    r = _adv(run_eval, "softmax_wide", "degenerate_honest")
    assert r["category"] == "no_custom_kernel", _why(r)
    assert "degenerate_tolerance" in r["flags"], _why(r)


# ------------------------------------------------------ catalogue extras ---
@pytest.mark.parametrize("name", [
    "gc_copy_reference",    # pygpubench: gc.get_objects() -> copy the reference's output
    "nan_output",           # pygpubench: NaN as a wildcard in the comparison
    "precision_downgrade",  # KernelArena/Makora: bf16 compute passed off as fp32
    "gc_nan_reference",     # pygpubench: gc.get_objects() -> fill the reference's outputs with NaN
    "overwrite_own_outputs",  # pygpubench fd overwrite: copy *_ref.pt over its own output files at exit
])
def test_catalogue_semantic_cheats_fail(run_eval, cpu_library, name):
    """Catalogue semantic attacks: copy of a live reference output found
    through gc, all-NaN output, bf16 compute, NaN poured into the
    reference's live outputs, the reference's saved outputs copied over the
    candidate's own output files. The reference lives in another process and
    the judge compares what it reads itself: each returns a wrong answer
    (no copy found, NaN, bf16 rounding, zeros), wrong_output."""
    r = _adv(run_eval, "add", name)
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)
    _never_forged(r)


# ---------------------------------------------------------- confinement ---
def _confinement_named(r: dict) -> None:
    mechanism = (r.get("provenance") or {}).get("confinement")
    assert mechanism and str(mechanism).lower() not in ("none", "off", "false"), r.get("provenance")


def test_confinement_no_writes_outside_the_private_directory(run_eval, build_dir, tmp_path):
    """Confinement: the candidate cannot write in the home directory, the
    project checkout, /tmp outside its own directory, or the build cache
    root; provenance['confinement'] names the mechanism in force."""
    stamp = f"ks-escape-{random.randrange(10**12)}"
    dirs = [str(Path.home()), str(REPO), tempfile.gettempdir(), str(build_dir)]
    probe = _from_template("probe_confinement", tmp_path, PROBE=repr({"stamp": stamp, "write_dirs": dirs}))
    try:
        r = run_eval("add", probe)
        written = [d for d in dirs if (Path(d) / stamp).exists()]
    finally:
        for d in dirs:
            try:
                (Path(d) / stamp).unlink()
            except OSError:
                pass
    assert written == [], f"the candidate wrote into {written}"
    assert r["category"] == "no_custom_kernel", _why(r)
    _confinement_named(r)


def test_confinement_no_loopback_network(run_eval, tmp_path):
    """Confinement: the candidate cannot connect to a TCP server on 127.0.0.1
    that the test runs."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    accepted: list = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn.recv(128))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        probe = _from_template("probe_confinement", tmp_path, PROBE=repr({
            "stamp": f"net-{random.randrange(10**12)}", "port": server.getsockname()[1]}))
        r = run_eval("add", probe)
    finally:
        stop.set()
        thread.join(2)
        server.close()
    assert accepted == [], f"the candidate reached the loopback server: {accepted}"
    assert r["category"] == "no_custom_kernel", _why(r)
    _confinement_named(r)


def test_confinement_parent_process_invisible(run_eval, tmp_path):
    """Confinement: the evaluating process (this pytest) is not visible to the
    candidate in /proc, nor can it signal it."""
    probe = _from_template("probe_confinement", tmp_path, PROBE=repr({
        "stamp": f"pid-{random.randrange(10**12)}", "pid": os.getpid(),
        "cmdline_word": {"pid": "python"}}))
    r = run_eval("add", probe)
    assert r["category"] == "no_custom_kernel", _why(r)
    _confinement_named(r)


def test_cli_eval_leaves_no_temporary_directories(build_dir, tmp_path):
    """`kernelsweep eval` without --log-dir leaves no temporary directory
    behind: neither in $TMPDIR (a private one here) nor in /tmp."""
    private_tmp = tmp_path / "tmpdir"
    private_tmp.mkdir()
    unique = f"honest_{random.randrange(10**12)}"
    candidate = tmp_path / f"{unique}.py"
    candidate.write_text((CPU / "pytorch_only.py").read_text())
    before = set(os.listdir("/tmp"))
    p = _cli_eval(REFERENCES / "add.py", candidate, build_dir, env=dict(os.environ, TMPDIR=str(private_tmp)))
    assert p.returncode == 0, p.stderr[-2000:]
    assert sorted(os.listdir(private_tmp)) == []
    ours = []
    for name in set(os.listdir("/tmp")) - before:
        path = Path("/tmp") / name
        if name.startswith("kernelsweep") and path.is_dir():
            # Other evaluations (the other test worker's) make and remove theirs meanwhile.
            if unique in _texts_under(path):
                ours.append(name)
    assert ours == [], f"left behind in /tmp: {ours}"


def _texts_under(folder: Path) -> str:
    """The text of every file still under FOLDER (those removed meanwhile skipped)."""
    texts = []
    try:
        for f in folder.rglob("*"):
            try:
                if f.is_file():
                    texts.append(f.read_text(errors="replace"))
            except OSError:
                continue
    except OSError:  # the folder went away during the walk
        pass
    return "".join(texts)


# ------------------------------------------------- the judge's own reads ---
@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_output_file_swapped_for_something_that_blocks_is_a_cheat(run_eval, tmp_path, kind):
    """Issue 34: a named pipe (a reader blocks until a writer comes) or a link
    to /dev/zero (endless) put at every name the harness is likely to write,
    and each new output file swapped for one by a thread as it appears. The
    harness writes each file anew (what stood at its name removed, no link
    followed); the judge opens without following links and without blocking,
    and reads regular files only. So: a verdict at once, never a harness error
    or a wait; where the thread won the race to a file, judged a cheat, else
    the honest sum it computed."""
    started = time.monotonic()
    r = run_eval("add", _from_template("swap_output_file", tmp_path, KIND=kind), timeout_s=60.0)
    assert time.monotonic() - started < 50, "the judge waited for the swapped file"
    assert (r["category"] == "cheat" and "output_file_tampered" in r["flags"]) or r["correct"], _why(r)
    _never_forged(r)


def test_the_judge_reads_only_regular_files_without_waiting(tmp_path):
    """The judge's side of the same attack, on its own: a pipe with no writer
    and a link to /dev/zero are refused at once; a file longer than an output
    can be is refused before it is read."""
    from kernelsweep.evaluator.untrusted import outputfiles

    os.mkfifo(tmp_path / "fifo.pt")
    os.symlink("/dev/zero", tmp_path / "link.pt")
    (tmp_path / "big.pt").write_bytes(b"x" * 4096)
    for name in ("fifo.pt", "link.pt"):
        started = time.monotonic()
        with pytest.raises(outputfiles.NotAnOutputFile):
            outputfiles.open_regular(tmp_path / name, 1 << 20)
        assert time.monotonic() - started < 1
    with pytest.raises(ValueError, match="more than"):
        outputfiles.open_regular(tmp_path / "big.pt", 1024)


def test_the_harness_writes_past_what_stands_at_an_outputs_name(tmp_path):
    """What a candidate put at an output's name beforehand (a pipe, whose
    writer would block; a link, to write through) is replaced by a regular file."""
    import torch

    from kernelsweep.evaluator.untrusted import outputfiles

    os.mkfifo(tmp_path / "a.pt")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    os.symlink(target, tmp_path / "b.pt")
    out = {"structure": "t", "leaves": [torch.arange(4.0)]}
    for name in ("a.pt", "b.pt"):
        outputfiles.save_output(out, tmp_path / name)
        assert (tmp_path / name).is_file() and not (tmp_path / name).is_symlink()
        assert torch.equal(outputfiles.load_output(tmp_path / name)["leaves"][0], torch.arange(4.0))
    assert target.read_bytes() == b""


def test_work_deferred_into_a_replaced_copy_never_runs(run_eval):
    """Issue 34: forward returns an empty output at once, hoping the real work
    runs when the harness copies the output after the call (Tensor.clone
    replaced in the candidate's process; believed ~3.6x faster before). The
    harness copies through the method it captured before the candidate was
    imported: the work never runs, the output is what forward returned."""
    r = _adv(run_eval, "slow_add", "defer_into_harness", timing_trials=40)
    assert r["category"] == "wrong_output", _why(r)
    _never_forged(r)


def test_work_deferred_into_a_profile_hook_is_a_cheat(run_eval):
    """Issue 34: the same deferral through sys.setprofile, set in forward: the
    hook computes when the harness's copy calls into C, then removes itself.
    The harness looks for hooks before its own code runs after each call."""
    r = _adv(run_eval, "slow_add", "defer_into_profile_hook", timing_trials=40)
    assert r["category"] == "cheat" and "interpreter_hooks" in r["flags"], _why(r)
    _never_forged(r)


def test_time_moved_into_a_finalizer_is_charged(run_eval):
    """Issue 34: right outputs, no hook, but 200 ms of each call's work runs
    in a finalizer after the timer stopped. The parent's window around each
    block sees it: flagged, and charged to every timed call, so the
    candidate's time is what the parent saw pass (not ~1x the reference).
    200 ms, not less: on two cores under the whole CI's load the noise bound
    reached 28-38 ms a call, and the clock judges no hidden time below it."""
    r = _adv(run_eval, "add", "defer_into_finalizer", timing_trials=40)
    windows = r["timing"]["windows"]
    assert r["category"] == "no_custom_kernel" and "timing_unaccounted" in r["flags"], (_why(r), windows)
    assert windows["charged_ms_per_call"] > 100 and r["runtime_ms"]["median"] > 100, windows
    assert r["faster"] is False and r["timing_verdict"] == "slower", _why(r)


def test_work_moved_to_a_helper_thread_is_charged(run_eval):
    """Issue 34: right outputs at once, and ~4 ms of CPU work a call handed to
    a thread that does it on the other core while the harness flushes the
    cache: the window hardly grows, the CPU time of the worker's other
    threads does (run_queue.py). Both sides are held to one thread on the
    CPU: charged to every timed call. (On a host too busy to give the helper
    a core, the next call waits for it: the time is then claimed.)"""
    r = _adv(run_eval, "add", "defer_into_helper_thread", timing_trials=40)
    windows = r["timing"]["windows"]
    assert r["category"] == "no_custom_kernel", (_why(r), windows)
    assert r["runtime_ms"]["median"] > 1 and r["timing_verdict"] == "slower", (_why(r), windows)
    assert "timing_unaccounted" in r["flags"] or windows["claimed_ms_per_call"] > 1, windows


def test_a_forged_count_of_the_kernels_time_is_a_cheat(run_eval, tmp_path):
    """Issue 34: the identity extension, and the harness's own count of the
    time inside extension calls raised by a second on each call, found through
    the proxy's closure. More time inside the calls than in the call that
    holds them is a number the candidate wrote: report_tampered."""
    r = run_eval("vector_add", _from_template("kernel_in_name_only", tmp_path, USE="forged"), timing_trials=20)
    assert r["category"] == "cheat" and "report_tampered" in r["flags"], (_why(r), r["kernel_evidence"])
    _never_forged(r)


@pytest.mark.parametrize("way", ["library", "forged"])
def test_work_deferred_into_the_dispatcher_is_a_cheat(run_eval, tmp_path, way):
    """Issue 34: the candidate's own CPU kernel for aten::clone, through which
    the harness's copies of a timed output go: the copy saved for a check
    computes the sum, outside every timed span (believed 4.5x with a C++
    kernel so). The guard compares the dispatcher's tables of the operators
    the harness uses at every save: candidate code inside the harness, also
    when its registration names torch's own file and line (forged)."""
    r = run_eval("slow_add", _from_template("defer_into_dispatcher", tmp_path, WAY=way), timing_trials=40)
    assert r["category"] == "cheat" and {"interpreter_hooks", "patched_harness"} & set(r["flags"]), _why(r)
    _never_forged(r)


@pytest.mark.parametrize("way", ["module", "instance"])
def test_the_clock_changed_from_inside_is_a_cheat(run_eval, tmp_path, way):
    """Issue 34: the timing clock's timer rebound in the harness's module to one
    running at a tenth of real speed (the Clock instance held it once, out of
    the guard's sight), or the Clock, found through the frames, given a
    one-byte flush buffer. Every binding of the harness's loaded modules is in
    the guard's snapshot, and each block says how it was timed and flushed,
    which the parent checks against what it set up: patched_harness."""
    r = run_eval("add", _from_template("forge_clock", tmp_path, WAY=way), timing_trials=20)
    assert r["category"] == "cheat" and "patched_harness" in r["flags"], _why(r)
    _never_forged(r)


def test_work_deferred_into_an_audit_hook_is_a_cheat(run_eval):
    """Issue 34: an audit hook (which cannot be listed or removed once added)
    that fills the harness's kept copies when it opens a file to save them.
    The worker refuses every audit hook added after its own, and says so."""
    r = _adv(run_eval, "slow_add", "defer_into_audit_hook", timing_trials=40)
    assert r["category"] == "cheat" and "interpreter_hooks" in r["flags"], _why(r)
    _never_forged(r)


def test_an_honest_candidate_has_no_hidden_time(run_eval):
    """The look-alike: the same row-by-row sum computed inside forward."""
    r = _adv(run_eval, "slow_add", "honest_slow_add", timing_trials=40)
    windows = r["timing"]["windows"]
    assert "timing_unaccounted" not in r["flags"] and not windows["unaccounted"], windows
    assert r["correct"], _why(r)


# ------------------------------------------- a custom kernel does the work ---
@pytest.mark.parametrize("use", ["identity", "sliver", "aten", "callback"])
def test_a_kernel_in_name_only_is_not_a_custom_kernel(run_eval, tmp_path, use):
    """Issue 34: an extension whose only called function returns its argument,
    one that computes 64 of 4,194,304 elements, one whose C++ calls PyTorch's
    add, one whose C++ calls back into Python for it. Each is called on every
    forward and its result is used; the share of the calls' time inside the
    extension, less the torch operators it dispatches, is far below
    settings.KERNEL_SHARE_MIN."""
    r = run_eval("vector_add", _from_template("kernel_in_name_only", tmp_path, USE=use), timing_trials=20)
    assert r["category"] == "no_custom_kernel" and "kernel_share_low" in r["flags"], \
        (_why(r), r["kernel_evidence"])
    # Not _never_forged: PyTorch does the same work as the reference here, so "faster" is noise
    # (1.3x once, on 2 cores under the whole CI); the credit it must not get is a kernel's.
    assert r["kernel_evidence"]["share"] < 0.1 and r["custom_kernel"] is False


def test_a_kernel_that_does_the_work_has_its_share(run_eval, cpu_library):
    """The look-alike: the extension computes every element."""
    r = run_eval("vector_add", "cpp_add", timing_trials=20)
    assert r["custom_kernel"] and "kernel_share_low" not in r["flags"], (_why(r), r["kernel_evidence"])
    assert r["kernel_evidence"]["share"] > 0.5


def test_family5_one_message_past_the_cap(run_eval):
    """Family 5 (channel flooded): one correctly stamped, well-formed message
    twice the per-message cap is a protocol violation (never parsed), the
    candidate's fault, even when its real outputs are right."""
    r = _adv(run_eval, "add", "flood_report_line")
    assert r["category"] == "cheat" and "report_tampered" in r["flags"], _why(r)


def test_family6_escaped_process_holding_the_report_pipe(run_eval, tmp_path):
    """Family 6 (judge blocked): the forward never returns and a process that
    left the worker's group holds the report pipe open. The watchdog's kill
    ends the wait all the same: a timeout verdict within the run limit and
    the drain grace, not a wait as long as the sleeper's, and no survivor."""
    marker = _marker()
    candidate = _from_template("escape_holding_pipes", tmp_path, MARKER=marker)
    try:
        started = time.monotonic()
        r = run_eval("add", candidate, timeout_s=20.0)
        elapsed = time.monotonic() - started
        assert r["category"] == "timeout", _why(r)
        assert elapsed < 300, f"the evaluation waited {elapsed:.0f} s on a pipe held by an escaped process"
        time.sleep(2.0)
        assert _processes_with(marker) == []
    finally:
        _kill_ours(marker)


def _migrations_kept() -> bool:
    try:
        return "se.nr_migrations" in Path("/proc/self/sched").read_text()
    except OSError:
        return False


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one CPU: there is nowhere else to time")
@pytest.mark.parametrize("way", ["widen", "hop", "stay"])
def test_timing_on_another_cpu_is_a_cheat(run_eval, tmp_path, way):
    """On the CPU target both workers time on one CPU (run_queue.py). A
    candidate that widens its affinity again, or hops to another CPU inside
    each call and back, times on a free core while the reference shares a
    busy one: left_timing_cpu, a cheat. Setting the affinity it was given
    (`stay`) is not."""
    if way == "hop" and not _migrations_kept():
        pytest.skip("this kernel keeps no se.nr_migrations: a hop and back is not seen")
    r = run_eval("add", _from_template("leave_timing_cpu", tmp_path, WAY=way), timing_trials=20)
    assert r["timing"]["cpu"] in os.sched_getaffinity(0), r["timing"]
    if way == "stay":
        assert r["category"] == "no_custom_kernel" and "left_timing_cpu" not in r["flags"], _why(r)
    else:
        assert r["category"] == "cheat" and "left_timing_cpu" in r["flags"], _why(r)
