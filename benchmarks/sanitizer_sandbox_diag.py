"""Why compute-sanitizer cannot attach to a target in the grader's sandbox: one isolation step
at a time, each under the tool, on a GPU machine.

The grader's sandbox (autograder/sandbox/ and driver.py) puts the driver in a PID namespace
with a fresh /proc, then (in the driver) new network and mount namespaces, empty tmpfs over
hidden folders and an unprivileged uid. Under ``grade --sanitize`` compute-sanitizer runs
between the launcher and the driver, so the tool sits outside the driver's network and mount
namespaces. This probe starts a tiny Numba program with an out-of-bounds store (memcheck must
report it) under compute-sanitizer, with one step of that isolation applied in the target, or
around the tool, and records for each: did the kernel run under the tool, what the tool said,
the target's parent chain, and the tool's sockets (what it listens on for its target).

    python3 benchmarks/sanitizer_sandbox_diag.py --out $OUT/diag.json

Writes JSON and prints a table: case, attached (an "Invalid __global__ write" report), seconds.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NEWNS, NEWNET, NEWPID = 0x00020000, 0x40000000, 0x20000000
MS_REC, MS_PRIVATE, MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 16384, 1 << 18, 1, 2, 4, 8

TARGET = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
NEWNS, NEWNET = 0x00020000, 0x40000000
def chain():
    out, p = [], os.getpid()
    for _ in range(6):
        try:
            st = open(f"/proc/{p}/stat").read()
            comm = st[st.index("(") + 1:st.rindex(")")]
            pp = int(st[st.rindex(")") + 2:].split()[1])
        except Exception:
            out.append(f"{p}:?")
            break
        out.append(f"{p}:{comm}")
        if pp <= 0:
            break
        p = pp
    return out
print("TARGET chain", chain(), "ppid", os.getppid(), "uid", os.getuid(), flush=True)
print("TARGET env", sorted((k, v[:120]) for k, v in os.environ.items()
      if any(s in k for s in ("SANIT", "INJECT", "NV_", "CUDA", "LD_PRELOAD", "TMP"))), flush=True)
for step in [s for s in sys.argv[1].split("+") if s != "none"]:
    if step == "netns":
        rc = libc.unshare(NEWNET)
    elif step in ("mnt_tmp", "mnt_shm", "mnt_both"):
        rc = libc.unshare(NEWNS) or libc.mount(b"none", b"/", None, 16384 | (1 << 18), None)
        for d in {"mnt_tmp": [b"/tmp"], "mnt_shm": [b"/dev/shm"], "mnt_both": [b"/tmp", b"/dev/shm"]}[step]:
            rc = rc or libc.mount(b"tmpfs", d, b"tmpfs", 1, b"size=16k,mode=0555")
    elif step == "uid":
        os.setgroups([]); os.setgid(65534); os.setuid(65534); rc = 0
    else:
        raise SystemExit(f"unknown step {step}")
    print("TARGET step", step, "rc", rc, ctypes.get_errno(), flush=True)
import numpy as np
from numba import cuda
@cuda.jit
def oob(a):
    i = cuda.grid(1)
    a[i + (1 << 22)] = 1.0
a = cuda.device_array(32, dtype=np.float32)
oob[1, 32](a)
try:
    cuda.synchronize()
except Exception as e:
    print("TARGET sync raised", type(e).__name__, str(e)[:200], flush=True)
print("TARGET ran", flush=True)
'''


def lo_up() -> str:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifr))[1]   # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))   # SIOCSIFFLAGS IFF_UP
        return "up"
    except OSError as e:
        return f"failed: {e}"
    finally:
        s.close()


def wrapper_main(spec: str, argv: list[str]) -> None:
    """Run as ``diag.py --wrap SPEC cmd...``: apply SPEC around the tool, then exec cmd.
    SPEC: '+'-joined of pidns, freshproc, netns, lo."""
    libc = ctypes.CDLL(None, use_errno=True)
    steps = spec.split("+")
    if "pidns" in steps:
        if libc.unshare(NEWPID) != 0:
            print("WRAP unshare(NEWPID) failed", ctypes.get_errno(), flush=True)
            os._exit(90)
        pid = os.fork()
        if pid:
            _, st = os.waitpid(pid, 0)
            os._exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 1)
        # pid 1 of the namespace from here
        if "freshproc" in steps:
            rc = libc.unshare(NEWNS) or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) \
                or libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            print("WRAP freshproc rc", rc, flush=True)
    if "netns" in steps:
        print("WRAP netns rc", libc.unshare(NEWNET), flush=True)
        if "lo" in steps:
            print("WRAP lo", lo_up(), flush=True)
    if "pidns" in steps:   # stay as init: the tool is our child, never pid 1
        pid = os.fork()
        if pid == 0:
            os.execv(argv[0], argv)
        while True:
            got, st = os.wait()
            if got == pid:
                os._exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 1)
    os.execv(argv[0], argv)


def sockets_of(pid: int) -> dict:
    """The tool's sockets: inode -> what /proc/net says of it (listening TCP ports, unix paths)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return {}
    found = {}
    for table in ("tcp", "tcp6", "unix"):
        try:
            lines = open(f"/proc/{pid}/net/{table}").read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            f = ln.split()
            ino = f[9] if table != "unix" else f[6]
            if ino in inodes:
                if table == "unix":
                    found[ino] = f"unix {f[7] if len(f) > 7 else '(anonymous)'}"
                else:
                    port = int(f[1].split(":")[1], 16)
                    found[ino] = f"{table} local port {port} state {f[3]}"
    return found


