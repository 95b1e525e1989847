"""A device buffer the reference's worker lends the candidate's worker, so the
candidate's correctness outputs cross on the device instead of through files.

The reference's worker allocates it with the CUDA driver's virtual memory API
(cuMemCreate, exportable as a POSIX file descriptor), zeroes it, and sends
the descriptor over a Unix socket the parent made for the pair; the
candidate's worker maps it and copies each trial's output into its slot
(layout: where each of the reference's output tensors goes). A GiB-sized
output takes seconds to write to a file and read back, for every trial, with
the device held; a device copy takes milliseconds
(docs/decisions/2026-12-03-outputs-cross-on-device.md). Legacy CUDA IPC
handles cannot cross the candidate's PID namespace; a descriptor can.

What the candidate can do with it: write anything into this buffer (its own
answers), as it could into its own output files. The buffer holds nothing
else of the reference's, and the reference copies a slot out before judging it.
Any step the driver refuses leaves the files in use (`Unavailable`).

Imported before any candidate code runs, so the functions kept here are the
real ones."""

from __future__ import annotations

import ctypes
import os
import socket
from typing import Any

import torch

from kernelsweep.evaluator.untrusted.outputfiles import byte_view, dtype_name, raw

ALIGN = 512  # slot offsets: any dtype's alignment, and full memory transactions

_POSIX_FD = 1                # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1                  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1               # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3              # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_VMM_SUPPORTED = 102         # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
_POSIX_FD_SUPPORTED = 103    # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
_GRANULARITY_RECOMMENDED = 1

_send_fds = socket.send_fds
_recv_fds = socket.recv_fds
_as_tensor = torch.as_tensor
_close = os.close
_dup = os.dup


