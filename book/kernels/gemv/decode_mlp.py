"""The MLP-up at decode: ``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)`` for a few tokens, the
path chosen by T.

Weights in nn.Linear's layout: ``wg``, ``wu`` are ``[h, d]`` (out_features by in_features),
``x`` is ``[T, d]``, the biases ``[h]`` (optional, both or neither), ``out`` is ``[T, h]``;
bfloat16 (torch bfloat16, or its bits as uint16/int16) or float16, float32 accumulation.

At decode T is small (one token per sequence in the batch) and the weights are the work:
``2 h d`` halves, 235 MB at d = 4096, h = 14336, read once for about ``4 T h d`` flops. The
kernels are GEMVs whose job is to keep HBM busy; which one is best depends on T
(:func:`path_for`, :func:`swiglu_decode`); each lives in a module of its own, with its tile
(:mod:`book.kernels.tile`) and its default tile for T tokens (``gemv_tile``):

- ``T <= CUDA_CORE_MAX_T``: :mod:`book.kernels.cuda_core_gemv` (:func:`swiglu_gemv`), CUDA
  cores, 16 bytes of a weight row a thread at a time; measured on the H100 the tensor cores
  are faster from 8 tokens (records/bench/decode_tune_h100.json).
- ``T <= TENSOR_CORE_MAX_T``: :mod:`book.kernels.mma_gemv` (:func:`swiglu_gemv_tc`), tensor
  cores (``mma.sync``) with the roles swapped: the weights on M, the tokens on N.
- on sm_90, from ``HOPPER_GEMV_MIN_T`` tokens up to ``HOPPER_GEMV_MAX_T`` (with biases up to
  64): :mod:`book.kernels.wgmma_gemv`, the weights as ``wgmma``'s A operand, copied by TMA
  into an mbarrier ring, the k-loop shared evenly by every SM (stream-K): a ring holds many
  more weight bytes in flight than registers do (``prepare("hopper_gemv", ...)``).
- on sm_90 with no biases, from ``HOPPER_MIN_T`` tokens: the Hopper dual GEMM
  (:func:`book.kernels.wgmma_gemm.swiglu_wgmma`: the same nn.Linear weights, any T; its
  128-row tile reads each weight once whatever T, where the GEMV reads them again per group
  of tokens); beyond ``TENSOR_CORE_MAX_T`` elsewhere the tensor-core GEMV (correct for any T,
  in token groups of 64 that each read the weights again, from L2 where it can).
  :func:`register_large_t` puts any other kernel there (e.g.
  :func:`book.kernels.mma_gemm.swiglu_mma` where the weights are also kept ``[d, h]``).

Measured and not picked (each slower than the defaults on the H100, records/bench/README.md):
:mod:`book.kernels.staged_gemv` (``prepare("staged", ...)``), the tensor-core GEMV with its
weights copied through shared memory in whole-row chunks, the way the T = 1 CUDA-core GEMV
reads them; register caps on both GEMVs (a tile's ``min_blocks``); other warps a block for
the tensor-core GEMV; and the CUDA-core GEMV loading its next piece ahead
(``GemvTile.prefetch``).

Shapes: any T and h, d a multiple of 8 (16-byte rows: a piece of 8 halves is all inside a
row), x and the weights 16-byte aligned; the wrappers refuse others, saying why.

The host side: :func:`prepare` validates once and returns the launch (kernel, grid, block,
arguments). A wrapper called plainly (no ``stream``, no ``tile`` or ``split``) goes through
:class:`book.kernels.plan.PlannedCall` (``plan.planned("decode")``): with torch CUDA
tensors and ``out`` given, the launch is made once per tensors and then replayed with
``cuLaunchKernel`` on torch's current stream, so the plain call is the cheap one; anything
else (Numba arrays, no ``out``) is validated and launched through Numba on the default
stream, as a call with ``stream=`` always is.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ...capability import FAMILIES
from . import cuda_core_gemv, mma_gemv
from .cuda_core_gemv import PIECE
from ..host.launch import (KernelLaunch, address, as_device, device_name, flat, is_c_contiguous,
                     sm_count)
from ..gemms.mma_gemm import half_dtype, kind_for
from ..host.plan import planned, raw_stream
from ..gemms.splitk import device_key, splits, workspace
from ..instructions.tensorcore import target_cc

__all__ = ["CUDA_CORE_MAX_T", "TENSOR_CORE_MAX_T", "prepare",
           "swiglu_gemv", "swiglu_gemv_tc", "swiglu_decode", "path_for", "register_large_t",
           "HOPPER_MIN_T", "HOPPER_GEMV_MIN_T", "HOPPER_GEMV_MAX_T", "weight_bytes", "flops",
           "DecodeLaunch", "CallLaunch", "prepare_decode", "check_inputs", "hopper_dual_gemm",
           "prepare_hopper"]

#: the most tokens the CUDA-core GEMV takes (:func:`path_for`): its 8 T FMAs per 16-byte
#: chunk stay well under the chunk's HBM time up to here
#: (:func:`book.kernels.cuda_core_gemv.cuda_core_fma_time`), and its
#: accumulators in registers (module doc); ``benchmarks/decode_bench.py --tune-out`` times
#: both paths at T = 1, 2, 4, 8 to say which is faster there
CUDA_CORE_MAX_T = 4
#: the most tokens the tensor-core GEMV takes before the large-T hook
TENSOR_CORE_MAX_T = 256
#: on sm_90 the Hopper GEMV (:mod:`book.kernels.wgmma_gemv`) takes T from
#: ``HOPPER_GEMV_MIN_T`` to here (biases or not; with biases up to its most, 64): measured on
#: the H100 in one run against the wgmma dual GEMM at its default tile (the L2 hints),
#: faster at 8, 16, 24 and 32 tokens (84.8 against 89.2 us at 32), slower at 48 and 64 (90.7 /
#: 94.4 against 87.6 / 87.1; records/bench/decode_tune_hopper_switch_h100.json; before the
#: hints it won only to 24, decode_tune_hopper_switch_5814862_h100.json); faster than the
#: mma.sync GEMV at every T it takes (decode_tune_hopper_gemv_h100.json)
HOPPER_GEMV_MAX_T = 32
#: on sm_90 the Hopper GEMV takes over from the CUDA-core GEMV at this many tokens. On the
#: H100 the two tie at 1 and 2 (77.8 / 78.4 against 78.8 / 79.0 us, book/data/h100.json's
#: sweep at c6bec7a) and the wgmma GEMV wins from 3 (the CUDA-core GEMV is compiled for 4
#: tokens from 3); on the H200 the CUDA-core GEMV falls behind at 2 (60.4 against 54.6 us,
#: behind cuBLAS + compile's 58.5) and ties at 1 (54.9 against 55.0;
#: records/bench/decode_sweep_h200_c966969.json): from 2 costs the H100 under 1% at T = 2
#: and gains the H200 a tenth
HOPPER_GEMV_MIN_T = 2
#: on sm_90 (no biases) the wgmma dual GEMM takes T from here: its 128-row tile reads each
#: weight once whatever T, where the tensor-core GEMV re-reads them per group of 64 tokens
HOPPER_MIN_T = HOPPER_GEMV_MAX_T + 1
#: blocks per SM a launch aims for (split-K adds blocks until the grid reaches it)
BLOCKS_PER_SM = 4


def weight_bytes(d: int, h: int, itemsize: int = 2) -> int:
    """The bytes of wg and wu: what a decode-size call must read at least."""
    return 2 * h * d * itemsize


def flops(T: int, d: int, h: int) -> int:
    """Two GEMVs of T x d x h (a multiply and an add each); the activation not counted."""
    return 4 * T * d * h


# ---------------------------------------------------------------------------------------
# host side


class DecodeLaunch(KernelLaunch):
    """One validated launch of a decode GEMV (:class:`book.kernels.launch.KernelLaunch`),
    with what it is: ``path`` ("cuda_cores" or "tensor_cores"), ``splits`` (blocks per
    tile: the split-K) and ``tile``; ``dependent``: a programmatic dependent launch (the
    Hopper GEMV's tile with ``pdl``)."""

    __slots__ = ("path", "splits", "tile")

    def __init__(self, kernel, grid, block, args, result, path, splits, tile, shared=0,
                 dependent=False):
        super().__init__(kernel, grid, block, args, result, shared, dependent=dependent)
        self.path, self.splits, self.tile = path, splits, tile


class CallLaunch:
    """A decode call that is not one kernel launch (the large-T hook, token groups on a GPU
    without tensor cores): ``launch(stream)`` calls ``fn``; ``grid`` 0 tells
    :class:`book.kernels.plan.PlannedCall` there is nothing to plan."""

    __slots__ = ("fn", "args", "result", "path")
    grid = 0

    def __init__(self, fn, args, result, path):
        self.fn, self.args, self.result, self.path = fn, args, result, path

    def launch(self, stream=0):
        return self.fn(*self.args, stream)


def _matrix(a, name, ndim):
    d = as_device(a, name)
    if d.ndim != ndim:
        want = "a 2-D matrix" if ndim == 2 else "a 1-D vector"
        raise ValueError(f"{name} must be {want}, got shape {tuple(d.shape)}")
    if half_dtype(d) is None:
        raise TypeError(f"{name} must be bfloat16 (a torch bfloat16 tensor, or its bits as "
                        f"uint16) or float16, got {d.dtype}")
    if d.size and not is_c_contiguous(d):
        raise ValueError(f"{name} is not contiguous (strides {d.strides}): pass .contiguous()")
    return d


def _device_cc():
    """The capability the paths are picked for: the GPU's (None in the simulator), or what the
    T4 switch names (``COURSE_TARGET_CC``, book/target.py)."""
    return target_cc()


def check_inputs(x, wg, wu, bg, bu):
    """Shapes, dtypes, layout and alignment, or a clear error; ``(xd, wgd, wud, bgd, bud,
    T, d, h, dtype)`` as device arrays (the biases None when absent)."""
    xd = _matrix(x, "x", 2)
    wgd, wud = _matrix(wg, "wg", 2), _matrix(wu, "wu", 2)
    T, d = xd.shape
    h = wgd.shape[0]
    for name, w in (("wg", wgd), ("wu", wud)):
        if tuple(w.shape) != (h, d):
            raise ValueError(f"{name} is {tuple(w.shape)}; expected [h, d] = [{h}, {d}] "
                             f"(nn.Linear's weight layout, out_features x in_features; x is "
                             f"{tuple(xd.shape)})")
    if (bg is None) != (bu is None):
        raise ValueError("pass both biases (bg and bu) or neither")
    bgd = bud = None
    if bg is not None:
        bgd, bud = _matrix(bg, "bg", 1), _matrix(bu, "bu", 1)
        for name, b in (("bg", bgd), ("bu", bud)):
            if tuple(b.shape) != (h,):
                raise ValueError(f"{name} has shape {tuple(b.shape)}; expected [h] = [{h}]")
    arrays = [xd, wgd, wud] + ([bgd, bud] if bgd is not None else [])
    kinds = {half_dtype(a) for a in arrays}
    if len(kinds) > 1:
        raise TypeError(f"x, the weights and the biases must share one dtype, got {sorted(kinds)}")
    if d % PIECE or d == 0:
        raise ValueError(f"d (columns of x) = {d}: the GEMVs read rows 16 bytes (8 halves) at "
                         "a time, so d must be a positive multiple of 8; pad x and the weights "
                         "with zero columns (they add nothing)")
    for name, a in (("x", xd), ("wg", wgd), ("wu", wud)):
        p = address(a)
        if p % 16:
            raise ValueError(f"{name} starts at address {p:#x}, not a multiple of 16 bytes: "
                             "the GEMVs read 16 bytes at a time (a fresh allocation is aligned; "
                             "a slice that starts mid-row is not)")
    return xd, wgd, wud, bgd, bud, T, d, h, kinds.pop()


def _output(out, x, T, h, dtype):
    if out is None:
        if type(x).__module__.startswith("torch"):
            import torch

            res = torch.empty((T, h), dtype=getattr(torch, dtype), device=x.device)
        else:
            res = cuda.device_array((T, h), dtype=np.uint16 if dtype == "bfloat16" else np.float16)
        return res, as_device(res, "out")
    o = _matrix(out, "out", 2)
    if half_dtype(o) != dtype:
        raise TypeError(f"out must be {dtype} like x, got {o.dtype}")
    if tuple(o.shape) != (T, h):
        raise ValueError(f"out must have shape [T, h] = [{T}, {h}], got {tuple(o.shape)}")
    return out, o


def _want_blocks():
    return BLOCKS_PER_SM * sm_count()


def prepare(path, x, wg, wu, bg=None, bu=None, out=None, *, tile=None, split=None,
            stream_key=0) -> DecodeLaunch:
    """Validate and build one launch of ``path`` ("cuda_cores", "tensor_cores", or "staged":
    :mod:`book.kernels.staged_gemv`, a control); ``tile`` and ``split`` override the defaults
    (each path's ``gemv_tile``, :func:`book.kernels.splitk.splits`);
    ``stream_key`` picks the split-K workspace."""
    xd, wgd, wud, bgd, bud, T, d, h, dtype = check_inputs(x, wg, wu, bg, bu)
    res, o = _output(out, x, T, h, dtype)
    bias = bgd is not None
    names = ("x", "wg", "wu", "out")
    fx, fwg, fwu, fo = (flat(a, n) for a, n in zip((xd, wgd, wud, o), names))
    fbg, fbu = (flat(bgd, "bg"), flat(bud, "bu")) if bias else (fx, fx)  # unread when no bias
    dyn = 0  # dynamic shared memory (the staged GEMV's cp.async ring)
    if path == "cuda_cores":
        tile = (tile or cuda_core_gemv.gemv_tile(T, d)).validate()
        if T > tile.tokens:
            raise ValueError(f"the CUDA-core GEMV of {tile} takes at most {tile.tokens} tokens, "
                             f"got T = {T}")
        kern = cuda_core_gemv.make_gemv(tile, bias)
        tiles = -(-h // tile.rows)
        pieces = max(1, (d // PIECE) // tile.threads)
        S = split or splits(tiles, pieces, _want_blocks())
        part_floats, block = tiles * S * tile.values, tile.threads
    elif path == "tensor_cores":
        kind = kind_for(dtype, _device_cc())
        tile = (tile or mma_gemv.gemv_tile(T)).validate()
        kern = mma_gemv.make_mma_gemv(tile, bias, kind)
        tiles = -(-h // tile.rows) * -(-T // tile.tokens)
        pieces = max(1, -(-d // 32) // (tile.warps * tile.unroll))
        S = split or splits(tiles, pieces, _want_blocks())
        part_floats, block = tiles * S * tile.values * 32, 32 * tile.warps
    elif path == "staged":
        from .staged_gemv import gemv_tile as staged_tile, make_staged_gemv

        kind = kind_for(dtype, _device_cc())
        tile = (tile or staged_tile(T)).validate()
        kern = make_staged_gemv(tile, bias, kind)
        tiles = -(-h // tile.rows) * -(-T // tile.tokens)
        S = split or splits(tiles, -(-d // tile.chunk), _want_blocks())
        part_floats, block = tiles * S * tile.values * 32, tile.threads
        dyn = tile.dynamic_bytes
    elif path == "hopper_gemv":
        return _prepare_hopper_gemv(xd, wgd, wud, fbg, fbu, fo, res, T, d, h, dtype, bias,
                                    tile, stream_key)
    else:
        raise ValueError("path must be 'cuda_cores', 'tensor_cores', 'hopper_gemv' or 'staged', "
                         f"got {path!r}")
    if S < 1:
        raise ValueError(f"split must be at least 1, got {S}")
    if S > 1:
        ws = workspace(path, stream_key, part_floats, tiles)
        part, count = ws.part, ws.count
    else:  # no partials to meet: placeholders of the right types, never touched
        part, count = _placeholders()
    grid = tiles * S if T and h else 0
    args = (fx, fwg, fwu, fbg, fbu, fo, part, count, T, d, h, S)
    return DecodeLaunch(kern, grid, block, args, res, path, S, tile, dyn)


_STREAM_K = {}  # (GPU, row tiles, k-blocks, blocks, dynamic) -> (the Hopper GEMV's device
# table, its ranges: one a block, or dynamic more)


def _prepare_hopper_gemv(xd, wgd, wud, fbg, fbu, fo, res, T, d, h, dtype, bias, tile,
                         stream_key):
    """The launch of :mod:`book.kernels.wgmma_gemv` (sm_90a): its tensor maps, its stream-K
    table (one per shape and grid, cached) and the seams' workspace; a dependent launch where
    the tile says ``pdl`` (the default tile does)."""
    from ..instructions.hopper import check_capability
    from ..gemms.wgmma_gemm import tensor_maps
    from ..gemms.stream_k import guided, stream_k
    from .wgmma_gemv import (BK, BM, TRACE_EVENTS, gemv_tile as hopper_gemv_tile,
                             make_wgmma_gemv)

    check_capability(_device_cc())
    # (the default tile refuses T beyond the kernel's most, a tile given refuses T beyond its N)
    # (the default tile's L2 promotion is the GPU's own: wgmma_gemv_tile.PROMOTION)
    tile = (tile or hopper_gemv_tile(max(T, 1), d, device_name())).validate()
    if T > tile.n:
        raise ValueError(f"{tile} takes at most {tile.n} tokens (its wgmma's N), got T = {T}")
    if not tile.fits(d):
        raise ValueError(f"{tile} keeps x in shared memory: {tile.shared_for(d):,} bytes at d = "
                         f"{d} do not fit; use x_resident=False")
    kern = make_wgmma_gemv(tile, bias, "bf16" if dtype == "bfloat16" else "f16")
    mt, nk = -(-h // BM), -(-d // tile.stage_k)
    # a persistent grid, no block without iterations (stream_k)
    grid = min(sm_count() * tile.ctas_per_sm * tile.waves, mt * nk) if T and h else 0
    if not grid:  # nothing to compute: a launch that launches nothing
        return DecodeLaunch(kern, 0, 256, (), res, "hopper_gemv", 1, tile)
    dyn = (tile.dynamic, tile.pool) if tile.dynamic else None
    key = (device_key(), mt, nk, grid, dyn)  # a table lives on one GPU
    if key not in _STREAM_K:
        table = (guided(mt, nk, grid, tile.dynamic, tile.pool / 100) if dyn
                 else stream_k(mt, nk, grid))
        # (dynamic: the ranges' count heads the table, kept here too: no device read)
        _STREAM_K[key] = cuda.to_device(table), int(table[0]) if dyn else grid
    sk, ranges = _STREAM_K[key]
    # Every launch leaves every counter it touched at zero (the tiles' pieces, dynamic: the
    # two of ranges taken, after the tiles'), so launches of any shape share a stream's
    # workspace; a traced tile's timeline follows the counters (wgmma_gemv.timeline) and
    # stays there, so traced launches have a workspace of their own
    ws = workspace("hopper_gemv_trace" if tile.trace else "hopper_gemv", stream_key,
                   2 * ranges * 128 * tile.n,
                   mt + (len(TRACE_EVENTS) * grid if tile.trace else 0) + (2 if dyn else 0))
    maps = tensor_maps([wgd, wud, xd], [(BK, BM), (BK, BM), (BK, tile.n)], tile.promotion)
    if tile.cpasync:  # its cp.async read the weights by address: after the three maps
        from ..host.launch import address
        maps = cuda.to_device(np.concatenate([maps.copy_to_host(), np.array(
            [address(wgd), address(wud)], dtype=np.uint64)]))
    args = (maps, sk, fbg, fbu, fo, ws.part, ws.count, T, d, h)
    # (pdl: launched as a dependent of the kernel before it, through the driver; a plan
    # replays it so, and a CUDA graph captures it so)
    return DecodeLaunch(kern, grid, 256, args, res, "hopper_gemv", 1, tile, tile.shared_for(d),
                        dependent=tile.pdl)


@functools.lru_cache(maxsize=None)
def _placeholders():
    return (cuda.device_array(1, dtype=np.float32),
            cuda.to_device(np.zeros(1, dtype=np.int32)))


def swiglu_gemv(x, wg, wu, bg=None, bu=None, out=None, *, tile=None, split=None, stream=None):
    """The CUDA-core GEMV (T up to its tile's tokens, at most 8): out [T, h]. Called plainly,
    the planned call (module doc)."""
    if stream is None and tile is None and split is None:
        return planned("gemv")(x, wg, wu, bg, bu, out)
    stream = 0 if stream is None else stream
    return prepare("cuda_cores", x, wg, wu, bg, bu, out, tile=tile, split=split,
                   stream_key=raw_stream(stream)).launch(stream)


def swiglu_gemv_tc(x, wg, wu, bg=None, bu=None, out=None, *, tile=None, split=None,
                   stream=None):
    """The tensor-core GEMV, weights on the M side (any T; tuned for 16 < T <= 256). Called
    plainly, the planned call (module doc)."""
    if stream is None and tile is None and split is None:
        return planned("gemv_tc")(x, wg, wu, bg, bu, out)
    stream = 0 if stream is None else stream
    return prepare("tensor_cores", x, wg, wu, bg, bu, out, tile=tile, split=split,
                   stream_key=raw_stream(stream)).launch(stream)


_LARGE_T = {"fn": None, "min_T": TENSOR_CORE_MAX_T + 1}


def register_large_t(fn, min_T: int = TENSOR_CORE_MAX_T + 1):
    """The hook for T beyond the GEMVs: ``fn(x, wg, wu, bg, bu, out, stream)`` (the same
    arguments, nn.Linear weights; returns out) takes every call with ``T >= min_T``.
    ``register_large_t(None)`` removes it. Returns the previous ``fn``."""
    prev = _LARGE_T["fn"]
    _LARGE_T.update(fn=fn, min_T=int(min_T))
    return prev


def path_for(T: int, cc=None, bias: bool = False) -> str:
    """Which path :func:`swiglu_decode` takes for T tokens on a GPU of compute capability
    ``cc`` (None: the simulator), with or without biases: "cuda_cores", "tensor_cores",
    "hopper_gemv" (sm_90: the wgmma GEMV, :mod:`book.kernels.wgmma_gemv`, from
    ``HOPPER_GEMV_MIN_T`` to ``HOPPER_GEMV_MAX_T`` tokens), "hopper" (T beyond it on sm_90,
    no biases) or "large_t" (the registered hook).
    Below sm_75 there are no tensor cores: the CUDA-core GEMV takes every T (in groups)."""
    if _LARGE_T["fn"] is not None and T >= _LARGE_T["min_T"]:
        return "large_t"
    hopper = cc is not None and FAMILIES["wgmma"].has(cc)
    if cc is not None and not FAMILIES["mma_m16n8k8"].has(cc):
        return "cuda_cores"
    if T <= CUDA_CORE_MAX_T and not (hopper and T >= HOPPER_GEMV_MIN_T):
        return "cuda_cores"
    if hopper:
        from .wgmma_gemv import MAX_T as HOPPER_GEMV_MOST

        if T <= HOPPER_GEMV_MAX_T or (bias and T <= HOPPER_GEMV_MOST):
            return "hopper_gemv"
        if not bias:
            return "hopper"
    return "tensor_cores"


def prepare_hopper(x, wg, wu, out=None, *, stream_key=0):
    """The "hopper" path's launch: :func:`book.kernels.wgmma_gemm.prepare` of the dual GEMM
    (no biases) with the tile the dispatcher gives it (the planned decode call plans it as it
    plans a GEMV: one cache, one launch)."""
    from ..gemms.waves import dispatch_tile
    from ..gemms.wgmma_gemm import prepare as prepare_wgmma

    # the wave model's tile for T: without the cluster where row tiles are odd (one row
    # tile: a cluster of two would leave one CTA of each pair idle), a ColumnSplit where the
    # last round of the wide tile would run mostly empty (T = 512, 768 on 132 SMs)
    tile = dispatch_tile(x.shape[0], wg.shape[0])
    return prepare_wgmma("swiglu", x, wg, wu, out, tile=tile, stream_key=stream_key)


def hopper_dual_gemm(x, wg, wu, bg, bu, out, stream=0):
    """The "hopper" path as a call: :func:`book.kernels.wgmma_gemm.swiglu_wgmma` (no biases)
    at the dispatcher's tile, planned (:func:`book.kernels.plan.planned`) unless a stream is
    named."""
    from ..gemms.waves import dispatch_tile
    from ..gemms.wgmma_gemm import swiglu_wgmma

    tile = dispatch_tile(x.shape[0], wg.shape[0])
    return swiglu_wgmma(x, wg, wu, out, tile=tile, stream=stream or None)


def prepare_decode(x, wg, wu, bg=None, bu=None, out=None, *, stream_key=0):
    """The launch :func:`swiglu_decode` makes for these arguments: the path chosen by T
    (:func:`path_for`), a :class:`DecodeLaunch`, the Hopper dual GEMM's launch
    (:func:`prepare_hopper`), or a :class:`CallLaunch` for the large-T hook and for token
    groups on a GPU without tensor cores."""
    T = x.shape[0]
    path = path_for(T, _device_cc(), bg is not None or bu is not None)
    if path == "large_t":
        return CallLaunch(_LARGE_T["fn"], (x, wg, wu, bg, bu, out), out, path)
    if path == "hopper":
        return prepare_hopper(x, wg, wu, out, stream_key=stream_key)
    if path == "cuda_cores" and T > CUDA_CORE_MAX_T:  # no tensor cores: token groups
        return CallLaunch(_gemv_groups, (x, wg, wu, bg, bu, out), out, "cuda_cores")
    return prepare(path, x, wg, wu, bg, bu, out, stream_key=stream_key)


def swiglu_decode(x, wg, wu, bg=None, bu=None, out=None, *, stream=None):
    """``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)``, the path chosen by T (:func:`path_for`).
    Called plainly (no ``stream``), the planned call: torch CUDA tensors with ``out`` given
    are launched from a plan on torch's current stream (module doc)."""
    if stream is None:
        return planned("decode")(x, wg, wu, bg, bu, out)
    return prepare_decode(x, wg, wu, bg, bu, out, stream_key=raw_stream(stream)).launch(stream)


def _gemv_groups(x, wg, wu, bg, bu, out, stream):
    xd, _, _, _, _, T, d, h, dtype = check_inputs(x, wg, wu, bg, bu)
    res, o = _output(out, x, T, h, dtype)
    for t0 in range(0, T, CUDA_CORE_MAX_T):
        t1 = min(T, t0 + CUDA_CORE_MAX_T)
        swiglu_gemv(xd[t0:t1], wg, wu, bg, bu, o[t0:t1], stream=stream)
    return res
