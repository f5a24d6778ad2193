"""The refusals of the GPU-capability check, pinned byte for byte (issue 44).

The chapters print them in recorded cells (chapter 8's ``tc.check_capability(cc, "bfloat16")``
loop, chapter 9's ``H.check_capability(cc)``), so the wording may not drift: every input of a
grid (no GPU, sm_70 to sm_120, each dtype, the Hopper check, ``cannot_run`` and ``runs_here``)
under every kind of target (the simulator, a GPU of each capability, the T4 switch
``COURSE_TARGET_CC`` naming each, no GPU and no switch) gives what
``capability_messages.json`` beside this file holds, captured before the two checks became one
(:mod:`book.kernels.capability`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from book import target
from book.kernels.instructions import hopper as H
from book.kernels.instructions import tensorcore as tc

PINNED = Path(__file__).with_name("capability_messages.json")

GRID = (None, (7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0),
        [7, 5], (9, 0, "a"), (7, 5, "a"))
TARGETS = [None, *(cc for cc in GRID[1:9])]


def _no_gpu():
    raise RuntimeError("no GPU and no switch: PTX compiled on a CPU")


def contexts():
    """(name, the switch's value or None, what the target function answers)."""
    yield "simulator", None, lambda: None
    for cc in TARGETS[1:]:
        yield f"gpu {cc[0]}.{cc[1]}", None, (lambda cc=cc: cc)
        yield f"switch {cc[0]}.{cc[1]}", f"{cc[0]}.{cc[1]}", target.forced_cc
    yield "no gpu, no switch", None, _no_gpu


def said(fn, *args):
    try:
        out = fn(*args)
    except Exception as e:  # the type is pinned with the message
        return f"{type(e).__name__}: {e}"
    return out


def observed(monkeypatch) -> dict:
    """What every check says for every input, in every context."""
    where = sys.modules[tc.target_cc.__module__]  # the module that answers the target
    out = {}
    for name, switch, answer in contexts():
        if switch is None:
            monkeypatch.delenv(target.TARGET_CC_ENV, raising=False)
        else:
            monkeypatch.setenv(target.TARGET_CC_ENV, switch)
        monkeypatch.setattr(where, "target_cc", answer)
        rows = {}
        for cc in GRID:
            key = repr(cc)
            for dtype in ("bfloat16", "float16"):
                rows[f"tc.check_capability({key}, {dtype!r})"] = said(tc.check_capability, cc, dtype)
                rows[f"tc.cannot_run({dtype!r}, {key})"] = said(tc.cannot_run, dtype, cc)
            rows[f"tc.check_capability({key})"] = said(tc.check_capability, cc)
            rows[f"H.check_capability({key})"] = said(H.check_capability, cc)
            if cc is not None:
                rows[f"tc.runs_here({key})"] = said(tc.runs_here, cc)
        for dtype in ("bfloat16", "float16"):
            rows[f"tc.cannot_run({dtype!r})"] = said(tc.cannot_run, dtype)
        out[name] = rows
    return out


def pack(rows: dict) -> dict:
    """The pin's layout: each distinct message once, each call a row of its answers in every
    context (a number: the message of that index; null, true, false: what it returned)."""
    names = list(rows)
    messages = sorted({v for r in rows.values() for v in r.values() if isinstance(v, str)})
    calls = {call: [messages.index(v) if isinstance(v, str) else v
                    for v in (rows[n][call] for n in names)] for call in rows[names[0]]}
    return {"contexts": names, "messages": messages, "calls": calls}


def unpack(pin: dict) -> dict:
    def value(v):
        return pin["messages"][v] if type(v) is int else v

    return {name: {call: value(answers[i]) for call, answers in pin["calls"].items()}
            for i, name in enumerate(pin["contexts"])}


def test_every_refusal_is_the_one_pinned(monkeypatch):
    pinned = unpack(json.loads(PINNED.read_text()))
    got = observed(monkeypatch)
    assert got.keys() == pinned.keys()
    for name in pinned:
        diff = {k: (pinned[name].get(k), got[name].get(k))
                for k in pinned[name].keys() | got[name].keys()
                if pinned[name].get(k) != got[name].get(k)}
        assert not diff, f"{name}: (pinned, now) {json.dumps(diff, indent=1)}"


def test_the_pin_covers_every_wording():
    """The grid reaches each way of naming a capability and each refusal."""
    text = "\n".join(json.loads(PINNED.read_text())["messages"])
    for phrase in ("this GPU is sm_75 (compute capability 7.5):",
                   "the target is sm_75 (compute capability 7.5, chosen by COURSE_TARGET_CC):",
                   "on sm_75 (compute capability 7.5) the course would refuse bfloat16",
                   "on sm_70 (compute capability 7.0) the course would refuse every tensor-core",
                   "this GPU is sm_80: these kernels", "on sm_120 the course would refuse this",
                   "Numba's CUDA simulator has neither wgmma nor TMA"):
        assert phrase in text, phrase


@pytest.mark.parametrize("cc", [(9, 0), (9, 0, "a"), [9, 0]])
def test_hopper_takes_sm_90_whichever_way_it_is_written(cc):
    H.check_capability(cc)


def test_the_tables_the_modules_read_are_the_families():
    """tensorcore's per-instruction table and hopper's target are the families', as written
    before (issue 44)."""
    from book import capability

    assert tc.MIN_CC == {"mma_bf16_16816": (8, 0), "mma_f16_16816": (8, 0),
                         "mma_f16_1688": (7, 5), "ldmatrix": (7, 5), "cp_async": (8, 0)}
    assert H.ARCH == (9, 0, "a")
    wgmma = capability.FAMILIES["wgmma"]
    assert [cc for cc in TARGETS[1:] if wgmma.has(cc)] == [(9, 0)]  # not Blackwell's 10.0, 12.0
    mma = capability.FAMILIES["mma_m16n8k16"]
    assert [cc for cc in TARGETS[1:] if mma.has(cc)] == [(8, 0), (8, 6), (8, 9), (9, 0), (10, 0),
                                                          (12, 0)]
    assert capability.tensor_core("float16") == ("mma_m16n8k8",)


@pytest.mark.parametrize("cc,says,not_said", [
    ((8, 0), "GPUs before Hopper have neither wgmma nor TMA", ("Blackwell", "tcgen05")),
    ((8, 9), "GPUs before Hopper have neither wgmma nor TMA", ("Blackwell", "tcgen05")),
    ((10, 0), "sm_100 Blackwell GPUs (B200, GB200) keep TMA, mbarriers and setmaxnreg but "
              "multiply with tcgen05 instead", ("before Hopper", "mma.sync, extended")),
    ((12, 0), "have no tcgen05: their tensor cores take mma.sync, extended to FP8 and FP4",
     ("before Hopper", "multiply with tcgen05"))])
def test_the_hopper_refusal_says_why_of_the_gpu_at_hand(cc, says, not_said):
    """Reader pass 7, L6: the refusal told an A100's user of Blackwell, and an sm_120's that
    its GPU had tcgen05. Each generation now hears its own reason, and only its own."""
    with pytest.raises(RuntimeError) as e:
        H.check_capability(cc)
    text = str(e.value)
    assert says in text and not any(w in text for w in not_said), text
