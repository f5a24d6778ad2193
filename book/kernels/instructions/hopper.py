"""Hopper's own instructions from Numba: ``wgmma``, TMA and ``mbarrier`` (sm_90a).

Numba has no API for them; like :mod:`book.kernels.tensorcore`, each is an ``@intrinsic``
that emits inline PTX. What a Hopper GEMM needs, and what each does:

- ``wgmma`` (``wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}``): one *warpgroup* (4
  consecutive warps, 128 threads) multiplies a 64 x 16 tile of A by a 16 x N tile of B into
  64 x N float32 accumulators spread over its 128 threads (:func:`d_coords`). Both operands
  are read from shared memory through 64-bit *matrix descriptors* (:func:`descriptor`), and
  the instruction is asynchronous: ``wgmma_fence()`` before the first one, then
  ``wgmma_commit()`` closes a group and ``wgmma_wait(n)`` waits until at most n groups are
  in flight. :func:`make_wgmma` builds the instruction for one N and dtype; it updates a
  ``cuda.local.array`` of N/2 float32 in place (the loops over it unroll, so it stays in
  registers).
- The matrix descriptor says where the operand lives: start address, the byte distance
  between 8-row groups (SBO), between core matrices along K (LBO, unused by the swizzled
  K-major layouts), and the swizzle mode. :func:`operand_addresses` is its model: which
  shared byte each element of the operand is read from.
- The swizzle (:func:`swizzle`): within every 1024 bytes, the 16-byte chunk index of each
  128-byte row is XORed with the row number, so the 8 rows of a core matrix fall in 8
  different bank groups. TMA writes tiles in the same pattern, and wgmma reads it back.
- TMA (the tensor memory accelerator): one thread asks for a whole 2-D box of a tensor,
  ``tma_load_2d(dst, map, c0, c1, mbar)``, described by a 128-byte *tensor map* made on the
  host (:func:`tensor_map`: address, sizes, strides, box, swizzle). Rows or columns outside
  the tensor arrive as zeros (:func:`tma_box` is the model). The copy reports its bytes to
  an mbarrier. ``bulk_load(dst, src, nbytes, mbar)`` is its one-dimensional form: a
  contiguous run of global bytes, no tensor map.
- ``mbarrier``: a barrier object in shared memory with an arrival count and a transaction
  byte count; a *phase* completes when all arrivals and all expected bytes have come.
  ``mbar_init``, ``mbar_arrive``, ``mbar_arrive_expect_tx`` (arrive and expect that many
  bytes), ``mbar_wait(bar, parity)`` (spin until the phase of that parity has completed);
  ``ring_next(s, parity, stages)`` steps through a ring of such stages.
  :class:`MbarrierModel` is its model.
- ``fence_mbarrier_init()`` (make the barriers' initialisation visible to the copy engine),
  ``fence_proxy_async()`` (order ordinary shared stores before the async proxy reads them),
  ``setmaxnreg_inc(n)`` / ``setmaxnreg_dec(n)`` (move registers between warpgroups: the
  producer gives its spare registers to the consumers), ``named_barrier(id, threads)``
  (``bar.sync`` among a subset of the block), ``global_address(arr, i)`` (the generic
  address of ``arr[i]``, what TMA takes for the map), ``shared_address(arr, i)`` (from
  :mod:`book.kernels.tensorcore`), ``globaltimer()`` (nanoseconds, one clock for every SM),
  ``smid()`` (the SM a thread runs on).
- Programmatic dependent launch: ``griddep_launch_dependents()`` (the next kernel on the
  stream may start its blocks as this one's free their SMs) and ``griddep_wait()`` (wait
  until the kernel before this one has finished and its memory is visible): a kernel
  launched with the programmatic stream serialization attribute may begin while the one
  before it ends, and must wait before it reads or writes what that one touches.

All of it needs sm_90a: the "a" target, which ptxas requires for wgmma and setmaxnreg
(Numba adds it when it compiles for the H100 it finds; a tool compiling with no GPU asks for
``cc=(9, 0, "a")``, :data:`ARCH`); :func:`check_capability` refuses any other GPU, the
``wgmma`` family of :mod:`book.capability`. In Numba's CUDA simulator the instructions do
not exist: the models below are what the chapter runs there, and the tests hold the models to
the GPU.
"""

from __future__ import annotations

import numpy as np
from numba import config

from ...capability import FAMILIES, check

SIMULATED = bool(config.ENABLE_CUDASIM)

#: compute capability (major, minor, "a") the instructions are compiled for
ARCH = FAMILIES["wgmma"].arch

#: the swizzle modes: their 2-bit code in a matrix descriptor (bits 62-63) and the width of
#: one swizzled row in bytes (the repeat is 8 such rows)
SWIZZLE_CODE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
SWIZZLE_WIDTH = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
_SWIZZLE_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}

