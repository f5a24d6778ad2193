"""What the fifth reader pass (issue 43) found wrong in chapters 8 and 9's prose, held: no
Markdown-only fix of it can come back undone.

- M2: a bound the prose states is not beaten by a row of the same record: a "ceiling" row that
  a kernel built on the same loop beats may not be called a bound ("no kernel ... can beat it"),
  and the pages say it is a reference, not a bound;
- M1: the mechanism is the tensor pipe's rate for mma.sync, read off chapter 8's profile, not the
  issue slots;
- M4: of wgmma, TMA and setmaxnreg only wgmma is said to be Hopper's alone;
- M5: the epilogue rule states its regime and its decode form;
- M6, L9: the counts the decode paragraph and the T = 512 note type are the library's own.

These read the notebooks' Markdown and the records (book/data): no build, no GPU."""

from __future__ import annotations

import json
import re

import pytest

from repo import ROOT

CH8 = ROOT / "chapters" / "08_tensor_cores.ipynb"
CH9 = ROOT / "chapters" / "09_hopper.ipynb"
GLOSSARY = ROOT / "chapters" / "appendix_glossary.md"


def markdown(path) -> str:
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def sentences(text: str) -> list[str]:
    flat = re.sub(r"\s+", " ", text)
    return re.split(r"(?<=[.!?])\s+(?=[A-Z`*(])", flat)


# -- M2: a stated bound is not beaten by a row of the same record ----------------------------

#: prose that states a row as a bound nothing built on its loop can pass
BOUND = re.compile(r"(?i)\bno kernel\b[^.]*\b(?:can|could)\s+beat\b|\bcannot be beaten\b|"
                   r"\bcan(?:not|'t)\s+(?:beat|pass|exceed)\s+it\b|\bupper bound\b")


def beaten_ceilings(rec) -> dict[str, list[str]]:
    """{ceiling variant: [rows of the same record, shape and dtype that ran faster]}, among
    the rows of the ceiling's own kernels (a variant naming the same instruction: tc_*,
    *wgmma*), host-time rows left out."""
    out: dict[str, list[str]] = {}
    for c in rec.rows:
        if not c["variant"].endswith("_ceiling"):
            continue
        family = c["variant"].removesuffix("_ceiling")
        for r in rec.rows:
            v = r["variant"]
            if (v.endswith("_ceiling") or v.startswith("host_") or family not in v.split("_")
                    or tuple(r["shape"]) != tuple(c["shape"]) or r["dtype"] != c["dtype"]):
                continue
            if r["seconds"] < c["seconds"]:
                out.setdefault(c["variant"], []).append(
                    f"{v} at {tuple(r['shape'])}: {r['seconds'] * 1e6:,.0f} us < "
                    f"{c['seconds'] * 1e6:,.0f} us")
    return out


def test_the_bound_rule_finds_what_the_chapter_used_to_say():
    assert BOUND.search("Chapter 8's kernel came with a ceiling. No kernel built on that main "
                        "loop can beat it.")
    assert not BOUND.search("It is a reference for the loop's speed, not a bound.")


def test_a_ceiling_a_kernel_beats_is_not_stated_as_a_bound():
    from book import data

    rec = data.load("h100")
    beaten = beaten_ceilings(rec)
    # the record holds what the reader pass saw: the wgmma loop passed by a kernel on it
    assert "wgmma_ceiling" in beaten, "the record no longer beats its wgmma ceiling: revisit"
    stated = [f"{p.name}: {s[:160]!r}" for p in (CH8, CH9, GLOSSARY)
              for s in sentences(markdown(p)) if "ceiling" in s.lower() and BOUND.search(s)]
    assert not stated, ("a ceiling stated as a bound while the record beats it "
                        f"({beaten}):\n" + "\n".join(stated))
    for p in (CH9, GLOSSARY):
        assert "not a bound" in markdown(p), f"{p.name} should say the loop is not a bound"


# -- M1: the tensor pipe, not the issue slots --------------------------------------------------