def descendants(root: int) -> list[int]:
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                st = open(f"/proc/{p}/stat").read()
                kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(p))
            except OSError:
                pass
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def comm(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return "?"


def run_case(name, exe, target, target_mode, wrap, timeout, env) -> dict:
    cmd = [exe, "--tool", "memcheck", "--launch-timeout", "12", "--show-backtrace", "no",
           sys.executable, str(target), target_mode]
    if wrap:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--wrap", wrap, *cmd]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, env=env)
    socks: dict = {}

    def peek():   # the tool's sockets, a few seconds in (while it waits for its target)
        time.sleep(4)
        for d in [p.pid, *descendants(p.pid)]:
            if "compute-sanit" in comm(d) or "Sanitizer" in comm(d) or "TreeLauncher" in comm(d):
                socks[f"{d}:{comm(d)}"] = sockets_of(d)
        socks["tree"] = [f"{d}:{comm(d)}" for d in descendants(p.pid)]

    th = threading.Thread(target=peek, daemon=True)
    th.start()
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        for d in [*descendants(p.pid), p.pid]:
            try:
                os.kill(d, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, _ = p.communicate()
        rc = "timeout"
    th.join(1)
    return {"case": name, "target_mode": target_mode, "wrap": wrap, "returncode": rc,
            "seconds": round(time.time() - t0, 1),
            "attached": "Invalid __global__ write" in out, "ran": "TARGET ran" in out,
            "output": out[-4000:], "tool_sockets": socks}


CASES = [   # name, target mode, wrapper spec
    ("baseline", "none", ""),
    ("target_netns", "netns", ""),
    ("target_mnt_tmp", "mnt_tmp", ""),
    ("target_mnt_shm", "mnt_shm", ""),
    ("target_uid", "uid", ""),
    ("tool_netns_lo", "none", "netns+lo"),
    ("tool_netns_nolo", "none", "netns"),
    ("pidns_hostproc", "none", "pidns"),
    ("pidns_freshproc", "none", "pidns+freshproc"),
    ("candidate", "mnt_both+uid", "pidns+freshproc+netns+lo"),
]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--wrap"]:
        wrapper_main(argv[1], argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--timeout", type=float, default=45)
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    from book import sanitizer
    from book.provenance import provenance

    exe = sanitizer.find()
    rec = {"provenance": provenance("python3 benchmarks/sanitizer_sandbox_diag.py --out " + str(args.out)),
           "exe": exe, "cases": []}
    if exe is None:
        rec["skipped"] = "compute-sanitizer not found"
    else:
        h = subprocess.run([exe, "--help"], capture_output=True, text=True)
        rec["help_lines"] = [ln for ln in (h.stdout + h.stderr).splitlines()
                             if any(w in ln.lower() for w in ("port", "timeout", "connect", "attach",
                                                              "launch", "target-processes", "tmp"))]
        tmp = Path(tempfile.mkdtemp(prefix="sdiag-"))
        os.chmod(tmp, 0o755)
        target = tmp / "target.py"
        target.write_text(textwrap.dedent(TARGET))
        os.chmod(target, 0o644)
        env = dict(os.environ, NUMBA_CUDA_DEBUGINFO="1")
        for name, mode, wrap in CASES:
            if args.only and name not in args.only.split(","):
                continue
            r = run_case(name, exe, target, mode, wrap, args.timeout, env)
            rec["cases"].append(r)
            print(f"{name:18s} attached={r['attached']!s:5s} ran={r['ran']!s:5s} rc={r['returncode']!s:8s} "
                  f"{r['seconds']:5.1f}s  {[ln for ln in r['output'].splitlines() if 'Error' in ln][:1]}",
                  flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(rec, indent=1, default=str))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
