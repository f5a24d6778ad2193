"""The problem labs 4 and 5 share, in whichever dtype a lab stores it: one MLP-up layer with
nn.Linear weights and biases, ``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)`` (weights
``[h, d]``, out_features by in_features), and the single projection ``out = x @ w.T`` their
first steps build (no bias). Here are the inputs a case generates, the float64 truth, the
words a message names a case by, and the work and bytes the graded layer does; each lab
binds its dtype (``functools.partial``) and keeps what is its own: tolerances, shapes, steps,
the reference it is timed against."""

from __future__ import annotations

import numpy as np

from .seeds import seeds

INPUTS = ("x", "wg", "bg", "wu", "bu")
OUTPUT = "out"


def input_specs(case, dtype):
    """x ~ N(0, 1), weights scaled by 1/sqrt(d) (outputs of order 1), biases ~ N(0, 0.25)."""
    T, d, h = case["T"], case["d"], case["h"]
    s = seeds(case["seed"], INPUTS)
    w = 1.0 / float(np.sqrt(d))
    return {"x": {"shape": [T, d], "dtype": dtype, "seed": s["x"], "scale": 1.0},
            "wg": {"shape": [h, d], "dtype": dtype, "seed": s["wg"], "scale": w},
            "bg": {"shape": [h], "dtype": dtype, "seed": s["bg"], "scale": 0.5},
            "wu": {"shape": [h, d], "dtype": dtype, "seed": s["wu"], "scale": w},
            "bu": {"shape": [h], "dtype": dtype, "seed": s["bu"], "scale": 0.5}}


def out_spec(case, dtype):
    return {"shape": [case["T"], case["h"]], "dtype": dtype}


def reference(inputs):
    f = {k: v.astype(np.float64) for k, v in inputs.items()}
    a = f["x"] @ f["wg"].T + f["bg"]
    b = f["x"] @ f["wu"].T + f["bu"]
    return a / (1.0 + np.exp(-a)) * b


def describe(case, dtype):
    return f"x [{case['T']}, {case['d']}], weights [{case['h']}, {case['d']}] {dtype}"


def min_bytes(case, dtype):
    """Each input read once and the output written once."""
    # book's dtypes, imported here: importing `book` decides GPU or simulator, which the
    # grader does first (a lab module is imported before that)
    from book.dtypes import itemsize

    T, d, h = case["T"], case["d"], case["h"]
    return itemsize(dtype) * (T * d + 2 * h * d + 2 * h + T * h)


def flops(case):
    """Two GEMMs of T x d x h, a multiply and an add each."""
    return 2 * 2 * case["T"] * case["d"] * case["h"]


# -- the steps' problem: one projection, out = x @ w.T, no bias

def projection_specs(case, dtype):
    T, d, h = case["T"], case["d"], case["h"]
    s = seeds(case["seed"], ("x", "w"))
    return {"x": {"shape": [T, d], "dtype": dtype, "seed": s["x"], "scale": 1.0},
            "w": {"shape": [h, d], "dtype": dtype, "seed": s["w"], "scale": 1.0 / float(np.sqrt(d))}}


def projection_reference(inputs):
    return inputs["x"].astype(np.float64) @ inputs["w"].astype(np.float64).T


def projection_describe(case, dtype):
    return f"x [{case['T']}, {case['d']}], w [{case['h']}, {case['d']}] {dtype}"
