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

__all__ = ["DTYPES", "ITEMSIZE", "ALIASES", "STORAGE", "STORAGE_NAMES", "name", "itemsize"]

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
