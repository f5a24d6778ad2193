"""Chapter 11 (the same move everywhere): what its quantize check and its timing cell print
says what is true. Reader QA found "100.0000% identical" printed above "largest difference 1
quantization step" (a few elements in 16.8 million, rounded away), and a fused / unfused ratio
of 0.32 beside "bytes predict 0.56" with nothing to say why."""

import contextlib
import io
import json
import types

import numpy as np

import book  # noqa: F401
from book import gpu
from book.kernels import glu_family as gf
from repo import ROOT

CHAPTER = ROOT / "chapters" / "11_same_move_everywhere.ipynb"


def _code(marker):
    nb = json.loads(CHAPTER.read_text())
    [src] = ["".join(c["source"]) for c in nb["cells"]
             if c["cell_type"] == "code" and marker in "".join(c["source"])]
    return src


def _run_check(plant):
    """The chapter's quantize check, its kernel replaced by the reference with ``plant``
    applied: what the cell prints."""

    class Host:
        def __init__(self, a):
            self.a = a

        def copy_to_host(self):
            return self.a

    def fake_int8(g, u, scale):
        q = gf.swiglu_int8_reference(g.copy_to_host(), u.copy_to_host(), scale).copy()
        plant(q)
        return Host(q)

    fake_gf = types.SimpleNamespace(**{k: getattr(gf, k) for k in dir(gf)
                                       if not k.startswith("__")})
    fake_gf.swiglu_int8 = fake_int8
    from numba import cuda

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(_code("gf.swiglu_int8_reference(g, u, scale)"),
             {"np": np, "gpu": gpu, "gf": fake_gf, "cuda": cuda})
    return out.getvalue()


def test_the_quantize_check_counts_the_elements_that_differ():
    said = _run_check(lambda q: None)
    n = gpu.pick(1 << 24, 1000)
    assert f"{n:,} elements: {n:,} identical to the float64 reference" in said
    assert "0 differ\n" in said and "%" not in said.splitlines()[0]

    def one_off(q):
        q[7] += 1

    said = _run_check(one_off)
    assert f"{n - 1:,} identical" in said and "1 differ, by at most 1 quantization step" in said


def test_the_timing_cell_times_each_unfused_step_and_prints_its_rate():
    code = _code("bytes predict")
    assert "t_sw = bench.measure(" in code and "t_q = bench.measure(quantize" in code
    assert "GB/s of each kernel alone" in code
    prose = " ".join(" ".join("".join(c["source"]) for c in json.loads(CHAPTER.read_text())[
        "cells"] if c["cell_type"] == "markdown").split())
    assert "if every kernel moves its bytes at the same rate" in prose
