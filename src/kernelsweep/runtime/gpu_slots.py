"""Timing slots: one device per timing job, claimed with exclusive file locks.

Snakemake's `--resources gpu=N` caps how many GPU jobs run at once but does not
say *which* GPU each one gets. Every evaluate/profile/baseline job therefore runs
through `kernelsweep gpu-slots run -- CMD ...`, which claims a free
device with `flock` on `<slots_dir>/gpu<device>.lock`, points the child at it
with CUDA_VISIBLE_DEVICES and releases it when the job ends. Two timing jobs
never share a device; on the `cpu` device there is a single `cpu` slot, so CPU
timings never run side by side either.

`--devices 1,2` (or $KERNELSWEEP_TIMING_DEVICES) restricts the slots to those
GPUs, so others stay free for what must not disturb a timing: a model
generating on GPU 0 while candidates are timed on GPUs 1 and 2.

A lock belongs to the open file, which the child inherits: the slot stays taken
while the wrapper *or* the command (or anything it left running) is alive, and
the kernel frees it when the last of them exits, even after SIGKILL.

`run --late` (evaluations and baselines on a GPU) claims a place in the
device's queue instead (`--queue N` places per device, default 3:
`gpu<device>.next.lock`, `gpu<device>.next1.lock`, ...): the command starts its
workers, which import torch while the job before it still times, and only then
takes the device itself with `timing_slot()`, which gives its place in the
queue to a job behind it. So a device waits for no process start between two
evaluations, and still runs one timing at a time. Several places, because an
evaluation warms up for longer (2-3 s: two processes importing torch) than a
typical one holds the device (~2 s): with one place the device idled between
them (docs/decisions/2026-12-03-late-claim.md).
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

ENV_SLOTS_DIR = "KERNELSWEEP_GPU_SLOTS_DIR"
ENV_GPUS = "KERNELSWEEP_GPUS"  # slot count override: an integer, "cpu" or "auto"
ENV_DEVICES = "KERNELSWEEP_TIMING_DEVICES"  # the GPUs timings may use: "1,2" (ids or UUIDs)
ENV_SLOT = "KERNELSWEEP_GPU_SLOT"  # set for the child: the device it was given
ENV_TIMING_LOCK = "KERNELSWEEP_TIMING_LOCK"  # set for a --late child: the device's lock, taken by timing_slot()
ENV_QUEUE_FD = "KERNELSWEEP_QUEUE_FD"  # set for a --late child: its inherited place in the device's queue
CPU_DEVICE = "cpu"
DEFAULT_TIMEOUT_S = 6 * 3600.0
QUEUE_PLACES = 3  # jobs per device that may warm up while it times (`run --queue`)
EXIT_NO_SLOT = 75  # EX_TEMPFAIL: no slot within the timeout
EXIT_USAGE = 2


class SlotError(RuntimeError):
    """A user-facing failure: the message says what went wrong and what to do;
    `exit_code` is what the wrapper exits with."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class SlotTimeout(SlotError):
    """Every slot stayed held for the whole timeout."""

    exit_code = EXIT_NO_SLOT


class SlotClaim:
    """A held slot. `device` is what CUDA_VISIBLE_DEVICES gets, or "cpu".
    (A plain class: dataclasses would add ~60 ms of imports to every job.)"""

    def __init__(self, index: int, device: str, path: Path, fd: int):
        self.index, self.device, self.path, self.fd = index, device, path, fd

    def __repr__(self) -> str:
        return f"SlotClaim(index={self.index}, device={self.device!r}, path={str(self.path)!r})"

    @property
    def is_gpu(self) -> bool:
        return self.device != CPU_DEVICE

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the last reference drops the flock
            self.fd = -1

    def __enter__(self) -> "SlotClaim":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _parse_gpus(value: str | int, origin: str) -> int | str | None:
    """An integer >= 0, "cpu" (0 means cpu too), or "auto" (None: detect)."""
    text = str(value).strip().lower()
    if text == CPU_DEVICE:
        return CPU_DEVICE
    if text == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        raise SlotError(f"{origin}: expected a GPU count, 'cpu' or 'auto', got {value!r}") from None
    if count < 0:
        raise SlotError(f"{origin}: GPU count must be >= 0, got {count}")
    return CPU_DEVICE if count == 0 else count


