"""Where the dual GEMM's saving comes from: the measured gap taken apart with its control.

Chapter 7 compares the unfused MLP-up (two GEMMs, then the activation kernel) with the dual GEMM
whose epilogue applies SwiGLU, and times a control: the same dual GEMM with an identity epilogue.
Three differences of recorded rows take the whole gap apart (:func:`parts`), and each is a
difference of noisy medians. A difference no larger than the measured spread of the rows it
comes from (:func:`spread`: the widest p10-p90 range among them) is *within noise*: it is drawn
and labelled as such, with the spread (:func:`draw`), never as a saving or a cost.

One part measures a cost that cannot be negative: the activation in the epilogue (the SwiGLU
epilogue does all the identity epilogue does, and more arithmetic). When the SwiGLU kernel
nevertheless ran faster than its control, that difference is drift between the two runs, beyond
one run's p10-p90 range; it is the noise of this comparison, so the part is within noise with the
difference itself as its spread (``Part.cost_only``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .roofline import OKABE_ITO as OI

__all__ = ["Part", "spread", "epilogue_cost", "structure_difference", "times", "parts", "draw"]


def spread(*rows) -> float:
    """The widest p10-p90 range (s) among recorded rows: the noise a difference of their
    medians has to exceed before it says anything."""
    return max(r["p90_s"] - r["p10_s"] for r in rows)


def epilogue_cost(diff: float, noise: float) -> str:
    """SwiGLU epilogue minus identity epilogue (s), in words right at either sign."""
    if abs(diff) <= noise:
        return (f"none measurable ({abs(diff) * 1e3:.3f} ms apart, within the spread, "
                f"{noise * 1e3:.3f} ms)")
    if diff < 0:
        return (f"none measurable (the SwiGLU epilogue ran {-diff * 1e3:.3f} ms faster than its "
                "control: more arithmetic cannot save time, so that is the noise between the "
                "two runs)")
    return f"{diff * 1e3:.3f} ms"


def structure_difference(diff: float, noise: float) -> str:
    """Unfused - activation - identity (s): the two separate GEMMs against the dual GEMM's
    structure, in words that say which way, or within the spread."""
    if abs(diff) <= noise:
        return (f"no measurable difference ({abs(diff) * 1e3:.3f} ms apart, within the spread, "
                f"{noise * 1e3:.3f} ms)")
    if diff > 0:
        return f"the two separate GEMMs take {diff * 1e3:.3f} ms longer than the dual GEMM"
    return f"the dual GEMM takes {-diff * 1e3:.3f} ms longer than the two separate GEMMs"


@dataclass(frozen=True)
class Part:
    """One part of the gap: ``saved_s`` > 0 means the dual GEMM is faster by that much."""

    label: str
    saved_s: float
    spread_s: float  # the spread of the rows this difference comes from
    colour: str
    cost_only: bool = False  # measures a cost: a "saving" (saved_s > 0) can only be noise

    @property
    def noise_s(self) -> float:
        """The noise of this difference: the rows' spread, or, for a cost that came out as a
        saving, that saving (the two runs drifted apart by at least that much)."""
        return max(self.spread_s, self.saved_s) if self.cost_only else self.spread_s

    @property
    def within_noise(self) -> bool:
        return abs(self.saved_s) <= self.noise_s

    def text(self) -> str:
        """Its label on the figure: the saving in ms, or "within noise (± spread)"."""
        if self.within_noise:
            return f"within noise (± {self.noise_s * 1e3:.3f} ms)"
        return f"{self.saved_s * 1e3:+.3f} ms"


def times(results, shape, dtype: str = "float32") -> dict | None:
    """The four recorded rows at ``shape`` = (T, d, h): ``unf`` (two GEMMs + activation),
    ``dual`` (SwiGLU epilogue), ``ident`` (identity epilogue, the control), ``act`` (the
    activation kernel alone, at (T, h)); None when the record lacks one of them."""
    T, _, h = shape

    def row(variant, s):
        try:
            return results.find(variant, dtype, tuple(s))
        except KeyError:
            return None

    got = {"unf": row("numba_unfused", shape), "dual": row("numba_dual_gemm", shape),
           "ident": row("numba_dual_gemm_identity", shape), "act": row("vec4_swiglu_only", (T, h))}
    return got if all(got.values()) else None


def parts(rows: dict) -> list[Part]:
    """The whole gap (unfused - dual) and the three parts it is the sum of, from :func:`times`."""
    t = {k: r["seconds"] for k, r in rows.items()}
    unf, dual, ident, act = rows["unf"], rows["dual"], rows["ident"], rows["act"]
    return [
        Part("activation kernel\nremoved", t["act"], spread(act), OI["vermillion"]),
        Part("activation in the\nepilogue (SwiGLU -\nidentity)", -(t["dual"] - t["ident"]),
             spread(dual, ident), OI["orange"], cost_only=True),
        Part("two GEMMs -> dual\nGEMM (identity)", t["unf"] - t["act"] - t["ident"],
             spread(unf, act, ident), OI["blue"]),
        Part("unfused - dual\n(the whole gap)", t["unf"] - t["dual"], spread(unf, dual),
             OI["black"]),
    ]


def draw(ps: list[Part], ax, title: str = "") -> None:
    """Horizontal bars in ms saved. A part within noise gets no bar: a grey band of its spread
    around zero, labelled "within noise (± spread)"."""
    import numpy as np

    y = np.arange(len(ps))
    for i, p in enumerate(ps):
        ms, band = p.saved_s * 1e3, p.noise_s * 1e3
        if p.within_noise:
            ax.barh(i, 2 * band, left=-band, height=0.5, color="0.85", hatch="///",
                    edgecolor="0.55", lw=0)
            ax.text(band, i, f" {p.text()}", ha="left", va="center", fontsize=8)
        else:
            ax.barh(i, ms, color=p.colour)
            ax.text(ms, i, f" {p.text()} ", ha="left" if ms >= 0 else "right", va="center",
                    fontsize=8)
    ax.set_yticks(y, [p.label for p in ps], fontsize=8)
    ax.axvline(0, color=OI["black"], lw=0.8)
    ends = [v for p in ps for v in ((-p.noise_s, p.noise_s) if p.within_noise
                                    else (0.0, p.saved_s))]
    lo, hi = min(0.0, *ends) * 1e3, max(ends) * 1e3
    ax.set_xlim(lo - 0.25 * (hi - lo), hi + 0.9 * (hi - lo))
    ax.set_xlabel("ms saved by the dual GEMM", fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