__all__ = [
    "SIMULATED", "ARCH", "SWIZZLE_CODE", "SWIZZLE_WIDTH", "swizzle", "descriptor",
    "decode_descriptor", "operand_addresses", "d_coords", "wgmma_model", "tma_box",
    "MbarrierModel", "check_capability", "tensor_map", "make_wgmma", "WGMMA_N", "SWIZZLE_PERIOD",
]

#: bytes after which the 128B swizzle repeats (8 rows of 128 bytes): a swizzled tile starts on it
SWIZZLE_PERIOD = 1024

#: the N of the m64nNk16 instructions this module builds: every multiple of 8 to 256 (the
#: dual GEMM uses 64-256, the decode GEMV 8-64)
WGMMA_N = tuple(range(8, 257, 8))


# ---------------------------------------------------------------------------------------
# Models: what each instruction computes and where it reads and writes (pure Python)


def swizzle(addr, mode: str = "128B"):
    """The shared byte address that logical byte ``addr`` is stored at under
    ``mode``.

    Bits 4-6 of the address (the 16-byte chunk within a 128-byte row) are XORed
    with bits 7-9 (the row within 1024 bytes): for 128B all three, for 64B two,
    for 32B one. Works on ints and on NumPy integer arrays. The pattern is of
    absolute addresses, so a swizzled tile must start on a multiple of 1024
    bytes (8 rows of 128) for TMA and wgmma to agree on it."""
    bits = _SWIZZLE_BITS[mode]
    if not bits:
        return addr
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def descriptor(addr: int, lbo: int, sbo: int, mode: str = "128B",
               base_offset: int = 0) -> int:
    """The 64-bit shared-memory matrix descriptor of wgmma (PTX ISA, "Matrix
    Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading-dimension
    byte offset >> 4, 32-45 stride-dimension byte offset >> 4, 49-51 base
    offset, 62-63 swizzle mode."""
    for what, v in (("start address", addr), ("leading byte offset", lbo),
                    ("stride byte offset", sbo)):
        if v % 16:
            raise ValueError(
                f"descriptor: {what} {v} is not a multiple of 16 bytes")
    return (((addr & 0x3FFFF) >> 4) | (((lbo >> 4) & 0x3FFF) << 16)
            | (((sbo >> 4) & 0x3FFF) << 32) | ((base_offset & 7) << 49)
            | (SWIZZLE_CODE[mode] << 62))


def decode_descriptor(desc: int) -> dict:
    """The fields of a descriptor (the inverse of :func:`descriptor`)."""
    desc = int(desc)
    code = (desc >> 62) & 3
    return {"addr": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4,
            "sbo": ((desc >> 32) & 0x3FFF) << 4, "base_offset": (desc >> 49) & 7,
            "mode": {v: k for k, v in SWIZZLE_CODE.items()}[code]}