def parse_device_list(value: str, origin: str) -> list[str]:
    """'1,2' -> ['1', '2']: GPU indices or UUIDs, as CUDA_VISIBLE_DEVICES names them."""
    devices = [entry.strip() for entry in str(value).split(",") if entry.strip()]
    if not devices:
        raise SlotError(f"{origin}: expected a comma-separated list of GPUs (e.g. '1,2'), got {value!r}")
    repeated = sorted({d for d in devices if devices.count(d) > 1})
    if repeated:
        raise SlotError(f"{origin}: GPU {', '.join(repeated)} listed more than once")
    if CPU_DEVICE in devices:
        raise SlotError(f"{origin}: list GPUs only; for CPU timing use --gpus cpu")
    return devices


def visible_devices_list() -> list[str] | None:
    """The entries of CUDA_VISIBLE_DEVICES, or None when it is unset."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def detect_gpu_count() -> int:
    """GPUs this process may use. nvidia-smi is asked before torch because it
    answers without importing torch (seconds per job); torch covers ROCm."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
            if out.returncode == 0:
                return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:  # torch missing or a broken driver: no usable GPU
        return 0


def slot_devices(gpus: str | int | None = None, devices: str | None = None) -> list[str]:
    """The device behind each slot, in slot order.

    `devices` (else $KERNELSWEEP_TIMING_DEVICES) lists the GPUs outright; each
    must be visible (an entry of CUDA_VISIBLE_DEVICES when that is set).
    Otherwise `gpus` (else $KERNELSWEEP_GPUS) gives the count, "cpu"/0 for one CPU slot,
    or "auto"/None to detect.
    When CUDA_VISIBLE_DEVICES is already set (SLURM does), slot i is its i-th
    entry; otherwise slot i is GPU i. With no count given and no GPU found, the
    single CPU slot is used, so timings are still serialised.
    """
    listed = devices if devices is not None else os.environ.get(ENV_DEVICES, "").strip() or None
    if listed is not None:
        origin = "--devices" if devices is not None else ENV_DEVICES
        chosen = parse_device_list(listed, origin)
        visible = visible_devices_list()
        hidden = [d for d in chosen if visible is not None and d not in visible]
        if hidden:
            raise SlotError(f"{origin}: GPU {', '.join(hidden)} is not in CUDA_VISIBLE_DEVICES="
                            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}; list only visible GPUs")
        return chosen
    requested: int | str | None = None
    if gpus is not None:
        requested = _parse_gpus(gpus, "--gpus")
    if requested is None and os.environ.get(ENV_GPUS, "").strip():
        requested = _parse_gpus(os.environ[ENV_GPUS], ENV_GPUS)
    if requested == CPU_DEVICE:
        return [CPU_DEVICE]

    visible = visible_devices_list()
    if requested is None:
        if visible is not None:
            return visible or [CPU_DEVICE]
        count = detect_gpu_count()
        return [str(i) for i in range(count)] if count else [CPU_DEVICE]
    if visible is not None:
        if requested > len(visible):
            raise SlotError(
                f"{requested} GPU slots requested but CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r} lists only {len(visible)} "
                "device(s); lower --gpus or widen CUDA_VISIBLE_DEVICES"
            )
        return visible[:requested]
    return [str(i) for i in range(requested)]


def resolve_slots_dir(
    slots_dir: str | os.PathLike | None = None,
    results: str | os.PathLike = "results",
    cpu: bool = False,
) -> Path:
    """--slots-dir, else $KERNELSWEEP_GPU_SLOTS_DIR, else <results>/.gpu-slots.

    Inside a SLURM job the default is node-local (flock is unreliable on some
    shared filesystems), and slots are scoped: GPU slots to the job, whose
    allocation owns its GPUs (another node's "GPU 0" is another card); the CPU
    slot to the node, whose cores every job there shares unless pinned.
    """
    slurm_job = os.environ.get("SLURM_JOB_ID")
    if slots_dir:
        base = Path(slots_dir)
    elif os.environ.get(ENV_SLOTS_DIR):
        base = Path(os.environ[ENV_SLOTS_DIR])
    elif slurm_job:
        base = Path(os.environ.get("TMPDIR") or "/tmp") / "kernelsweep-gpu-slots"
    else:
        base = Path(results) / ".gpu-slots"
    if slurm_job:
        base = base / (f"node-{socket.gethostname()}" if cpu else f"slurm-{slurm_job}")
    return base


def lock_path(slots_dir: Path, device: str) -> Path:
    if device == CPU_DEVICE:
        return slots_dir / "cpu.lock"
    # Named after the device it guards (an index, a GPU-/MIG- UUID), so two
    # studies whose device lists overlap still exclude each other.
    return slots_dir / f"gpu{re.sub(r'[^A-Za-z0-9_.-]', '_', device)}.lock"