class Unavailable(Exception):
    """The driver cannot share device memory this way here (or refused a step)."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_driver: Any = None


def _cu() -> Any:
    global _driver
    if _driver is None:
        try:
            _driver = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise Unavailable(f"no CUDA driver library: {exc}") from None
    return _driver


def _check(status: int, what: str) -> None:
    if status != 0:
        raise Unavailable(f"{what} failed (CUDA driver error {status})")


def _current_device() -> int:
    dev = ctypes.c_int()
    _check(_cu().cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
    return dev.value


def _prop(device: int) -> _Prop:
    prop = _Prop()
    prop.type, prop.requestedHandleTypes = _PINNED, _POSIX_FD
    prop.location = _Location(_ON_DEVICE, device)
    return prop


class _Span:
    """A device address range as __cuda_array_interface__ (torch wraps it, no copy)."""

    def __init__(self, address: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 3, "strides": None}


class SharedBuffer:
    """NBYTES (rounded up to the driver's granularity) of device memory, mapped
    here; `tensor` is a uint8 view of it. Made with `create` (exportable) or
    `open` (from a descriptor another process exported)."""

    def __init__(self, device: torch.device, handle: int, nbytes: int):
        self.device, self.nbytes = device, nbytes
        self._handle = ctypes.c_ulonglong(handle)
        self._address = ctypes.c_ulonglong(0)
        self._mapped = False
        cu = _cu()
        try:
            dev = _current_device()
            _check(cu.cuMemAddressReserve(ctypes.byref(self._address), ctypes.c_size_t(nbytes),
                                          ctypes.c_size_t(0), ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)),
                   "cuMemAddressReserve")
            _check(cu.cuMemMap(self._address, ctypes.c_size_t(nbytes), ctypes.c_size_t(0), self._handle,
                               ctypes.c_ulonglong(0)), "cuMemMap")
            self._mapped = True
            access = _AccessDesc(_Location(_ON_DEVICE, dev), _READ_WRITE)
            _check(cu.cuMemSetAccess(self._address, ctypes.c_size_t(nbytes), ctypes.byref(access),
                                     ctypes.c_size_t(1)), "cuMemSetAccess")
        except Unavailable:
            self.close()
            raise
        self.tensor = _as_tensor(_Span(self._address.value, nbytes), device=device)

    @classmethod
    def create(cls, device: torch.device, nbytes: int) -> "SharedBuffer":
        cu, dev = _cu(), _current_device()
        for attribute, what in ((_VMM_SUPPORTED, "virtual memory management"),
                                (_POSIX_FD_SUPPORTED, "POSIX file descriptor handles")):
            value = ctypes.c_int()
            _check(cu.cuDeviceGetAttribute(ctypes.byref(value), attribute, dev), "cuDeviceGetAttribute")
            if not value.value:
                raise Unavailable(f"the device does not support {what}")
        prop = _prop(dev)
        grain = ctypes.c_size_t()
        _check(cu.cuMemGetAllocationGranularity(ctypes.byref(grain), ctypes.byref(prop),
                                                _GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity")
        size = -(-max(nbytes, 1) // grain.value) * grain.value
        handle = ctypes.c_ulonglong()
        _check(cu.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop),
                              ctypes.c_ulonglong(0)), "cuMemCreate")
        buffer = cls(device, handle.value, size)  # which releases the handle if it cannot map it
        buffer.tensor.zero_()  # fresh memory says nothing of anyone's earlier data
        return buffer

    @classmethod
    def open(cls, device: torch.device, fd: int, nbytes: int) -> "SharedBuffer":
        handle = ctypes.c_ulonglong()
        _check(_cu().cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD),
               "cuMemImportFromShareableHandle")
        return cls(device, handle.value, nbytes)  # which releases the handle if it cannot map it

    def export(self) -> int:
        """A new file descriptor for this memory (the caller closes it)."""
        fd = ctypes.c_int(-1)
        _check(_cu().cuMemExportToShareableHandle(ctypes.byref(fd), self._handle, _POSIX_FD,
                                                  ctypes.c_ulonglong(0)), "cuMemExportToShareableHandle")
        return fd.value

    def close(self) -> None:
        """Unmapped here; the memory itself is freed once no process maps it."""
        self.tensor = None
        if self._handle is None:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # no copy still reading or writing it
        cu = _cu()
        if self._mapped:
            cu.cuMemUnmap(self._address, ctypes.c_size_t(self.nbytes))
        if self._address.value:
            cu.cuMemAddressFree(self._address, ctypes.c_size_t(self.nbytes))
        cu.cuMemRelease(self._handle)
        self._handle = None


# ---------------------------------------------------------------- layout ---
def describe(leaves: list) -> list[dict[str, Any] | None]:
    """An output's leaves as slots to be: {dtype, shape, nbytes} per tensor, None per number."""
    return [{"dtype": dtype_name(x.dtype), "shape": list(x.shape), "nbytes": x.numel() * x.element_size()}
            if isinstance(x, torch.Tensor) else None for x in leaves]


def slot_layout(described: dict[str, list[dict[str, Any] | None]]) -> tuple[dict[str, list], int]:
    """Each named output's slots with their offsets in one buffer, and its size."""
    layout, offset = {}, 0
    for name, leaves in described.items():
        slots: list[dict[str, Any] | None] = []
        for leaf in leaves:
            if leaf is None:
                slots.append(None)
                continue
            slots.append(dict(leaf, offset=offset))
            offset += -(-leaf["nbytes"] // ALIGN) * ALIGN
        layout[name] = slots
    return layout, offset


def lendable_bytes(layout: dict[str, list], room: int) -> tuple[int, int]:
    """The outputs of LAYOUT that fit whole in ROOM bytes, in layout order
    (the trials, then the probes): (their buffer's size, how many). The rest
    cross in files, so outputs too big for one buffer still use one."""
    end, count = 0, 0
    for slots in layout.values():
        last = max((slot["offset"] + slot["nbytes"] for slot in slots if slot is not None), default=end)
        if last > room:
            break
        end, count = max(end, last), count + 1
    return end, count


def within(slots: list[dict[str, Any] | None], nbytes: int) -> bool:
    """Whether every tensor slot lies inside a buffer of NBYTES (a buffer lent
    for the first outputs only holds theirs)."""
    return all(slot is None or slot["offset"] + slot["nbytes"] <= nbytes for slot in slots)


def _matches(x: torch.Tensor, slot: dict[str, Any]) -> bool:
    return dtype_name(x.dtype) == slot["dtype"] and list(x.shape) == slot["shape"]


def fits(leaves: list, slots: list[dict[str, Any] | None]) -> bool:
    """Whether an output's leaves can go into these slots: as many leaves,
    each with a raw form (outputfiles.raw), each tensor of its slot's dtype and
    shape, each number where the slot expects one."""
    if len(leaves) != len(slots) or not raw(leaves):
        return False
    return all((slot is None) == (not isinstance(x, torch.Tensor)) and (slot is None or _matches(x, slot))
               for x, slot in zip(leaves, slots))


def decided_without_values(leaves: list, slots: list[dict[str, Any] | None]) -> bool:
    """Whether compare.compare_outputs fails these leaves against the output
    the slots describe on structure, shape or dtype before it reads a tensor's
    values (leaves are compared in order; numbers by value, as they cross as
    numbers). Then the candidate's worker need not send the values at all."""
    if len(leaves) != len(slots):
        return True
    for x, slot in zip(leaves, slots):
        if slot is None:
            if isinstance(x, torch.Tensor):
                return True
            continue
        return not isinstance(x, torch.Tensor) or not _matches(x, slot)
    return False


def described(output: dict[str, Any]) -> dict[str, Any]:
    """An output without its values: structure, numbers, and each tensor as describe() gives it."""
    return {"structure": output["structure"],
            "leaves": [x if d is None else d for x, d in zip(output["leaves"], describe(output["leaves"]))]}


def slot_view(buffer: torch.Tensor, slot: dict[str, Any]) -> torch.Tensor:
    return byte_view(buffer, slot["offset"], slot)


# ---------------------------------------------------------------- socket ---
# The pair's socket stays open on both ends (each call works on a duplicate of
# it): one buffer for the trials' outputs, then one per shape variant.
def send_descriptor(sock_fd: int, fd: int) -> None:
    """Send FD over the pair's socket; this end only ever sends."""
    try:
        with socket.socket(fileno=_dup(sock_fd)) as sock:
            sock.shutdown(socket.SHUT_RD)
            _send_fds(sock, [b"b"], [fd])
    finally:
        _close(fd)


def receive_descriptor(sock_fd: int, timeout_s: float = 30.0) -> int:
    with socket.socket(fileno=_dup(sock_fd)) as sock:
        sock.settimeout(timeout_s)
        _, fds, _, _ = _recv_fds(sock, 1, 1)
    if len(fds) != 1:
        for fd in fds:
            _close(fd)
        raise Unavailable("no buffer descriptor came from the reference's worker")
    return fds[0]
