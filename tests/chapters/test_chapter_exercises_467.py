"""Chapters 4, 6 and 7: their checked exercises answer right and wrong, and what they print
about measured differences reads right at any sign.

The cells are taken from the chapters' own sources and executed here (in the simulator), so
a chapter edit that breaks an exercise fails this test before a build does."""

import ast
import json
from dataclasses import replace

import book  # first: GPU or simulator is decided before numba.cuda loads
import numpy as np
import pytest

from book import exercises, saving, tracer
from book.kernels.gemms import gemm
from repo import ROOT

CHAPTERS = ROOT / "chapters"

pytestmark = pytest.mark.skipif(not book.gpu.SIMULATED,
                                reason="the exercises' traces run in the simulator")


def cell(name, cid):
    nb = json.loads((CHAPTERS / name).read_text())
    for c in nb["cells"]:
        if c.get("id") == cid:
            return "".join(c["source"])
    raise KeyError(f"{name} has no cell {cid}")


def functions_of(source, *names):
    """Only the named top-level functions of a cell, defined in a fresh namespace."""
    tree = ast.parse(source)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in keep} == set(names), names
    ns = {}
    exec(compile(ast.Module(keep, []), "<cell>", "exec"), ns)
    return ns


CH7 = "07_epilogue_fusion.ipynb"


def test_chapter_7_bank_conflict_exercise_is_checked_right_and_wrong():
    ns = {"np": np, "gemm": gemm, "tracer": tracer, "exercises": exercises,
          "replace": replace, "rng": np.random.default_rng(21)}
    exec(cell(CH7, "ch07-t02"), ns)
    ex = ns["ex"]
    assert ex.check(None).correct is None          # the placeholder runs without raising
    assert ex.check(2)                             # unpadded: two lanes a bank
    wrong = ex.check(1)
    assert not wrong and "padded" in wrong.message
    assert not ex.check(32)
    # the truth comes from the traces the chapter shows, never typed
    assert ns["store_ways"](ns["traces"][gemm.SIM_TILE.pad], "As") == 1


def test_chapter_7_epilogue_cost_never_prints_a_signed_zero():
    assert "saving.epilogue_cost(" in cell(CH7, "ch07-019")  # the library's words, shown
    f = saving.epilogue_cost
    tiny = f(-4e-7, 3e-5)                        # -0.0004 ms: once printed "-0.000 ms"
    assert "-0.000" not in tiny and "none measurable" in tiny
    faster = f(-3.9e-5, 1e-5)
    assert "faster" in faster and "-" not in faster.split("(")[1]
    assert f(2e-4, 1e-5) == "0.200 ms"


def test_chapter_7_no_longer_says_the_control_is_missing_from_the_record():
    text = json.loads((CHAPTERS / CH7).read_text())
    md = "\n".join("".join(c["source"]) for c in text["cells"] if c["cell_type"] == "markdown")
    assert "predates the identity-epilogue" not in md
    rec = book.data.load(gpu="h100")
    for s3 in {tuple(r["shape"]) for r in rec.rows if r["variant"] == "numba_dual_gemm"}:
        assert rec.find("numba_dual_gemm_identity", "float32", s3)


CH4 = "04_first_kernel.ipynb"


def test_chapter_4_find_the_bug_says_wrong_then_right():
    from numba import cuda

    from book.kernels import reference
    from book.kernels.host.launch import cdiv

    source = cell(CH4, "c022")
    ns = {"cuda": cuda, "np": np, "reference": reference, "cdiv": cdiv}
    exec(source, ns)                      # as shipped: the bug is in
    bad = ns["check_silu"](ns["out_try"], ns["gate_try"])
    assert bad.correct is False and "values wrong" in bad.message
    fixed = source.replace("math.exp(g))  # one", "math.exp(-g))  # one")
    assert fixed != source
    ns = {"cuda": cuda, "np": np, "reference": reference, "cdiv": cdiv}
    exec(fixed, ns)
    good = ns["check_silu"](ns["out_try"], ns["gate_try"])
    assert good.correct is True and str(good).startswith("Right.")


CH6 = "06_saturating_bandwidth.ipynb"


def test_chapter_6_sectors_exercise_is_checked_right_and_wrong():
    from book.kernels.elementwise import coalescing

    ns = {"coalescing": coalescing}
    exec(cell(CH6, "ch06-ex1"), ns)
    ex = ns["ex"]
    assert ex.check(None).correct is None
    assert ex.check(8)
    wrong = ex.check(4)
    assert not wrong and "coalesced" in wrong.message
    assert not ex.check(32)
    assert ns["spr"] == {"coalesced": 4.0, "strided2": 8.0, "uncoalesced": 32.0}


def test_chapter_6_prints_aims_for_a_reader_not_goal_strings():
    f = functions_of(cell(CH6, "ch06-layers"), "aim")["aim"]
    ns = {}
    exec("import textwrap", ns)
    f.__globals__.update(ns)
    t = {"target": "float32 decode (1, 18944): host time per call from torch tensors / "
                   "raw Numba launch", "value": 1.12, "goal": "<= 1.3", "met": True,
         "detail": "a vs b"}
    text = f(t)
    assert "goal" not in text and "<=" not in text
    assert "at most 1.3: met" in " ".join(text.split())
    t.update(goal=">= 0.95", met=False, value=0.48)
    assert "at least 0.95: not met" in " ".join(f(t).split())


def test_chapter_6_decode_step_exercise_reads_the_cheap_path_and_names_the_usual_mistakes():
    from book import decode_cost
    from book.data import Results

    def row(variant, seconds, kind="launch"):
        return {"kind": kind, "variant": variant, "dtype": "float32", "shape": [1, 18944],
                "seconds": seconds}

    rec = Results({}, [row("vec4", 2.5e-6, "kernel"), row("vec4_torch_call", 27e-6),
                       row("launch_layer_fastcall", 9.6e-6),
                       row("launch_layer_graph_replay", 1.8e-6)])
    ns = {"decode_cost": decode_cost, "recorded": rec, "T": 1, "h": 18944}
    exec(cell(CH6, "ch06-decode-ex"), ns)
    ex = ns["ex"]
    assert "cheap path" in ex.question
    assert ex.check(None).correct is None
    assert ex.check(32 * 9.6)                      # paced by the host: 32 x max(host, GPU)
    assert ex.check("0.307 ms")
    gpu_only = ex.check(32 * 2.5)
    assert not gpu_only and "GPU's time alone" in gpu_only.message
    summed = ex.check(32 * (9.6 + 2.5))
    assert not summed and "overlap" in summed.message
    graph = ex.check(32 * 1.8)
    assert not graph and "graph replay" in graph.message
    # a record from before the cheap path: the same exercise on the dispatcher's rows
    old = Results({}, [r for r in rec.rows if r["variant"] != "launch_layer_fastcall"])
    ns = {"decode_cost": decode_cost, "recorded": old, "T": 1, "h": 18944}
    exec(cell(CH6, "ch06-decode-ex"), ns)
    assert ns["ex"].check(32 * 27)
