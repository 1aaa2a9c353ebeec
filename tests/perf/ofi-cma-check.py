#!/usr/bin/env python3
"""ofi-cma-check.py: can two sibling processes (as mpirun's ranks are) read
each other's memory with process_vm_readv here? libfabric's shm provider
copies by CMA where they can (a 64 KiB write or read is one system call by
one side) and through its own bounce buffers where they cannot (both
sides' progress loops then take turns per piece). Prints the kernel's
ptrace setting, this process's capabilities and the outcome."""
import ctypes
import os


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def main():
    for path in ("/proc/sys/kernel/yama/ptrace_scope",):
        try:
            print(path, open(path).read().strip())
        except OSError as e:
            print(path, "unreadable:", e.strerror)
    for line in open("/proc/self/status"):
        if line.startswith(("CapEff", "CapBnd", "Uid")):
            print(line.strip())
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(b"cma-ok", 64)
    addr = ctypes.addressof(buf)
    rd, wr = os.pipe()
    holder = os.fork()
    if holder == 0:  # keeps buf alive until told
        os.close(wr)
        os.read(rd, 1)
        os._exit(0)
    reader = os.fork()
    if reader == 0:  # a sibling of holder, not its parent
        dst = ctypes.create_string_buffer(64)
        local, remote = IoVec(ctypes.addressof(dst), 6), IoVec(addr, 6)
        n = libc.process_vm_readv(holder, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        err = ctypes.get_errno()
        print("sibling process_vm_readv:", n,
              os.strerror(err) if n < 0 else dst.value.decode())
        os._exit(0)
    os.waitpid(reader, 0)
    os.write(wr, b"x")
    os.waitpid(holder, 0)


if __name__ == "__main__":
    main()