def queue_path(slots_dir: Path, device: str, place: int = 0) -> Path:
    """One of the device's queue places: who may warm up while it times."""
    path = lock_path(slots_dir, device)
    return path.with_name(f"{path.stem}.next{place or ''}.lock")


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise SlotError(
            f"cannot lock {path}: {exc.strerror} (the filesystem may not support flock; "
            f"put the slots on a local disk with --slots-dir or ${ENV_SLOTS_DIR})"
        ) from exc
    return fd


def _record_holder(fd: int, device: str, label: str) -> None:
    """Write who holds the slot into the lock file, for error messages."""
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    note = f"pid={os.getpid()} host={socket.gethostname()} device={device} since={since} {label}".rstrip() + "\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, note.encode(), 0)


def _holders(paths: list[Path]) -> str:
    notes = []
    for path in paths:
        try:
            notes.append(f"  {path.name}: {path.read_text().strip() or '(no holder note)'}")
        except OSError:
            notes.append(f"  {path.name}: (unreadable)")
    return "\n".join(notes)


def claim_slot(
    slots_dir: str | os.PathLike,
    devices: list[str],
    timeout: float | None = DEFAULT_TIMEOUT_S,
    label: str = "",
    path_of: Callable[..., Path] = lock_path,
    max_delay: float = 0.25,
    places: int = 1,
) -> SlotClaim:
    """Claim one free slot: a non-blocking try on each, then keep retrying
    (every <= `max_delay` s) until `timeout` seconds (None: forever). `label` goes
    into the holder note; `path_of` names each device's lock file, or with
    `places` > 1 each of its places (`path_of(dir, device, place)`). Raises
    SlotTimeout, or SlotError for other failures."""
    if not devices:
        raise SlotError("no slots to claim (empty device list)")
    slots_dir = Path(slots_dir)
    try:
        slots_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SlotError(f"cannot create the slots folder {slots_dir}: {exc.strerror}") from exc
    if places < 1:
        raise SlotError(f"a device needs at least one queue place, not {places}")
    slots = [(index, device, path_of(slots_dir, device, place) if places > 1 else path_of(slots_dir, device))
             for place in range(places) for index, device in enumerate(devices)]
    paths = [path for _, _, path in slots]
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.02
    while True:
        for index, device, path in slots:
            try:
                fd = _try_lock(path)
            except PermissionError as exc:
                raise SlotError(f"cannot open {path}: permission denied") from exc
            if fd is not None:
                _record_holder(fd, device, label)
                return SlotClaim(index=index, device=device, path=path, fd=fd)
        if deadline is not None and time.monotonic() >= deadline:
            raise SlotTimeout(
                f"no free slot in {slots_dir} after {timeout:g} s; all {len(paths)} "
                f"slot(s) are held:\n{_holders(paths)}\n"
                "Raise --timeout, or check for a stuck evaluation holding a device."
            )
        time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 2, max_delay)