def operand_addresses(desc: int, rows: int, k: int = 16, itemsize: int = 2) -> np.ndarray:
    """[rows, k] shared byte addresses a wgmma reads a K-major operand from (A: rows = 64;
    B: rows = N), given its descriptor: the model of the descriptor.

    K-major: the k elements of one row are contiguous. Without swizzle the operand is built
    of *core matrices* of 8 rows x 16 bytes (128 contiguous bytes): the next core matrix
    along K is LBO bytes on, the next 8-row group SBO bytes on. With a swizzle each row is
    one swizzle width wide (128 bytes for 128B), 8 rows make an atom, atoms are SBO apart,
    and every byte goes through :func:`swizzle`; the k16 of one instruction (32 bytes of
    16-bit elements) lies inside one row, and the next k16 is reached by moving the start
    address 32 bytes on."""
    f = decode_descriptor(desc)
    r = np.arange(rows)[:, None]
    kb = np.arange(k)[None, :] * itemsize  # byte of the element within its row
    if f["mode"] == "none":
        addr = f["addr"] + (r // 8) * f["sbo"] + (kb // 16) * f["lbo"] + (r % 8) * 16 + kb % 16
        return addr.astype(np.int64)
    width = SWIZZLE_WIDTH[f["mode"]]
    if k * itemsize > width:
        raise ValueError(f"{k} elements of {itemsize} bytes are wider than one {width}-byte "
                         "swizzled row: advance the start address instead")
    logical = f["addr"] + (r // 8) * f["sbo"] + (r % 8) * width + kb
    return swizzle(logical.astype(np.int64), f["mode"])


def d_coords(thread: int, i: int) -> tuple[int, int]:
    """(row, column) of accumulator ``i`` of warpgroup thread ``thread`` (0..127) in the
    64 x N result of m64nNk16 (PTX ISA, "Matrix Fragments for wgmma .m64nNk16"): warp w
    holds rows 16w..16w+15; within it the layout of mma.sync's m16n8 repeats every 8
    columns, 4 registers per 8 columns."""
    w, lane = thread >> 5, thread & 31
    g, t = lane >> 2, lane & 3
    return 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)


def wgmma_model(smem: np.ndarray, desc_a: int, desc_b: int, n: int, d=None, scale_d=True,
                dtype=np.float16) -> np.ndarray:
    """D (64 x n float32) = A B^T (+ D) read from the shared-memory bytes ``smem`` through
    the two descriptors (both K-major, k = 16): the model of one wgmma. ``dtype``: how to
    read the 16-bit elements (np.float16, or "bfloat16")."""
    def read(desc, rows):
        addr = operand_addresses(desc, rows)
        raw = smem.view(np.uint8)
        bits = raw[addr].astype(np.uint16) | (raw[addr + 1].astype(np.uint16) << 8)
        if isinstance(dtype, str) and dtype == "bfloat16":
            return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return bits.view(np.float16).astype(np.float64)

    a, b = read(desc_a, 64), read(desc_b, n)
    out = a @ b.T
    if d is not None and scale_d:
        out = out + d
    return out.astype(np.float32)


def tma_box(tensor: np.ndarray, c0: int, c1: int, box: tuple[int, int],
            mode: str = "128B") -> np.ndarray:
    """The bytes a 2-D TMA load of ``tensor`` (rows x columns, row-major) writes to a
    shared tile starting on a 1024-byte boundary: the box of ``box = (columns, rows)``
    elements at column ``c0``, row ``c1`` (TMA's coordinates run innermost first), each
    box row contiguous, elements outside the tensor zero, every byte placed by
    :func:`swizzle`."""
    bc, br = box
    item = tensor.dtype.itemsize
    rowbytes = bc * item
    if mode != "none" and rowbytes > SWIZZLE_WIDTH[mode]:
        raise ValueError(f"a box row of {rowbytes} bytes is wider than the {mode} swizzle "
                         f"({SWIZZLE_WIDTH[mode]} bytes): TMA refuses such a tensor map")
    tile = np.zeros((br, bc), dtype=tensor.dtype)
    rows, cols = tensor.shape
    r0, r1 = max(c1, 0), min(c1 + br, rows)
    k0, k1 = max(c0, 0), min(c0 + bc, cols)
    if r0 < r1 and k0 < k1:
        tile[r0 - c1:r1 - c1, k0 - c0:k1 - c0] = tensor[r0:r1, k0:k1]
    logical = np.frombuffer(tile.tobytes(), dtype=np.uint8)
    out = np.zeros_like(logical)
    out[swizzle(np.arange(logical.size), mode)] = logical
    return out


class MbarrierModel:
    """An mbarrier's state (PTX ISA, "mbarrier"): the current phase, arrivals
    still expected in it, and transaction bytes still expected. A phase
    completes when both reach zero; the counts then reset for the next phase.
    ``try_wait(parity)`` is true once the phase with that parity has completed,
    i.e. the current phase's parity differs: so on a fresh barrier (phase 0) a
    wait for parity 1 passes at once, which is why a producer's first waits on
    the "empty" barriers use parity 1."""

    def __init__(self, count: int):
        if count < 1:
            raise ValueError("an mbarrier needs an arrival count of at least 1")
        self.count, self.phase, self.pending, self.tx = count, 0, count, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def expect_tx(self, nbytes: int):
        self.tx += nbytes

    def arrive(self, expect_tx: int = 0):
        self.tx += expect_tx
        self.pending -= 1
        if self.pending < 0:
            raise RuntimeError(
                "more arrivals than the barrier's count in one phase")
        self._maybe_complete()

    def complete_tx(self, nbytes: int):
        """What a TMA copy does when its bytes have landed."""
        self.tx -= nbytes
        if self.tx < 0:
            raise RuntimeError("more bytes arrived than were expected")
        self._maybe_complete()

    def try_wait(self, parity: int) -> bool:
        return (self.phase & 1) != (parity & 1)


def check_capability(cc) -> None:
    """Refuse a GPU without wgmma/TMA, saying what runs instead: anything but sm_90, and the
    simulator (``cc`` None). The check is :func:`book.capability.check`, the tensor-core
    kernels' too."""
    check(cc, "wgmma")


# ---------------------------------------------------------------------------------------
# Host side: the tensor map TMA reads


def tensor_map(ptr: int, rows: int, cols: int, row_bytes: int, box: tuple[int, int],
               itemsize: int = 2, mode: str = "128B", promotion: str = "256B") -> bytes:
    """The 128-byte ``CUtensorMap`` of a row-major 2-D tensor of 16-bit (``itemsize`` 1:
    8-bit) elements at device address ``ptr`` (``rows`` x ``cols``, ``row_bytes`` between rows), for boxes of
    ``box = (columns, rows)`` elements, made by the driver's ``cuTensorMapEncodeTiled``.
    Elements outside the tensor are read as zeros (``OOB_FILL_NONE`` fills zeros).
    ``promotion``: the L2 fill size the copies ask for ("none", "64B", "128B", "256B")."""
    from cuda.bindings import driver as cu

    if itemsize not in (1, 2):
        raise ValueError("tensor_map: 16-bit (bfloat16, float16) or 8-bit (e4m3, e5m2) "
                         "elements only")
    problems = []
    if ptr % 16:
        problems.append(f"the tensor starts at {ptr:#x}, not on 16 bytes")
    if row_bytes % 16:
        problems.append(f"rows are {row_bytes} bytes apart, not a multiple of 16 (the "
                        "inner dimension must be a multiple of 8 elements)")
    if box[0] * itemsize > SWIZZLE_WIDTH[mode] and mode != "none":
        problems.append(f"a box row of {box[0] * itemsize} bytes exceeds the {mode} swizzle")
    if max(box) > 256:
        problems.append(f"box {box}: TMA boxes have at most 256 elements per dimension")
    if problems:
        raise ValueError("cannot describe this tensor to TMA: " + "; ".join(problems))
    dtype = (cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 if itemsize == 2
             else cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8)
    swz = {"none": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
           "32B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
           "64B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
           "128B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B}[mode]
    err, tmap = cu.cuTensorMapEncodeTiled(
        dtype, 2, cu.CUdeviceptr(ptr), [cu.cuuint64_t(cols), cu.cuuint64_t(rows)],
        [cu.cuuint64_t(row_bytes)], [cu.cuuint32_t(box[0]), cu.cuuint32_t(box[1])],
        [cu.cuuint32_t(1), cu.cuuint32_t(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swz,
        getattr(cu.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_"
                + ("NONE" if promotion == "none" else "L2_" + promotion)),
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed: {err} (rows {rows}, columns "
                           f"{cols}, row bytes {row_bytes}, box {box}, swizzle {mode})")
    raw = _tensor_map_bytes(tmap)
    if len(raw) != 128:
        raise RuntimeError(f"a CUtensorMap is 128 bytes, got {len(raw)}")
    return raw


def _tensor_map_bytes(tmap):
    """The 128 bytes of a cuda.bindings CUtensorMap (its ``opaque`` words)."""
    import ctypes

    return ctypes.string_at(int(tmap.getPtr()), 128)


# ---------------------------------------------------------------------------------------
# The instructions (a GPU target only)

if not SIMULATED:
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    from .tensorcore import item_pointer, shared_address  # noqa: F401 (re-exported)

    _i32, _i64, _f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
    _void = ir.VoidType()

    def _asm(builder, text, constraints, args=(), ret=_void, side_effect=True):
        fn = ir.FunctionType(ret, [a.type for a in args])
        return builder.asm(fn, text, constraints, list(args), side_effect)

    def _u32(context, builder, ty, val):
        return context.cast(builder, val, ty, types.uint32)

    def _literal(ty, what):
        if not isinstance(ty, types.IntegerLiteral):
            raise TypingError(f"{what} must be a literal integer (it is encoded in the "
                              "instruction)")
        return int(ty.literal_value)

    def _no_operand(text):
        @intrinsic
        def emit(typingctx):
            def codegen(context, builder, signature, args):
                _asm(builder, text, "~{memory}")
                return context.get_dummy_value()

            return types.void(), codegen

        return emit

    wgmma_fence = _no_operand("wgmma.fence.sync.aligned;")
    wgmma_commit = _no_operand("wgmma.commit_group.sync.aligned;")
    fence_mbarrier_init = _no_operand("fence.mbarrier_init.release.cluster;")
    fence_proxy_async = _no_operand("fence.proxy.async.shared::cta;")
    griddep_wait = _no_operand("griddepcontrol.wait;")
    griddep_launch_dependents = _no_operand("griddepcontrol.launch_dependents;")

    @intrinsic
    def wgmma_wait(typingctx, n):
        groups = _literal(n, "wgmma_wait(n): n")

        def codegen(context, builder, signature, args):
            _asm(builder, f"wgmma.wait_group.sync.aligned {groups};", "~{memory}")
            return context.get_dummy_value()

        return types.void(n), codegen

    def _setmaxnreg(direction):
        @intrinsic
        def setmaxnreg(typingctx, n):
            regs = _literal(n, f"setmaxnreg_{direction}(n): n")
            if regs % 8 or not 24 <= regs <= 256:
                raise TypingError("setmaxnreg: n must be a multiple of 8 in 24..256")

            def codegen(context, builder, signature, args):
                _asm(builder, f"setmaxnreg.{direction}.sync.aligned.u32 {regs};", "~{memory}")
                return context.get_dummy_value()

            return types.void(n), codegen

        return setmaxnreg

    setmaxnreg_inc = _setmaxnreg("inc")
    setmaxnreg_dec = _setmaxnreg("dec")

    def _two_u32(text):
        """An instruction of two 32-bit operands ($0, $1) and no result, kept in place
        (side effect, memory clobber): the barriers below."""
        @intrinsic
        def op(typingctx, a, b):
            def codegen(context, builder, signature, args):
                ops = [_u32(context, builder, t, v) for t, v in zip(signature.args, args)]
                _asm(builder, text, "r,r,~{memory}", ops)
                return context.get_dummy_value()

            return types.void(a, b), codegen

        return op

    #: named_barrier(id, threads): bar.sync among ``threads`` threads of the block
    named_barrier = _two_u32("bar.sync $0, $1;")

    @intrinsic
    def global_address(typingctx, arr, idx):
        if not isinstance(arr, types.Array):
            raise TypingError(f"global_address: expected an array, got {arr}")

        def codegen(context, builder, signature, args):
            ptr = item_pointer(context, builder, signature.args[0], args[0], args[1])
            return builder.ptrtoint(ptr, _i64)

        return types.uint64(arr, idx), codegen

    @intrinsic
    def globaltimer(typingctx):
        """The GPU's global nanosecond timer (``%globaltimer``): one clock for every SM, so
        times taken in different blocks compare (a timeline of a kernel's blocks)."""
        def codegen(context, builder, signature, args):
            return _asm(builder, "mov.u64 $0, %globaltimer;", "=l,~{memory}", ret=_i64)

        return types.uint64(), codegen

    @intrinsic
    def smid(typingctx):
        """The SM this thread runs on (``%smid``): which SM a block landed on, for a
        timeline of blocks (ids may skip numbers: not every SM a die has is enabled)."""
        def codegen(context, builder, signature, args):
            return _asm(builder, "mov.u32 $0, %smid;", "=r", ret=_i32)

        return types.uint32(), codegen

    # -- mbarrier (64-bit objects in shared memory, addressed by 32-bit shared addresses)

    from numba import cuda, uint64

    @cuda.jit(device=True, inline="always")
    def ring_next(s, ph, stages):
        """The stage after ``s`` in a ring of ``stages`` mbarrier-guarded stages, and the
        phase parity to wait for there (it flips each time the ring wraps)."""
        s += 1
        if s == stages:
            s = 0
            ph ^= 1
        return s, ph

    #: mbar_init(bar, count): a fresh barrier in phase 0 expecting ``count`` arrivals
    mbar_init = _two_u32("mbarrier.init.shared::cta.b64 [$0], $1;")
    #: mbar_arrive_expect_tx(bar, nbytes): arrive, and expect ``nbytes`` more in this phase
    mbar_arrive_expect_tx = _two_u32("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;")

    @intrinsic
    def mbar_arrive(typingctx, bar):
        def codegen(context, builder, signature, args):
            b = _u32(context, builder, signature.args[0], args[0])
            _asm(builder, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", (b,))
            return context.get_dummy_value()

        return types.void(bar), codegen

    # Spin on try_wait (which itself suspends for a while) until the phase of this parity
    # has completed. Labels inside { } are local to the block, so the text can be inlined
    # any number of times.
    _WAIT = ("{ .reg .pred p; WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1; "
             "@!p bra WAIT_%=; }")
    #: mbar_wait(bar, parity): spin until the phase of this parity has completed
    mbar_wait = _two_u32(_WAIT.replace("%=", ""))

    @intrinsic
    def mbar_try_wait(typingctx, bar, parity):
        """1 if the phase of this parity has completed, else 0 (after a bounded wait)."""
        def codegen(context, builder, signature, args):
            b = _u32(context, builder, signature.args[0], args[0])
            p = _u32(context, builder, signature.args[1], args[1])
            return _asm(builder, "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 "
                                 "p, [$1], $2; selp.b32 $0, 1, 0, p; }",
                        "=r,r,r,~{memory}", (b, p), ret=_i32)

        return types.int32(bar, parity), codegen

    # -- clusters: CTAs launched together, each able to reach the others' shared memory

    @intrinsic
    def cluster_ctarank(typingctx):
        """This CTA's rank within its cluster."""
        def codegen(context, builder, signature, args):
            return _asm(builder, "mov.u32 $0, %cluster_ctarank;", "=r", ret=_i32,
                        side_effect=False)

        return types.uint32(), codegen

    # not .aligned: a warp may reach it diverged (the producer's lone thread comes later)
    cluster_sync = _no_operand("barrier.cluster.arrive; barrier.cluster.wait;")

    #: mbar_arrive_cluster(bar, cta): arrive on the mbarrier at the same shared address in
    #: CTA ``cta`` of the cluster (``mapa`` turns the local address into that CTA's)
    mbar_arrive_cluster = _two_u32(
        "{ .reg .b32 ra; mapa.shared::cluster.u32 ra, $0, $1; "
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra]; }")

    # -- TMA

    def _box_operands(context, builder, signature, args):
        # what every copy of a 2-D box takes first: its shared address, the tensor map's
        # generic address, the box's column and row, the mbarrier its bytes report to
        return (_u32(context, builder, signature.args[0], args[0]),
                context.cast(builder, args[1], signature.args[1], types.uint64),
                _u32(context, builder, signature.args[2], args[2]),
                _u32(context, builder, signature.args[3], args[3]),
                _u32(context, builder, signature.args[4], args[4]))

    @intrinsic
    def tma_load_2d(typingctx, dst, tmap, c0, c1, bar):
        """dst: 32-bit shared address (1024-aligned for 128B swizzle); tmap: the generic
        64-bit address of the tensor map (in global memory, 64-byte aligned); c0, c1: the
        box's first column and row; bar: the mbarrier the bytes are reported to."""
        def codegen(context, builder, signature, args):
            d, m, x, y, b = _box_operands(context, builder, signature, args)
            _asm(builder, "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                          ".mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];",
                 "r,l,r,r,r,~{memory}", (d, m, x, y, b))
            return context.get_dummy_value()

        return types.void(dst, tmap, c0, c1, bar), codegen

    def _l2_policy(kind):
        @intrinsic
        def policy(typingctx):
            def codegen(context, builder, signature, args):
                return _asm(builder, f"createpolicy.fractional.L2::{kind}.b64 $0, 1.0;", "=l",
                            ret=_i64)

            return types.uint64(), codegen

        return policy

    #: L2 cache policies for a copy's ``.L2::cache_hint`` (:func:`tma_load_2d_hint`): lines
    #: read once, to be replaced first (a stream of weights), or kept longest (operands every
    #: SM reads again)
    l2_evict_first = _l2_policy("evict_first")
    l2_evict_last = _l2_policy("evict_last")

    def _box_load_and(modifier, constraint, operand):
        # tma_load_2d with one operand more (``$5``) after a modifier of the instruction:
        # ``operand(context, builder, type, value)`` makes it, ``constraint`` its register kind
        @intrinsic
        def load(typingctx, dst, tmap, c0, c1, bar, extra):
            def codegen(context, builder, signature, args):
                ops = _box_operands(context, builder, signature, args) + (
                    operand(context, builder, signature.args[5], args[5]),)
                _asm(builder, "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                              f".mbarrier::complete_tx::bytes{modifier} "
                              "[$0], [$1, {$2, $3}], [$4], $5;",
                     f"r,l,r,r,r,{constraint},~{{memory}}", ops)
                return context.get_dummy_value()

            return types.void(dst, tmap, c0, c1, bar, extra), codegen

        return load

    #: tma_load_2d_hint(dst, tmap, c0, c1, bar, policy): :func:`tma_load_2d` with an L2 cache
    #: policy (``l2_evict_first``, ``l2_evict_last``) for the lines it reads
    tma_load_2d_hint = _box_load_and(
        ".L2::cache_hint", "l",
        lambda context, builder, ty, v: context.cast(builder, v, ty, types.uint64))

    @intrinsic
    def cp_async_16(typingctx, dst, src, nbytes, policy):
        """16 bytes from global ``src`` (64-bit, 16-aligned) to shared ``dst`` (32-bit,
        16-aligned) by the load path every thread has (``cp.async.cg``: through L2 only, no
        register), the first ``nbytes`` (16 or 0) read and the rest zeros; L2 told the
        lines' cache ``policy`` (:func:`l2_evict_first`) and to fetch 256 bytes around them.
        Asynchronous: :func:`cp_async_arrive_noinc` hands its completion to an mbarrier."""
        def codegen(context, builder, signature, args):
            d = _u32(context, builder, signature.args[0], args[0])
            a = context.cast(builder, args[1], signature.args[1], types.uint64)
            n = _u32(context, builder, signature.args[2], args[2])
            pol = context.cast(builder, args[3], signature.args[3], types.uint64)
            _asm(builder, "cp.async.cg.shared.global.L2::cache_hint.L2::256B "
                          "[$0], [$1], 16, $2, $3;", "r,l,r,l,~{memory}", (d, a, n, pol))
            return context.get_dummy_value()

        return types.void(dst, src, nbytes, policy), codegen

    @intrinsic
    def cp_async_arrive_noinc(typingctx, bar):
        """The mbarrier ``bar`` gets one arrival of this thread once every ``cp.async`` it
        issued before has landed (``.noinc``: the arrival is one of the count it was set up
        with)."""
        def codegen(context, builder, signature, args):
            b = _u32(context, builder, signature.args[0], args[0])
            _asm(builder, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];",
                 "r,~{memory}", (b,))
            return context.get_dummy_value()

        return types.void(bar), codegen

    def make_cp_async_box(threads: int = 32, rows: int = 64):
        """``box(dst, src, ld, r0, c0, nr, nc, t, policy)``: what :func:`tma_load_2d` of a
        128B-swizzled box of ``rows`` rows of 64 halves leaves in shared memory, copied by
        ``threads`` threads' :func:`cp_async_16` (this one is thread ``t`` of them, 16 bytes
        of a row each, consecutive threads along the row: a warp asks for four whole 128-byte
        rows at once): rows ``r0..`` from column ``c0`` of the row-major 16-bit matrix at the
        global address ``src``, ``ld`` halves a row; rows at or past ``nr`` and columns at or
        past ``nc`` arrive as zeros, as TMA's would. ``dst`` 1024-aligned; the caller hands
        completion to an mbarrier (:func:`cp_async_arrive_noinc`)."""
        if threads % 8 or (rows * 8) % threads:
            raise ValueError(f"threads must be a multiple of 8 dividing {rows * 8}")
        CH, STEP = rows * 8 // threads, threads >> 3

        @cuda.jit(device=True, inline="always")
        def box(dst, src, ld, r0, c0, nr, nc, t, policy):
            col = t & 7
            c = c0 + (col << 3)
            for i in range(CH):
                row = (t >> 3) + STEP * i
                r = r0 + row
                ok = r < nr and c < nc
                off = (r * ld + c) * 2 if ok else 0
                # the 128B swizzle: a row's 16-byte chunk index XOR the row's place among 8
                cp_async_16(dst + (row << 7) + ((col ^ (row & 7)) << 4), src + uint64(off),
                            16 if ok else 0, policy)

        return box

    @intrinsic
    def tma_prefetch_2d(typingctx, tmap, c0, c1):
        """Ask for the box at column c0, row c1 of the tensor map ``tmap`` to be brought
        into L2, nothing written to shared memory and nothing to wait for: more bytes on their
        way from HBM than the shared memory of a ring can hold."""
        def codegen(context, builder, signature, args):
            m = context.cast(builder, args[0], signature.args[0], types.uint64)
            x = _u32(context, builder, signature.args[1], args[1])
            y = _u32(context, builder, signature.args[2], args[2])
            _asm(builder, "cp.async.bulk.prefetch.tensor.2d.L2.global.tile [$0, {$1, $2}];",
                 "l,r,r,~{memory}", (m, x, y))
            return context.get_dummy_value()

        return types.void(tmap, c0, c1), codegen

    @intrinsic
    def bulk_load(typingctx, dst, src, nbytes, bar):
        """dst: 32-bit shared address (16-aligned); src: 64-bit global address (16-aligned);
        ``nbytes`` (a multiple of 16) contiguous bytes copied by the TMA unit, no tensor map,
        reported to the mbarrier ``bar`` as they land."""
        def codegen(context, builder, signature, args):
            d = _u32(context, builder, signature.args[0], args[0])
            a = context.cast(builder, args[1], signature.args[1], types.uint64)
            n = _u32(context, builder, signature.args[2], args[2])
            b = _u32(context, builder, signature.args[3], args[3])
            _asm(builder, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                          "[$0], [$1], $2, [$3];", "r,l,r,r,~{memory}", (d, a, n, b))
            return context.get_dummy_value()

        return types.void(dst, src, nbytes, bar), codegen

    #: tma_load_2d_multicast(dst, tmap, c0, c1, bar, mask): as :func:`tma_load_2d`, but the
    #: box lands at the same shared address, and its bytes are reported to the mbarrier at
    #: the same address, in every CTA of the cluster whose bit is set in ``mask``: one read
    #: of L2 feeds several SMs
    tma_load_2d_multicast = _box_load_and(
        ".multicast::cluster", "h",
        lambda context, builder, ty, v: builder.trunc(_u32(context, builder, ty, v),
                                                      ir.IntType(16)))

    @intrinsic
    def tma_store_2d(typingctx, tmap, c0, c1, src):
        """The box at column c0, row c1 of the tensor described by ``tmap`` <- the shared
        tile at ``src`` (32-bit shared address, laid out and swizzled as a load would leave
        it). Parts of the box outside the tensor are not written. Asynchronous: it joins
        the thread's bulk group (``bulk_commit``, ``bulk_wait_read``, ``bulk_wait``)."""
        def codegen(context, builder, signature, args):
            m = context.cast(builder, args[0], signature.args[0], types.uint64)
            x = _u32(context, builder, signature.args[1], args[1])
            y = _u32(context, builder, signature.args[2], args[2])
            src_ = _u32(context, builder, signature.args[3], args[3])
            _asm(builder, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group "
                          "[$0, {$1, $2}], [$3];", "l,r,r,r,~{memory}", (m, x, y, src_))
            return context.get_dummy_value()

        return types.void(tmap, c0, c1, src), codegen

    bulk_commit = _no_operand("cp.async.bulk.commit_group;")

    def _bulk_wait(read):
        @intrinsic
        def bulk_wait(typingctx, n):
            groups = _literal(n, "bulk_wait(n): n")
            text = f"cp.async.bulk.wait_group{'.read' if read else ''} {groups};"

            def codegen(context, builder, signature, args):
                _asm(builder, text, "~{memory}")
                return context.get_dummy_value()

            return types.void(n), codegen

        return bulk_wait

    bulk_wait_read = _bulk_wait(True)  # its stores have read their shared memory
    bulk_wait = _bulk_wait(False)  # its stores are complete

    def _st_shared_pair(bf16):
        @intrinsic
        def st_shared(typingctx, addr, lo, hi):
            """Round two float32 to 16 bits and store them as one word at a 32-bit shared
            address (lo at the lower address)."""
            def codegen(context, builder, signature, args):
                a = _u32(context, builder, signature.args[0], args[0])
                flo = context.cast(builder, args[1], signature.args[1], types.float32)
                fhi = context.cast(builder, args[2], signature.args[2], types.float32)
                cvt = "cvt.rn.bf16x2.f32" if bf16 else "cvt.rn.f16x2.f32"
                _asm(builder, f"{{ .reg .b32 w; {cvt} w, $2, $1; st.shared.b32 [$0], w; }}",
                     "r,f,f,~{memory}", (a, flo, fhi))
                return context.get_dummy_value()

            return types.void(addr, lo, hi), codegen

        return st_shared

    st_shared_bf16x2 = _st_shared_pair(True)
    st_shared_f16x2 = _st_shared_pair(False)

    @intrinsic
    def tma_prefetch(typingctx, tmap):
        def codegen(context, builder, signature, args):
            m = context.cast(builder, args[0], signature.args[0], types.uint64)
            _asm(builder, "prefetch.tensormap [$0];", "l,~{memory}", (m,))
            return context.get_dummy_value()

        return types.void(tmap), codegen

    # -- wgmma

    # k per instruction and the transpose arguments: 8-bit operands have none (K-major only)
    _PTX_TYPE = {"bf16": (16, ", 0, 0"), "f16": (16, ", 0, 0"), "e4m3": (32, ""),
                 "e5m2": (32, "")}

    def make_wgmma(n: int, kind: str = "bf16"):
        """``wgmma(acc, desc_a, desc_b, accumulate)``: one m64nNk16 (m64nNk32 for the
        eight-bit kinds e4m3, e5m2: :mod:`book.kernels.fp8`) with float32 accumulators,
        both operands K-major from shared memory. ``acc``: a local array of at least N/2
        float32, updated in place; ``accumulate`` 0 ignores its old values (the first k
        step of a tile: no zeroing needed)."""
        if n not in WGMMA_N or kind not in _PTX_TYPE:
            raise ValueError(f"wgmma: N must be one of {WGMMA_N} and kind one of "
                             f"{sorted(_PTX_TYPE)}, got {n}, {kind!r}")
        nreg = n // 2
        k, trans = _PTX_TYPE[kind]
        regs = ",".join(f"${r}" for r in range(nreg))
        text = ("{ .reg .pred p; setp.ne.b32 p, $%d, 0; "
                "wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {%s}, $%d, $%d, p, 1, 1%s; }"
                % (nreg + 2, n, k, kind, kind, regs, nreg, nreg + 1, trans))
        # outputs, then the two descriptors and the predicate, then the old accumulators
        # tied to the outputs ("0", "1", ...): ptxas then sees them as one register each,
        # and no move between two wgmma makes it insert a wait (warning C7517)
        cons = ",".join(["=f"] * nreg + ["l", "l", "r"] + [str(k) for k in range(nreg)])

        @intrinsic
        def wgmma(typingctx, acc, da, db, accumulate):
            if not (isinstance(acc, types.Array) and acc.dtype == types.float32):
                raise TypingError(f"wgmma: acc must be a float32 local array, got {acc}")

            def codegen(context, builder, signature, args):
                aty = signature.args[0]
                arr = context.make_array(aty)(context, builder, value=args[0])
                base = builder.bitcast(arr.data, _f32.as_pointer())
                ptrs = [builder.gep(base, [_i32(k)]) for k in range(nreg)]
                old = [builder.load(p) for p in ptrs]
                a = context.cast(builder, args[1], signature.args[1], types.uint64)
                b = context.cast(builder, args[2], signature.args[2], types.uint64)
                s = _u32(context, builder, signature.args[3], args[3])
                res = _asm(builder, text, cons, [a, b, s] + old,
                           ret=ir.LiteralStructType([_f32] * nreg))
                for k in range(nreg):
                    builder.store(builder.extract_value(res, k), ptrs[k])
                return context.get_dummy_value()

            return types.void(acc, da, db, accumulate), codegen

        return wgmma
