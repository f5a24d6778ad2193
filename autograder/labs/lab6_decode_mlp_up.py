"""Lab 6: the decode MLP-up, a fused split-K GEMV toward the bandwidth ceiling, in float16.

At decode a model runs its MLP-up on a handful of tokens (T = 1 .. 16: one per sequence of a
small batch) and the weights are the work: ``2 h d`` halves read once for about ``4 T h d``
flops. The student writes lab 4's layer, ``silu(x @ wg.T + bg) * (x @ wu.T + bu)`` (nn.Linear
weights ``[h, d]``, biases ``[h]``), for that regime on CUDA cores (so it runs on Colab's T4):
one GEMV with 16-byte weight loads and a block reduction; the k-range split over several
blocks with the partial sums met in the kernel (the last block to arrive adds them); then
both weights and the fused epilogue. Graded in GB/s of the weight bytes against the lab's
master timed beside the submission (:func:`weight_bytes`: the bytes a call must read).

The problem (inputs, float64 truth, words) is linear_layer's, as labs 4 and 5 have it; the
steps compute one projection ``x @ w.T`` into float32, as lab 5's do.
"""

from __future__ import annotations

from functools import partial

from . import linear_layer as layer
from .linear_layer import INPUTS, OUTPUT
from .spec import KernelLab, LabPath, PlantedBug

DTYPE = "float16"
# Tolerances as lab 5's: float16 inputs widened exactly, float32 accumulation (order-dependent,
# ~1e-5 of the result here), one float16 rounding on the store (2**-11 of |out|); rtol 4e-3 is
# eight such roundings, atol 1e-3 covers outputs near zero. A partial sum lost or counted
# twice moves whole dot products: errors of order 1.
RTOL, ATOL = 4e-3, 1e-3
STEP_RTOL, STEP_ATOL = 1e-3, 1e-3  # the steps store float32: only the accumulation's error
T_MAX = 16  # the lab's tokens: decode, a batch of up to 16 sequences
PIECE = 8   # d is a multiple of 8: a row is read 16 bytes (8 halves) at a time


# The largest block the lab allows: one column of out (one row j of both weights: the
# notebook's THREADS threads share it) for every token. A store past the end: up to T_MAX rows
# of out (a dropped token test), or a whole row of the weights.
GUARD_TILE = (T_MAX, 4096)


