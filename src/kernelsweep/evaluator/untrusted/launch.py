"""Start one worker confined (run as a script, standard library only, before
any candidate code exists).

    python -I -S launch.py SPEC_JSON -- WORKER ARGV...

In new user, mount, PID, network and IPC namespaces it forks the worker as
PID 1 of its own PID namespace, so every process the candidate starts, with
or without setsid, dies with it. Inside, before exec:
- every mount is private and read-only (recursively), /proc is the new
  namespace's (no other process is visible, the parent's file descriptors
  included), /dev is new and holds only the usual character devices and the
  GPU's (no disk), and the paths the spec names are hidden under empty tmpfs;
- the spec's binds come back at their own paths, writable or read-only:
  the worker's private directory, the candidate's own build directory;
- there is no network (an empty network namespace);
- resource limits are set hard (soft = hard), so they cannot be raised;
- every capability is dropped (bounding set, securebits, no_new_privs), so
  nothing can be remounted or regained through exec.
This process stays outside as the worker's parent: it writes the worker's
PID to the spec's pid_fd (the harness kills that PID, which takes the whole
namespace down) and exits the way the worker did."""

import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWNET, CLONE_NEWIPC = 0x40000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 1
SYS_MOUNT_SETATTR = 442  # x86_64 and the generic table (aarch64) alike
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 1, 24, 28, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SECUREBITS_LOCKED_NOROOT = 0xEF  # noroot, no_setuid_fixup, no_ambient_raise, each locked; keep_caps locked off
LIMITS = {"as": resource.RLIMIT_AS, "core": resource.RLIMIT_CORE, "fsize": resource.RLIMIT_FSIZE,
          "nofile": resource.RLIMIT_NOFILE}

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
libc.syscall.restype = ctypes.c_long


class Refused(Exception):
    """The kernel refused a step: confinement is not possible here."""


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise Refused(f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None):
    _check(libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(), flags,
                      data and ctypes.c_char_p(data.encode())), f"mount {target}")


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(without):
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWPID
    for name, flag in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET), ("ipc", CLONE_NEWIPC)):
        if name not in without:
            flags |= flag
    _check(libc.unshare(flags), "unshare")
    if flags & CLONE_NEWUSER:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _read_only_everywhere():
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    rc = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    if rc == 0:
        return
    # Kernels before 5.12: remount each mount read-only, one by one.
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in sorted(set(points), key=len):
        libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)


# The device nodes a worker gets (a fresh /dev holds only these): the usual
# character devices and the GPU's. Everything else (disks above all) is absent.
STANDARD_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_DEVICE_PREFIXES = ("nvidia", "dri", "kfd")


def _device_nodes():
    names = [n for n in STANDARD_DEVICES if os.path.exists(f"/dev/{n}")]
    for entry in sorted(os.listdir("/dev")):
        if entry.startswith(GPU_DEVICE_PREFIXES):
            if os.path.isdir(f"/dev/{entry}"):
                names += [f"{entry}/{sub}" for sub in sorted(os.listdir(f"/dev/{entry}"))]
            else:
                names.append(entry)
    return names


def _bind_fd(fd, target, writable):
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if writable else MS_RDONLY | MS_NODEV))


def _fresh_dev(nodes):
    """A tmpfs /dev with only `nodes` bound in (writable: a GPU driver maps
    its device files shared and writable), shm as its own tmpfs, the usual links."""
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "size=1m,mode=0755")
    for name, fd in nodes:
        target = f"/dev/{name}"
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
        _bind_fd(fd, target, True)
        os.close(fd)
    os.mkdir("/dev/shm")
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777")
    for link, points_to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                            ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(points_to, f"/dev/{link}")


def set_up_filesystem(spec, without):
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Opened before anything is hidden; bound back through /proc/self/fd below.
    binds = []
    for bind in spec.get("binds", []):
        binds.append((os.open(bind["source"], os.O_PATH | os.O_CLOEXEC), bind))
    nodes = [(name, os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)) for name in _device_nodes()]
    if "readonly" not in without:
        _read_only_everywhere()
    if "proc" not in without:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if "dev" not in without:
        _fresh_dev(nodes)
    for path in spec.get("hide", []) if "hide" not in without else []:
        if os.path.isdir(path) and not os.path.islink(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={spec.get('tmpfs_size', '256m')},mode=0755")
    # Outer paths first, so a path inside another keeps its own bind (a private
    # directory under a read-only place stays writable).
    for fd, bind in sorted(binds, key=lambda b: os.path.normpath(b[1]["target"]).count("/")):
        target = bind["target"]
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(target, exist_ok=True)
        elif not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        _bind_fd(fd, target, bind.get("writable"))
        os.close(fd)


def set_limits(limits):
    for name, value in limits.items():
        if value is not None:
            resource.setrlimit(LIMITS[name], (int(value), int(value)))


def drop_privileges():
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability
    _check(libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_NOROOT, 0, 0, 0), "securebits")


def _exit_like(status):
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 1)


def main(argv):
    spec = json.loads(argv[1])
    command = argv[argv.index("--") + 1:]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Dies with whoever started it (a killed job), and the worker dies with it.
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    pid_w = spec.get("pid_fd")  # None: the caller kills the process group instead
    # "without": steps left out, to find which one a driver or a kernel refuses
    # (a diagnostic: the harness never sets it).
    without = set(spec.get("without", []))
    try:
        enter_namespaces(without)
    except (Refused, OSError) as exc:
        if pid_w is not None:
            os.write(pid_w, json.dumps({"refused": str(exc)}).encode())
            os.close(pid_w)
        sys.stderr.write(f"kernelsweep confinement refused: {exc}\n")
        os._exit(97)
    pid = os.fork()
    if pid == 0:  # PID 1 of the new namespace
        try:
            if pid_w is not None:
                os.close(pid_w)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            set_up_filesystem(spec, without)
            set_limits(spec.get("limits", {}))
            os.chdir(spec["cwd"])
            if "caps" not in without:
                drop_privileges()
            os.execve(command[0], command, spec.get("env") or os.environ)
        except BaseException as exc:  # noqa: BLE001 - report, never run unconfined
            sys.stderr.write(f"kernelsweep confinement failed: {exc}\n")
            sys.stderr.flush()
            os._exit(98)
    if pid_w is not None:
        os.write(pid_w, json.dumps({"pid": pid}).encode())
        os.close(pid_w)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: os.kill(pid, signal.SIGKILL))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv)
