"""book.saving: chapter 7's saving breakdown never draws a difference within noise as a saving."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from book import data, saving
from book.roofline import OKABE_ITO as OI


def _row(ms, spread_ms):
    s = ms * 1e-3
    return {"seconds": s, "p10_s": s - spread_ms * 5e-4, "p90_s": s + spread_ms * 5e-4}


def _rows(unf, dual, ident, act, spread_ms=0.01):
    return {"unf": _row(unf, spread_ms), "dual": _row(dual, spread_ms),
            "ident": _row(ident, spread_ms), "act": _row(act, spread_ms)}


def _by_colour(ps):
    return {p.colour: p for p in ps}


def test_a_difference_inside_the_spread_is_within_noise_not_a_saving():
    ps = _by_colour(saving.parts(_rows(unf=3.0, dual=2.5, ident=2.505, act=0.1)))
    epi = ps[OI["orange"]]  # SwiGLU 0.005 ms faster than the control, spread 0.01 ms
    assert epi.within_noise and epi.text() == "within noise (± 0.010 ms)"
    # a real saving, far outside the spread, is labelled as one
    assert not ps[OI["vermillion"]].within_noise and ps[OI["vermillion"]].text() == "+0.100 ms"


def test_an_epilogue_that_beats_its_control_is_noise_of_that_size():
    # the chapter's case: SwiGLU 0.039 ms faster than identity, beyond one run's spread; more
    # arithmetic cannot save time, so the difference is the noise of the comparison
    ps = _by_colour(saving.parts(_rows(unf=3.345, dual=2.817, ident=2.856, act=0.032, spread_ms=0.005)))
    epi = ps[OI["orange"]]
    assert epi.within_noise and epi.text() == "within noise (± 0.039 ms)"
    # a real cost beyond the spread stays a (negative) saving
    ps = _by_colour(saving.parts(_rows(unf=3.0, dual=2.6, ident=2.5, act=0.1)))
    assert not ps[OI["orange"]].within_noise and ps[OI["orange"]].text() == "-0.100 ms"
    # the whole gap is the sum of the three parts
    p = saving.parts(_rows(unf=3.0, dual=2.6, ident=2.5, act=0.1))
    assert abs(p[0].saved_s + p[1].saved_s + p[2].saved_s - p[3].saved_s) < 1e-12


def test_the_figure_draws_noise_as_a_grey_band_labelled_with_its_spread():
    ps = saving.parts(_rows(unf=3.0, dual=2.5, ident=2.505, act=0.1))
    fig, ax = plt.subplots()
    saving.draw(ps, ax)
    texts = [t.get_text().strip() for t in ax.texts]
    assert "within noise (± 0.010 ms)" in texts and "+0.100 ms" in texts
    orange = matplotlib.colors.to_rgba(OI["orange"])
    assert not [b for b in ax.patches if b.get_facecolor() == orange], "noise drawn as a bar"
    band = [b for b in ax.patches if b.get_hatch() == "///"]
    assert len(band) == 1 and abs(band[0].get_width() - 0.02) < 1e-9  # ± 0.010 ms
    plt.close(fig)


def test_the_recorded_h100_split_credits_the_epilogue_with_no_saving():
    res = data.load("h100")
    shapes = sorted({tuple(r["shape"]) for r in res.rows if r["variant"] == "numba_dual_gemm"})
    assert shapes
    for s in shapes:
        rows = saving.times(res, s)
        assert rows is not None, s
        epi = _by_colour(saving.parts(rows))[OI["orange"]]
        assert epi.within_noise or epi.saved_s < 0, (s, epi)


def test_the_dual_structure_difference_says_which_way():
    """Issue 30: "dual structure vs two GEMMs: +0.129 ms" did not say which was faster."""
    f = saving.structure_difference
    assert f(1.29e-4, 2e-5) == "the two separate GEMMs take 0.129 ms longer than the dual GEMM"
    assert f(-3e-4, 2e-5) == "the dual GEMM takes 0.300 ms longer than the two separate GEMMs"
    assert "no measurable difference" in f(1e-5, 2e-5) and "-" not in f(-1e-5, 2e-5)