# The master's launch, as the lab's paths read it: a 1-D grid of h * splits blocks of THREADS
# threads (64 in the simulator, 128 on a GPU); splits from the SM count (1 in the simulator)
def sim_blocks(case):
    """Blocks of the master's 1-D grid in the simulator (h * splits; splits 2 where a row has
    at least two blocks' worth of pieces and h alone gives the one simulated SM too few)."""
    pieces = case["d"] // PIECE
    splits = max(1, min(-(-4 // case["h"]), pieces // 64))
    return (case["h"] * splits,)


def _blocks(launches) -> int:
    g = launches[-1]["grid"]
    return int(g[0]) * int(g[1]) * int(g[2])


def _share(case, launches) -> int:
    """The 16-byte pieces of one row one block of the last launch reads (its share of d)."""
    per_row = max(1, _blocks(launches) // case["h"])
    return -(-(case["d"] // PIECE) // per_row)


def _threads(launches) -> int:
    b = launches[-1]["block"]
    return int(b[0]) * int(b[1]) * int(b[2])


PATHS = (
    LabPath("split-K", "d split over several blocks per row, the partial sums met in the "
            "kernel by the last block to arrive",
            lambda c, L: _blocks(L) > c["h"]),
    LabPath("one block per row", "a row's whole dot products in one block, no meeting",
            lambda c, L: _blocks(L) == c["h"]),
    LabPath("several pieces per thread", "a block's share of the row longer than its "
            "threads: each thread loops over several 16-byte pieces",
            lambda c, L: _share(c, L) > _threads(L)),
    LabPath("a ragged share", "a share that is not a whole number of pieces per thread: some "
            "threads take one piece fewer",
            lambda c, L: _share(c, L) % _threads(L) != 0),
    LabPath("several warps per row", "more than one warp holds a piece of the row: the "
            "warps' sums meet in shared memory", lambda c, L: _share(c, L) > 32),
    LabPath("T = 1", "one token", lambda c, L: c["T"] == 1),
    LabPath("T > 1", "several tokens: every weight read used for each",
            lambda c, L: c["T"] > 1),
)


def hidden_cases(rng, simulated: bool, n: int = 3):
    """T in 1..16, d a multiple of 8, h anything. On a GPU one case has too few rows to fill
    the GPU without splitting d (h = 40: a few dozen blocks). In the simulator every path of
    PATHS is taken by the master whatever the seed: the first and third cases have 2 or 3 rows
    and more than 128 pieces a row, so the master (one simulated SM) splits d in two, each
    block a ragged share of several pieces per thread (a race between the blocks of a row, a
    counter left non-zero for the next call, a loop over pieces: all graded on Gradescope);
    the second has one block per row."""
    if simulated:  # a few blocks of 64 threads: seconds each in the simulator
        split = lambda T: (T, PIECE * int(rng.integers(130, 200)), int(rng.integers(2, 4)))  # noqa: E731
        shapes = [split(1),
                  (int(rng.integers(2, T_MAX + 1)), PIECE * int(rng.integers(1, 17)),
                   int(rng.integers(4, 13))),
                  split(int(rng.integers(2, 7)))][:n]
        while len(shapes) < n:
            shapes.append((int(rng.integers(1, T_MAX + 1)), PIECE * int(rng.integers(1, 17)),
                           int(rng.integers(2, 13))))
    else:
        shapes = [(1, 4096, 2048 + int(rng.integers(1, 64))),
                  (int(rng.integers(2, T_MAX + 1)), PIECE * int(rng.integers(256, 1024)),
                   int(rng.integers(20, 60))),
                  (T_MAX, 2048, 3000 + int(rng.integers(0, 100)))][:n]
        while len(shapes) < n:
            shapes.append((int(rng.integers(1, T_MAX + 1)), PIECE * int(rng.integers(1, 600)),
                           int(rng.integers(1, 5000))))
    return [{"name": f"hidden {i + 1}", "T": T, "d": d, "h": h, "seed": int(rng.integers(1 << 30))}
            for i, (T, d, h) in enumerate(shapes)]


def timing_case(simulated: bool, seed: int):
    # GPU: four tokens through Llama-3-8B's MLP-up, 235 MB of float16 weights (beyond any L2)
    T, d, h = (2, 32, 16) if simulated else (4, 4096, 14336)
    return {"name": "timing", "T": T, "d": d, "h": h, "seed": seed}


def weight_bytes(case):
    """The bytes of wg and wu, what a call must read at least: the lab's GB/s are of these
    (x, the biases and out add T d + 2 h + T h halves, under 0.1% at the timing shape)."""
    return 2 * 2 * case["h"] * case["d"]


def make_reference_runner(case):
    """cuBLAS float16 (one F.linear on [wg; wu] with the biases) plus torch.compile's SiLU * up.

    What a PyTorch user runs for this layer at decode: one GEMM of 2h outputs (cuBLAS picks a
    GEMV-like kernel at small T), then the activation compiled into one elementwise kernel."""
    import torch
    import torch.nn.functional as F

    T, d, h = case["T"], case["d"], case["h"]
    dev, dt = "cuda", torch.float16
    sets = [(torch.randn(T, d, device=dev, dtype=dt),
             torch.randn(2 * h, d, device=dev, dtype=dt) / d ** 0.5,
             torch.randn(2 * h, device=dev, dtype=dt), torch.empty(T, h, device=dev, dtype=dt))]
    act = torch.compile(lambda g, u: F.silu(g) * u)

    def run(x, w, b, out):
        y = F.linear(x, w, b)
        out.copy_(act(y[:, :h], y[:, h:]))
    return run, sets


# The steps compute one projection, out = x @ w.T (w [h, d]), into float32. Their shapes are
# off the block in d (a ragged last piece per thread) and h (a few rows), with T > 1, so a
# token loop or a reduction that drops a thread's share shows.
def _step(name, function, teaches, shapes, seed, bug, params=("x", "w", "out"), **extra):
    return layer.projection_step(name, function, teaches, shapes, seed, bug, dtype=DTYPE,
                                 rtol=STEP_RTOL, atol=STEP_ATOL, extra=extra, params=params)


STEPS = (
    # step 1's planted bug: the block's sum keeps only warp 0's share (a reduction that stops
    # at the warp); step 2's: every block stores its own partial sum, no reduction (the last
    # writer wins)
    _step("gemv", "gemv_block", "one block per output row: 16-byte loads of the weight row, "
          "every token's dot product, the block's partial sums reduced in shared memory",
          [(3, 72, 5), (1, 520, 3)], 61,
          PlantedBug("for q in range(1, NWARPS):", "for q in range(1, 1):",
                     r"first bad index .*expected .*got ")),
    _step("splitk", "gemv_splitk", "d split over `splits` blocks per row, the partial sums met "
          "in the kernel: the last block to arrive adds them",
          [(2, 264, 4), (5, 136, 2)], 63,
          PlantedBug("for q in range(splits):", "for q in range(s, s + 1):",
                     r"first bad index .*expected .*got "),
          params=("x", "w", "out", "splits"), splits=3),
)

LAB = KernelLab(
    name="lab6_decode_mlp_up",
    title="Lab 6: the decode MLP-up, a fused split-K GEMV toward the bandwidth ceiling, in float16",
    chapters="chapters 6, 7 and 7b",
    asks=("lab 4's layer at **decode** (T = 1..16, float16, CUDA cores: Colab's T4 runs it): a "
          "GEMV with 16-byte weight loads, d split over blocks with the partial sums met in the "
          "kernel by the last block to arrive, the fused epilogue, in three checked steps; "
          "graded in GB/s of the weight bytes; graded code may import `shfl_xor` from "
          "`book.kernels.tensorcore`"),
    function="decode_swiglu", params=INPUTS + (OUTPUT,), inputs=INPUTS, output=OUTPUT,
    dtype=DTYPE, rtol=RTOL, atol=ATOL, perf_metric="bandwidth",
    public_cases=({"name": "public T=4 d=64 h=12", "T": 4, "d": 64, "h": 12, "seed": 9},
                  {"name": "public T=1 d=136 h=7", "T": 1, "d": 136, "h": 7, "seed": 10},
                  {"name": "public T=5 d=2056 h=3", "T": 5, "d": 2056, "h": 3, "seed": 11}),
    hidden_cases=hidden_cases, input_specs=partial(layer.input_specs, dtype=DTYPE),
    out_spec=partial(layer.out_spec, dtype=DTYPE), reference=layer.reference,
    describe=partial(layer.describe, dtype=DTYPE), timing_case=timing_case,
    min_bytes=weight_bytes, flops=layer.flops,
    make_reference_runner=make_reference_runner,
    reference_name="cuBLAS float16 + compiled SwiGLU", steps=STEPS,
    guard_tile=GUARD_TILE, sim_blocks=sim_blocks, paths=PATHS,
    untraced=("the access-pattern advice does not model the 16-byte loads this lab asks for "
              "(simulated element by element) or the warps' split of a row; races on the "
              "arrival counter and the partials, races on shared memory and reads past `x` are "
              "checked in every test above in the simulator; on a GPU, "
              "check(decode_swiglu, sanitize=True) runs compute-sanitizer"))
