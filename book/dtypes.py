"""The course's three dtypes: their names, the aliases readers type, their sizes, their storage.

One definition, imported by :mod:`book.traffic` (bytes), :mod:`book.kernels.reference`
(the float64 truth) and :mod:`book.bench.suite` (the benchmark rows).

NumPy has no bfloat16: host arrays hold its raw bits as ``uint16`` (the top 16 bits of a
float32), and torch, which does not export bfloat16 through ``__cuda_array_interface__``,
hands it to Numba viewed as ``int16``. Either integer type of 2 bytes therefore *stores*
bfloat16 (:data:`STORAGE_NAMES`), while :func:`name` accepts only real dtype names.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DTYPES", "ITEMSIZE", "ALIASES", "STORAGE", "STORAGE_NAMES", "name", "itemsize",
           "bf16_bits", "bf16_value", "BF16_NAN"]

DTYPES = ("float32", "float16", "bfloat16")

#: Bytes per element.
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}

#: Other spellings of the three names (lower case; "torch." prefixes are dropped first).
ALIASES = {
    "float": "float32", "fp32": "float32", "f32": "float32", "f4": "float32", "<f4": "float32",
    "half": "float16", "fp16": "float16", "f16": "float16", "f2": "float16", "<f2": "float16",
    "bf16": "bfloat16",
}

#: The NumPy type that holds each dtype on the host (bfloat16: its bits as uint16).
STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}

#: Our name for the NumPy dtype of a device array (uint16 or int16 storage is bfloat16).
STORAGE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
                 np.dtype(np.uint16): "bfloat16", np.dtype(np.int16): "bfloat16"}


def name(dtype) -> str:
    """Canonical name ("float32", "float16", "bfloat16") of a name, alias, NumPy or torch dtype.

    Raises ValueError naming the accepted dtypes for anything else."""
    if isinstance(dtype, str):
        key = dtype
    else:
        key = str(dtype)  # torch dtypes print as "torch.float16"
        if not key.startswith("torch."):
            try:
                key = np.dtype(dtype).name
            except TypeError:
                key = getattr(dtype, "name", key)
    key = key.strip().lower().replace("torch.", "")
    key = ALIASES.get(key, key)
    if key in ITEMSIZE:
        return key
    raise ValueError(
        f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)} "
        "(or an alias such as fp16/bf16, or a NumPy or torch dtype of them)"
    )


def itemsize(dtype) -> int:
    """Bytes per element of ``dtype`` (a name, an alias, a NumPy or a torch dtype)."""
    return ITEMSIZE[name(dtype)]


#: The bits every NaN rounds to in bfloat16: a quiet NaN (its sign and payload are not kept).
BF16_NAN = 0x7FC0


def bf16_bits(x):
    """float32 value(s) -> bfloat16 bits (uint16): the top 16 bits, rounded to nearest even on
    the 16 dropped (``cvt.rn.bf16.f32``, torch's rounding); a NaN becomes ``BF16_NAN``. An
    array gives an array, a number a ``numpy.uint16``: the host's reference, the simulator's
    stores (book.kernels.instructions.wide, book.kernels.instructions.tensorcore) and the checks all round here."""
    a = np.asarray(x, dtype=np.float32)   # (ascontiguousarray would make a number 1-D)
    b = (a if a.ndim == 0 else np.ascontiguousarray(a)).view(np.uint32).astype(np.uint64)
    bits = np.where(np.isnan(a), np.uint16(BF16_NAN),
                    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16))
    return bits if bits.ndim else np.uint16(bits)


def bf16_value(bits):
    """bfloat16 bits (uint16) -> float32 value(s), exactly (an array gives an array)."""
    a = np.asarray(bits, dtype=np.uint16)
    v = (a.astype(np.uint32) << 16).view(np.float32)
    return v if v.ndim else np.float32(v)