def child_env(claim: SlotClaim, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    if claim.is_gpu:
        env["CUDA_VISIBLE_DEVICES"] = claim.device
    env[ENV_SLOT] = claim.device
    return env


def run_with_slot(
    command: list[str],
    *,
    slots_dir: str | os.PathLike | None = None,
    results: str | os.PathLike = "results",
    gpus: str | int | None = None,
    devices: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    late: bool = False,
    queue: int = QUEUE_PLACES,
) -> int:
    """Claim a slot, run `command` on it, return its exit code (128+N when a
    signal N ended it, as a shell would). SIGTERM/SIGINT go on to the command.
    `late` (GPU slots only): claim a place in the device's queue; the command
    takes the device itself with timing_slot() (module docstring); `queue`
    places per device."""
    if not command:
        raise SlotError("no command given; usage: kernelsweep gpu-slots run [options] -- CMD ARGS...")
    slots = slot_devices(gpus, devices)
    directory = resolve_slots_dir(slots_dir, results, cpu=slots == [CPU_DEVICE])
    late = late and slots != [CPU_DEVICE]  # CPU timing shares cores with whatever warms up: never late
    with claim_slot(directory, slots, timeout, label=f"cmd={' '.join(command)[:200]}",
                    path_of=queue_path if late else lock_path, places=queue if late else 1) as claim:
        env = child_env(claim)
        if late:
            env[ENV_TIMING_LOCK] = str(lock_path(directory, claim.device))
            env[ENV_QUEUE_FD] = str(claim.fd)
        child: subprocess.Popen | None = None
        pending: list[int] = []  # signals that arrived before the child existed

        def forward(signum, _frame):
            if child is None:
                pending.append(signum)
            elif child.poll() is None:
                child.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            try:
                # pass_fds: the child holds the lock too (see the module docstring).
                child = subprocess.Popen(command, env=env, pass_fds=(claim.fd,))
            except FileNotFoundError:
                raise SlotError(f"command not found: {command[0]}", exit_code=127) from None
            except PermissionError:
                raise SlotError(f"command not executable: {command[0]}", exit_code=126) from None
            if late:
                claim.release()  # the command holds its place alone, and gives it up in timing_slot()
            for signum in pending:
                child.send_signal(signum)
            returncode = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return 128 + -returncode if returncode < 0 else returncode


def late_claim() -> bool:
    """Whether this process runs under `run --late` and must take the device with timing_slot()."""
    return bool(os.environ.get(ENV_TIMING_LOCK))


@contextmanager
def timing_slot(label: str = "", timeout: float | None = DEFAULT_TIMEOUT_S) -> Iterator[float | None]:
    """In a `run --late` command: wait for the device's lock (the job before
    has finished timing), then give up the place in the queue, so the next job
    starts warming up; yields the seconds waited and holds the device until
    the block ends. Anywhere else: nothing to take (the wrapper holds the slot,
    or there is none); yields None."""
    path = os.environ.get(ENV_TIMING_LOCK)
    if not path:
        yield None
        return
    start = time.monotonic()
    device = os.environ.get(ENV_SLOT, "")
    claim = claim_slot(Path(path).parent, [device], timeout, label=label,
                       path_of=lambda _dir, _device: Path(path), max_delay=0.01)
    queue_fd = os.environ.pop(ENV_QUEUE_FD, None)
    if queue_fd is not None:
        try:
            os.close(int(queue_fd))
        except (OSError, ValueError):
            pass  # already closed: the place was given up before
    try:
        yield time.monotonic() - start
    finally:
        claim.release()


@contextmanager
def accounted_turn(label: str, stage_s: dict[str, float], warming_since: float) -> Iterator[None]:
    """timing_slot() for a job that began warming up at `warming_since`
    (time.monotonic()): records in `stage_s` how long it warmed up (`warm`),
    waited for the device (`slot_wait`) and held it (`device_held`)."""
    stage_s["warm"] = round(time.monotonic() - warming_since, 3)
    with timing_slot(label=label) as waited:
        held = time.monotonic()
        stage_s["slot_wait"] = round(waited or 0.0, 3)
        try:
            yield
        finally:
            stage_s["device_held"] = round(time.monotonic() - held, 3)


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="run a command on a claimed GPU (or CPU) slot")
    run.add_argument("--slots-dir", help=f"lock folder (default: ${ENV_SLOTS_DIR} or <results>/.gpu-slots)")
    run.add_argument("--results", default="results", help="results folder, for the default slots dir")
    run.add_argument(
        "--gpus",
        help=f"number of GPU slots, 'cpu'/0 for one CPU slot, or 'auto' (the default: ${ENV_GPUS}, "
        "else the CUDA_VISIBLE_DEVICES entries, else the GPUs found)",
    )
    run.add_argument(
        "--devices",
        help=f"the GPUs timings may use, e.g. '1,2' (default: ${ENV_DEVICES}, else as --gpus says); "
        "keeps the others free, e.g. for a model generating on GPU 0",
    )
    run.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait for a free slot (default {DEFAULT_TIMEOUT_S:g}; <0: forever)",
    )
    run.add_argument(
        "--late", action="store_true",
        help="GPU slots: claim a place in the device's queue; the command takes the device itself "
        "once its processes are warm (kernelsweep evaluate-candidate does)",
    )
    run.add_argument(
        "--queue", type=int, default=QUEUE_PLACES, metavar="N",
        help=f"with --late: jobs per device that may warm up while it times (default {QUEUE_PLACES}); "
        "give Snakemake --resources gpu=(N+1)*GPUs so that many run",
    )
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")


def main(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    try:
        return run_with_slot(
            command,
            slots_dir=args.slots_dir,
            results=args.results,
            gpus=args.gpus,
            devices=args.devices,
            timeout=None if args.timeout < 0 else args.timeout,
            late=args.late,
            queue=args.queue,
        )
    except SlotError as exc:
        print(f"gpu_slots: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
