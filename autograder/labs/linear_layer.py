"""The problem labs 4, 5 and 6 share, in whichever dtype a lab stores it: one MLP-up layer with
nn.Linear weights and biases, ``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)`` (weights
``[h, d]``, out_features by in_features), and the single projection ``out = x @ w.T`` their
first steps build (no bias). Here are the inputs a case generates, the float64 truth, the
words a message names a case by, the work and bytes the graded layer does, and the steps that
build one projection (``projection_step``); each lab binds its dtype (``functools.partial``)
and keeps what is its own: tolerances, shapes, steps, the reference it is timed against."""

from __future__ import annotations

from functools import partial

import numpy as np

from .seeds import seeds
from .spec import Step

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


def projection_step(name, function, teaches, shapes, seed, bug, *, dtype, rtol, atol,
                    out_dtype="float32", extra=None, **fields) -> Step:
    """A step of a GEMM lab that computes one projection, ``out = x @ w.T`` (``dtype`` inputs,
    an ``out_dtype`` output: the steps of labs 5 and 6 store their float32 accumulators): its
    cases from ``shapes`` [(T, d, h), ...] with seeds from ``seed`` (and ``extra`` keys, a
    launch size the step's ``params`` take from the case); ``fields``: Step's fields that
    differ (a step on other arrays: its params, inputs, specs, reference, words)."""
    cases = tuple(dict({"name": f"step {name} T={T} d={d} h={h}", "T": T, "d": d, "h": h,
                        "seed": seed + i}, **(extra or {}))
                  for i, (T, d, h) in enumerate(shapes))
    args = dict(params=("x", "w", OUTPUT), inputs=("x", "w"),
                input_specs=partial(projection_specs, dtype=dtype), reference=projection_reference,
                describe=partial(projection_describe, dtype=dtype))
    args.update(fields)
    return Step(name=name, function=function, output=OUTPUT, dtype=out_dtype, rtol=rtol,
                atol=atol, cases=cases, out_spec=partial(out_spec, dtype=out_dtype),
                teaches=teaches, bug=bug, **args)