def test_chapter_9_teaches_the_pipe_rate_from_chapter_8s_profile():
    ch9 = re.sub(r"\s+", " ", markdown(CH9))
    assert "{ref}`the profile's table <tensorcore-profile>`" in ch9
    for wrong in ("cannot issue enough", "so far fewer instructions pass through the issue "
                  "slots for the same flops:"):
        assert wrong not in ch9, wrong
    assert "tensor pipe active" in ch9
    # the label sits above the section whose cell reads the ncu record
    nb = json.loads(CH8.read_text(encoding="utf-8"))
    ids = [c.get("id") for c in nb["cells"]]
    label = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
                 and "(tensorcore-profile)=" in "".join(c["source"]))
    profile = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                   and "ncu/tensorcore_h100" in "".join(c["source"]))
    headings = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
                and re.search(r"^## ", "".join(c["source"]), re.M)]
    assert label < profile and not [h for h in headings if label < h <= profile], ids
    assert "tensor pipe active" in markdown(CH8)


# -- M4: only wgmma is Hopper's alone ----------------------------------------------------------

ONLY = re.compile(r"(?i)\bonly\b[^.]*\b(?:Hopper|sm_90a)\b|\b(?:Hopper|sm_90a)\b[^.]*\bonly\b")


@pytest.mark.parametrize("path", [CH8, CH9, GLOSSARY], ids=lambda p: p.name)
def test_tma_and_setmaxnreg_are_not_said_to_be_hopper_only(path):
    wrong = [s[:200] for s in sentences(markdown(path)) if ONLY.search(s)
             and re.search(r"`?(?:TMA|setmaxnreg)`?", s)
             and not re.search(r"(?i)Blackwell", s)]
    assert not wrong, wrong


def test_the_rule_finds_the_old_note():
    old = ("`wgmma`, TMA and `setmaxnreg` exist only on Hopper GPUs (H100, H200: compute "
           "capability 9.0, compiled for `sm_90a`).")
    assert ONLY.search(old) and re.search("TMA", old)


# -- M5: the epilogue rule's regime --------------------------------------------------------------

def test_the_epilogue_rule_states_its_regime_and_decode_form():
    text = markdown(CH9)
    rule = text[text.index("## When the epilogue pays"):text.index("## Every T a model sees")]
    assert r"\frac{1.5\,T}{d}" in rule and "P/BW" in rule
    assert re.search(r"(?i)at prefill", rule) and re.search(r"(?i)at decode", rule)


# -- M6, L9: counts typed in the prose are the library's ----------------------------------------

def test_the_stream_k_example_is_the_librarys_split():
    from book.kernels.gemms import stream_k

    d, h, sms = 4096, 14336, 132  # the chapter's shapes; the H100's SMs (its text says 132)
    mt, nk = h // 64, d // 64
    shared, whole = stream_k.split(mt, nk, sms)
    lengths = {e - s for s, e in stream_k.ranges(shared * nk, sms)}
    text = re.sub(r"\s+", " ", markdown(CH9))
    said = (f"{mt} row tiles of {nk} k-blocks for {sms} blocks: one whole tile each leaves "
            f"{shared} tiles over, and their {shared} × {nk} = {shared * nk:,} steps are cut "
            f"into {sms} equal, contiguous ranges of {min(lengths)} or {max(lengths)} k-blocks")
    assert whole == 1 and said in text, said
    assert f"14336 / 128 = {h // 128} of them for the H100's {sms} SMs" in text


def test_the_t512_wave_count_is_the_tiles():
    from book.kernels.gemms.wgmma_gemm import TILE

    T, h, sms = 512, 14336, 132
    tiles = (T // TILE.bm) * (h // TILE.bn)
    text = re.sub(r"\s+", " ", markdown(CH9))
    said = (f"{T} / {TILE.bm} × {h} / {TILE.bn} = {tiles} tiles for {sms} SMs, "
            f"{tiles / sms:.2f} waves")
    assert said in text, said
