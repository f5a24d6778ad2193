"""Bytes, transfers and flops of SwiGLU, counted the way the course counts them.

A *transfer* is one element loaded from or stored to GPU main memory (HBM).
Counts are the minimum traffic of each design: every operand read once, every
output written once, caches assumed to hold nothing across kernel launches.

The Vizuara article ("The SwiGLU kernel", `book.sources`) counts, for T tokens and h hidden units:
naive two-kernel SwiGLU 5Th transfers, fused 3Th (T=4, h=8: 160 and 96
transfers for 32 elements), and an epilogue-fused version that reads gate once
and writes the result once (2Th) because `up` is still in registers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import dtypes

__all__ = [
    "DTYPE_BYTES",
    "FLOPS_PER_ELEMENT",
    "Step",
    "Traffic",
    "itemsize",
    "dtype_name",
    "activation",
    "mlp_up",
    "gemm",
    "ACTIVATION_VARIANTS",
    "MLP_UP_VARIANTS",
]

#: Bytes per element: :data:`book.dtypes.ITEMSIZE` itself, under the name chapter 2's cells
#: read (the library reads it from book.dtypes).
DTYPE_BYTES = dtypes.ITEMSIZE

#: Flops counted for one output element of silu(g) * u = g * u / (1 + exp(-g)):
#: exp, add, reciprocal (the sigmoid), then two multiplies. The Vizuara article counts the
#: same "~5 flops" per element; the negation folds into the exp argument.
#: The course uses this one figure everywhere.
FLOPS_PER_ELEMENT = 5

ACTIVATION_VARIANTS = ("naive", "fused", "epilogue")
MLP_UP_VARIANTS = ("unfused", "epilogue")


class Step(NamedTuple):
    """One row of a teaching table: a kernel or phase and the elements it moves."""

    step: str
    reads: int  # elements loaded from memory
    writes: int  # elements stored to memory


@dataclass(frozen=True)
class Traffic:
    variant: str
    dtype: str
    itemsize: int
    transfers: int  # element loads + stores
    bytes: int
    flops: int
    breakdown: list[Step] = field(default_factory=list)
    shape: dict = field(default_factory=dict)

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in flop/byte."""
        return self.flops / self.bytes

    @property
    def reads(self) -> int:
        return sum(s.reads for s in self.breakdown)

    @property
    def writes(self) -> int:
        return sum(s.writes for s in self.breakdown)

    def table(self) -> list[dict]:
        """Breakdown rows with bytes, for a DataFrame or a Markdown table."""
        return [
            {"step": s.step, "reads": s.reads, "writes": s.writes,
             "transfers": s.reads + s.writes, "bytes": (s.reads + s.writes) * self.itemsize}
            for s in self.breakdown
        ]


def dtype_name(dtype) -> str:
    """Canonical dtype name ("float32", "float16", "bfloat16") of a name, numpy or torch dtype.

    Raises ValueError naming the accepted dtypes for anything else."""
    return dtypes.name(dtype)


def itemsize(dtype) -> int:
    """Bytes per element of ``dtype`` (a name, a numpy dtype or a torch dtype)."""
    return dtypes.itemsize(dtype)


def _positive(**dims) -> None:
    for name, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


def _make(variant, dtype, steps, flops, shape) -> Traffic:
    name = dtypes.name(dtype)
    size = dtypes.ITEMSIZE[name]
    transfers = sum(s.reads + s.writes for s in steps)
    return Traffic(variant=variant, dtype=name, itemsize=size, transfers=transfers,
                   bytes=transfers * size, flops=flops, breakdown=list(steps), shape=shape)


def activation(T: int, h: int, dtype="float32", variant: str = "fused") -> Traffic:
    """Traffic of the elementwise ``silu(gate) * up`` on [T, h] tensors.

    - ``naive``: a SiLU kernel (read gate, write tmp) then a multiply kernel
      (read tmp and up, write out): 5Th transfers.
    - ``fused``: one kernel reads gate and up and writes out: 3Th.
    - ``epilogue``: the Vizuara article's epilogue of the up-projection GEMM: `up` is
      already in registers, gate is read once and out written once: 2Th.
      (In a dual GEMM that computes gate and up together even that gate read
      goes away; see :func:`mlp_up`.)
    """
    _positive(T=T, h=h)
    n = T * h
    if variant == "naive":
        steps = [Step("silu kernel: read gate, write tmp", n, n),
                 Step("multiply kernel: read tmp and up, write out", 2 * n, n)]
    elif variant == "fused":
        steps = [Step("fused kernel: read gate and up, write out", 2 * n, n)]
    elif variant == "epilogue":
        steps = [Step("GEMM epilogue: up in registers, read gate, write out", n, n)]
    else:
        raise ValueError(f"unknown activation variant {variant!r}: use one of {ACTIVATION_VARIANTS}")
    return _make(variant, dtype, steps, FLOPS_PER_ELEMENT * n, {"T": T, "h": h})


def mlp_up(T: int, d: int, h: int, dtype="float32", variant: str = "unfused") -> Traffic:
    """Traffic of ``silu(x @ Wg) * (x @ Wu)`` with x [T, d], Wg and Wu [d, h].

    Minimum traffic: each GEMM reads its operands once and writes its output
    once (perfect on-chip reuse).

    - ``unfused``: two GEMMs write gate and up to memory, then the fused
      activation kernel reads them back and writes out.
    - ``epilogue``: one dual GEMM reads x once and both weights, applies
      SiLU*mul in its epilogue and writes only out.

    Flops: 2*T*d*h per GEMM (a multiply and an add per term) plus
    FLOPS_PER_ELEMENT per output element.
    """
    _positive(T=T, d=d, h=h)
    x, w, n = T * d, d * h, T * h
    if variant == "unfused":
        steps = [Step("gate GEMM: read x and Wg, write gate", x + w, n),
                 Step("up GEMM: read x and Wu, write up", x + w, n),
                 Step("fused activation: read gate and up, write out", 2 * n, n)]
    elif variant == "epilogue":
        steps = [Step("dual GEMM: read x once, Wg and Wu; SiLU*mul in the epilogue; write out",
                      x + 2 * w, n)]
    else:
        raise ValueError(f"unknown mlp_up variant {variant!r}: use one of {MLP_UP_VARIANTS}")
    flops = 2 * (2 * T * d * h) + FLOPS_PER_ELEMENT * n
    return _make(variant, dtype, steps, flops, {"T": T, "d": d, "h": h})


def gemm(M: int, K: int, N: int, dtype="float32") -> Traffic:
    """Traffic of one GEMM ``[M, K] @ [K, N]``: each operand read once and the output written
    once (perfect on-chip reuse, as in :func:`mlp_up`), 2·M·K·N flops (a multiply and an add
    per term). Its shape names the reduction ``K``, so the roofline puts its math where a
    GEMM's runs (:func:`book.roofline.kernel_kind`)."""
    _positive(M=M, K=K, N=N)
    step = Step("GEMM: read A and B, write C", M * K + K * N, M * N)
    return _make("gemm", dtype, [step], 2 * M * K * N, {"M": M, "K": K, "N": N})
