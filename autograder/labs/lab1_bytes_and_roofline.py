"""Lab 1: count the bytes and predict the time of SwiGLU followed by a down-cast.

Chapter 1 counted naive vs fused SwiGLU; here the output is cast to another dtype by a
third kernel (the quantize step before a low-precision matmul), dtypes differ, and the
answers are functions graded on numbers the student never saw.
"""

from __future__ import annotations

import math

from .spec import NumericLab


# ---- the answers (instructor side) ----
def _bytes_unfused(T, h, in_bytes, out_bytes):
    # silu: read g, write t1; mul: read t1, read u, write t2; cast: read t2, write out
    return T * h * (6 * in_bytes + out_bytes)


def _bytes_fused(T, h, in_bytes, out_bytes):
    return T * h * (2 * in_bytes + out_bytes)


def _intensity(T, h, in_bytes, out_bytes, flops_per_element, fused):
    b = _bytes_fused(T, h, in_bytes, out_bytes) if fused else _bytes_unfused(T, h, in_bytes, out_bytes)
    return T * h * flops_per_element / b


def _predicted_time(nbytes, flops, bandwidth, peak_flops):
    return max(nbytes / bandwidth, flops / peak_flops)


def _bound(nbytes, flops, bandwidth, peak_flops):
    return "memory" if nbytes / bandwidth >= flops / peak_flops else "compute"


def _min_tokens(h, in_bytes, out_bytes, bandwidth, launch_s):
    return max(1, math.ceil(launch_s * bandwidth / (h * (2 * in_bytes + out_bytes))))




def hidden_cases(rng, simulated: bool, n: int = 2):
    """n random cases per function (shapes, dtypes and machines the student never saw)."""
    cases = []
    sizes = [1, 2, 4]
    for k in range(n):
        T = int(rng.integers(1, 9000)); h = int(rng.integers(64, 30000))
        ib = int(rng.choice(sizes)); ob = int(rng.choice([1, 2, 4]))
        bw = float(rng.uniform(3e11, 5e12)); pk = float(rng.uniform(5e12, 1e15))
        nb = float(rng.uniform(1e6, 1e10)); fl = float(rng.uniform(1e6, 1e13))
        # alternate a clearly memory-bound and a clearly compute-bound machine balance
        fl = nb / bw * pk * (0.25 if k % 2 == 0 else 4.0)
        fpe = int(rng.integers(4, 12)); fused = bool(k % 2)
        launch = float(rng.uniform(2e-6, 40e-6))
        cases += [
            {"name": f"bytes_unfused hidden {k}", "function": "bytes_unfused", "args": [T, h, ib, ob]},
            {"name": f"bytes_fused hidden {k}", "function": "bytes_fused", "args": [T, h, ib, ob]},
            {"name": f"intensity hidden {k}", "function": "intensity", "args": [T, h, ib, ob, fpe, fused]},
            {"name": f"predicted_time hidden {k}", "function": "predicted_time", "args": [nb, fl, bw, pk]},
            {"name": f"bound hidden {k}", "function": "bound", "args": [nb, fl, bw, pk]},
            {"name": f"min_tokens_to_hide_launch hidden {k}", "function": "min_tokens_to_hide_launch",
             "args": [h, ib, ob, bw, launch]},
        ]
    return cases


LAB = NumericLab(
    name="lab1_bytes_and_roofline",
    title="Lab 1: bytes and the roofline for SwiGLU with a down-cast",
    chapters="chapters 1-3 and 6",
    asks=("byte counts, intensities, roofline times, the binding roof and the launch "
          "break-even of a SwiGLU **followed by a down-cast** (three kernels against one, "
          "mixed dtypes)"),
    signatures={
        "bytes_unfused": ("T", "h", "in_bytes", "out_bytes"),
        "bytes_fused": ("T", "h", "in_bytes", "out_bytes"),
        "intensity": ("T", "h", "in_bytes", "out_bytes", "flops_per_element", "fused"),
        "predicted_time": ("nbytes", "flops", "bandwidth", "peak_flops"),
        "bound": ("nbytes", "flops", "bandwidth", "peak_flops"),
        "min_tokens_to_hide_launch": ("h", "in_bytes", "out_bytes", "bandwidth", "launch_s"),
    },
    answers={
        "bytes_unfused": _bytes_unfused,
        "bytes_fused": _bytes_fused,
        "intensity": _intensity,
        "predicted_time": _predicted_time,
        "bound": _bound,
        "min_tokens_to_hide_launch": _min_tokens,
    },
    rtol=1e-6,
    public_cases=(
        {"name": "bytes_unfused(4, 8, 4, 4)", "function": "bytes_unfused", "args": [4, 8, 4, 4]},
        {"name": "bytes_fused(4, 8, 2, 1)", "function": "bytes_fused", "args": [4, 8, 2, 1]},
        {"name": "intensity fused f32", "function": "intensity", "args": [128, 14336, 4, 4, 6, True]},
        {"name": "predicted_time H100-like", "function": "predicted_time",
         "args": [1.4e9, 7e8, 3.35e12, 6.7e13]},
        {"name": "bound H100-like", "function": "bound", "args": [1.4e9, 7e8, 3.35e12, 6.7e13]},
        {"name": "min_tokens_to_hide_launch", "function": "min_tokens_to_hide_launch",
         "args": [18944, 2, 2, 3.35e12, 30e-6]},
    ),
    hidden_cases=hidden_cases)
