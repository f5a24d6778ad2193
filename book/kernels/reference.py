"""The float64 truth every kernel is checked against, and the check of the course's own kernels
(:func:`check`; its tolerance test is :func:`book.answers.within`, a student's answer's too).

SwiGLU's activation: ``out = silu(gate) * up`` with ``silu(g) = g / (1 + exp(-g))``.

Dtypes are named by strings: ``"float32"``, ``"float16"``, ``"bfloat16"``. NumPy has no
bfloat16, so a bfloat16 array is stored as ``uint16`` holding the raw bits (the top 16
bits of a float32); ``to_float64`` / ``from_float32`` convert.
"""

import numpy as np

# STORAGE is used here; ITEMSIZE stays reachable as reference.ITEMSIZE for chapter 4's cells
# (and DTYPES beside it); the library reads both from book.dtypes
from .. import dtypes
# the one tolerance test (a NaN matches nothing, the same infinity matches), the labs' and the
# exercises' too; this module keeps its own words, which chapter 4's recorded page shows
from ..answers import within
from ..dtypes import DTYPES, ITEMSIZE, STORAGE  # noqa: F401
from ..dtypes import name as dtype_name

# |got - expected| <= atol + rtol * |expected|, expected computed in float64 from the
# very inputs the kernel saw. Kernels compute in float32 inside; the budget is two
# roundings to the storage type (the naive kernel stores silu(gate) in the input dtype,
# as a framework does, then rounds the product again): float16 2 x 2**-11 relative,
# bfloat16 2 x 2**-9, plus float32 math with approximate exp/reciprocal (about 1e-6
# relative). atol covers outputs that round to subnormals or to zero.
TOLERANCE = {
    "float32": {"rtol": 1e-5, "atol": 1e-6},
    "float16": {"rtol": 2e-3, "atol": 1e-6},
    "bfloat16": {"rtol": 8e-3, "atol": 1e-6},
}


# bfloat16 bits <-> float32, rounding to nearest even (NaN stays NaN): book.dtypes, the one
# definition the simulator's stores use too
bf16_bits_to_float32 = dtypes.bf16_value
float32_to_bf16_bits = dtypes.bf16_bits


def to_float64(a, dtype):
    """Host array in the storage type of ``dtype`` -> float64 values."""
    dtype = dtype_name(dtype)
    a = np.asarray(a)
    if dtype == "bfloat16":
        if a.dtype not in (np.uint16, np.int16):
            raise TypeError(f"bfloat16 data must be uint16 bits, got {a.dtype}")
        return bf16_bits_to_float32(a.view(np.uint16)).astype(np.float64)
    return a.astype(np.float64)


def from_float32(x, dtype):
    """float32 values -> host array in the storage type of ``dtype`` (rounded)."""
    dtype = dtype_name(dtype)
    if dtype == "bfloat16":
        return float32_to_bf16_bits(x)
    return np.asarray(x, dtype=np.float32).astype(STORAGE[dtype])


def random_inputs(shape, dtype="float32", seed=0, scale=3.0):
    """(gate, up) host arrays: normal * scale, never zero, rounded to ``dtype``.

    Zeros would hide unwritten outputs and wrong indexing, so exact zeros are nudged.
    """
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(2):
        x = (rng.standard_normal(shape) * scale).astype(np.float32)
        x[x == 0] = np.float32(0.5)
        out.append(from_float32(x, dtype))
    return tuple(out)


def swiglu(gate, up, dtype=None):
    """float64 silu(gate) * up. ``dtype`` says how to decode (needed for bfloat16 bits)."""
    if dtype is None:
        dtype = "bfloat16" if np.asarray(gate).dtype == np.uint16 else np.asarray(gate).dtype
    g = to_float64(gate, dtype)
    u = to_float64(up, dtype)
    # exp(-g) overflows to inf for g < -709: silu -> -0.0, which is the right limit.
    with np.errstate(over="ignore"):
        return g / (1.0 + np.exp(-g)) * u


def poison_value(dtype):
    """The NaN pattern written into outputs before a run (bits for bfloat16)."""
    dtype = dtype_name(dtype)
    if dtype == "bfloat16":
        return np.uint16(0x7FC0)
    return STORAGE[dtype](np.nan)


def to_host(a):
    """Copy a numba device array, a torch tensor or anything array-like to NumPy."""
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    if type(a).__module__.startswith("torch"):
        import torch

        t = a.detach()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return t.cpu().numpy().view(np.uint16) if t.dtype == torch.int16 else t.cpu().numpy()
    return np.asarray(a)


def check(out, gate, up, dtype=None):
    """Raise AssertionError naming what is wrong unless ``out`` matches the reference.

    The message gives the shape and dtype, how many outputs were left unwritten (NaN
    poison still there), how many are off, and the first bad index with expected and got.
    """
    out, gate, up = to_host(out), to_host(gate), to_host(up)
    if dtype is None:
        dtype = "bfloat16" if gate.dtype == np.uint16 else gate.dtype
    dtype = dtype_name(dtype)
    if out.shape != gate.shape or up.shape != gate.shape:
        raise AssertionError(
            f"shape mismatch: out {out.shape}, gate {gate.shape}, up {up.shape}"
        )
    expected = swiglu(gate, up, dtype)
    got = to_float64(out, dtype)
    tol = TOLERANCE[dtype]
    unwritten = np.isnan(got) & ~np.isnan(expected)
    bad = ~within(got, expected, **tol)
    if bad.any():
        first = np.unravel_index(np.flatnonzero(bad)[0], bad.shape) if bad.ndim else ()
        idx = tuple(int(i) for i in first)
        raise AssertionError(
            f"SwiGLU output wrong for shape {gate.shape}, dtype {dtype}: "
            f"{int(bad.sum())} of {bad.size} elements off "
            f"({int(unwritten.sum())} never written: NaN poison still there); "
            f"first at index {idx}: expected {expected[idx]!r}, got {got[idx]!r} "
            f"(gate={to_float64(gate, dtype)[idx]!r}, up={to_float64(up, dtype)[idx]!r}; "
            f"tolerance rtol={tol['rtol']}, atol={tol['atol']})"
        )


def check_device(out, gate, up, dtype):
    """:func:`check` for torch CUDA tensors at full size: the float64 reference and the
    comparison run on the GPU (a 100M-element NumPy reference takes seconds)."""
    import torch

    def f64(t):
        if dtype_name(dtype) == "bfloat16" and t.dtype in (torch.int16, torch.uint16):
            t = t.view(torch.bfloat16)
        return t.double()

    g, u, o = f64(gate), f64(up), f64(out)
    expected = g * torch.sigmoid(g) * u
    tol = TOLERANCE[dtype_name(dtype)]
    bad = ~within(o, expected, **tol)   # on the GPU: torch tensors
    if bool(bad.any()):
        flat_bad = bad.flatten()
        i = int(flat_bad.nonzero()[0])
        idx = tuple(int(x) for x in np.unravel_index(i, tuple(bad.shape)))
        unwritten = int(torch.isnan(o).sum())
        raise AssertionError(
            f"SwiGLU output wrong for shape {tuple(gate.shape)}, dtype {dtype_name(dtype)}: "
            f"{int(flat_bad.sum())} of {flat_bad.numel()} elements off ({unwritten} never "
            f"written: NaN poison still there); first at index {idx}: expected "
            f"{float(expected.flatten()[i])!r}, got {float(o.flatten()[i])!r}"
        )
