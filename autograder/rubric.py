"""A lab's rubric (autograder/rubrics/LAB.toml) and the scoring rule that `check` and `grade`
both apply: correctness points per case, performance points linear in a fraction between
``zero_at`` and ``full_at``, nothing for a result that is not verified or is faster than
physically possible.

The fraction's basis is the rubric's ``[performance] basis``:

- ``"master"`` (the default, every shipped rubric): the lab's master solution
  (``solutions/LAB.ipynb``) timed by the grader on the same GPU in the same run, paired
  window by window with the submission (autograder/timing.py). A copy of the master scores
  1.0 on any GPU, so a line drawn in these units is the same line on every GPU.
- ``"reference"`` (the rule before issue 18): the lab's torch reference (``torch.add``, strict
  cuBLAS) timed once per GPU per run. The master itself sits at different fractions of it on
  different GPUs (higher on the H100 than on an H200, records/grader/), so the same line meant
  a different grade on each. The torch fraction is still measured and shown, and the
  physical-limit flag still rests on it and on the device copy.
"""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib
    except ModuleNotFoundError as e:
        raise SystemExit("reading rubrics needs Python 3.11+ (tomllib) or `pip install tomli`") from e

HERE = Path(__file__).resolve().parent
NOT_MEASURED_NO_GPU = "not measured: no GPU (kernels ran in Numba's CUDA simulator, which cannot time)"
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
BASES = ("master", "reference")
# Fractions within this distance of zero_at or full_at are timed again, alone and with more
# windows, before they are scored (rubric key `remeasure_band` overrides it): paired identical
# copies agree to about 2% of each other, so a fraction this close to a line could fall on
# either side of it by noise alone.
REMEASURE_BAND = 0.03
UNVERIFIED = ("the replayed launches did not leave the right result in every output of every timed "
              "window (or stored past its ends): the kernel skipped or cached work, or does not "
              "compute the answer on its own")


def load_rubric(lab: str, path=None) -> dict:
    p = Path(path) if path else HERE / "rubrics" / f"{lab}.toml"
    try:
        with open(p, "rb") as f:
            r = tomllib.load(f)
    except FileNotFoundError:
        raise SystemExit(f"no rubric for {lab}: expected {p}") from None
    except tomllib.TOMLDecodeError as e:
        raise SystemExit(f"rubric {p} is not valid TOML: {e}") from None
    if r.get("lab") != lab:
        raise SystemExit(f"rubric {p} is for lab {r.get('lab')!r}, not {lab!r}")
    vis = r.setdefault("correctness", {}).setdefault("hidden_visibility", "after_due_date")
    if vis not in VISIBILITIES:
        raise SystemExit(f"rubric {p}: hidden_visibility must be one of {', '.join(VISIBILITIES)}, "
                         f"not {vis!r}")
    if "performance" in r:
        basis = r["performance"].setdefault("basis", "master")
        if basis not in BASES:
            raise SystemExit(f"rubric {p}: [performance] basis must be one of {', '.join(BASES)}, "
                             f"not {basis!r}")
    return r


def case_points(case: dict, correctness: dict):
    """What one correctness case is worth under the rubric's [correctness] section."""
    return correctness["public_points"] if case["visibility"] == "public" else correctness["hidden_points"]


def course_points(lab: str, rubric_path=None) -> dict:
    """A lab's points as every grader counts them (the GPU's, the simulator's, Gradescope's):
    {'correctness', 'performance', 'total'}. Where nothing can be timed the performance
    points are pending, never dropped from the total."""
    import numpy as np

    from . import labs

    rub = load_rubric(lab, rubric_path)
    cor = rub["correctness"]
    cases = labs.get(lab).cases(np.random.default_rng(0), True, cor)
    correctness = float(sum(case_points(c, cor) for c in cases))
    perf = float(rub.get("performance", {}).get("points", 0))
    return {"correctness": correctness, "performance": perf, "total": correctness + perf}


def basis_words(perf: dict) -> str:
    """What a fraction is a fraction of, in the words feedback uses."""
    if perf.get("basis", "master") == "master":
        return "the lab's reference solution measured on this GPU in this run"
    return "the reference measured on this GPU in this run"


def near_boundary(fraction, perf: dict) -> str | None:
    """``"zero_at"`` or ``"full_at"`` when ``fraction`` lies within the re-measure band of that
    scoring line (where noise alone could move the points), else None."""
    if fraction is None:
        return None
    band = float(perf.get("remeasure_band", REMEASURE_BAND))
    for line in ("full_at", "zero_at"):
        if abs(fraction - perf[line]) <= band:
            return line
    return None


def performance_points(fraction: float, perf: dict) -> float:
    """Linear between zero_at (0 points) and full_at (all points) of the reference."""
    zero, full = perf["zero_at"], perf["full_at"]
    return round(perf["points"] * min(1.0, max(0.0, (fraction - zero) / (full - zero))), 2)


def score_performance(metric, perf, *, per_s, bandwidth, reference_s, copy_bandwidth, verified,
                      master_s=None, reference_name="strict-f32 cuBLAS"):
    """Points from the grader's replay timing. ``fraction`` is ``master_s / per_s`` under
    ``basis = "master"`` (``master_s``: the master's time from the windows paired with these),
    ``reference_s / per_s`` under ``basis = "reference"``; ``fraction_of_reference`` is always
    the latter (information, and the GEMM's plausibility bound). Flags (any one gives 0
    points): the replayed outputs not verified; faster than physically possible (bandwidth
    above physical_limit x the device-copy bandwidth measured in this run; for GEMMs, above
    physical_limit x cuBLAS: ``reference_name``, the lab's words for its reference)."""
    basis = perf.get("basis", "master")
    if basis == "master" and master_s is None:
        raise ValueError("basis = 'master' needs the master's time (master_s)")
    of_ref = reference_s / per_s
    frac = master_s / per_s if basis == "master" else of_ref
    flags = []
    if not verified:
        flags.append(UNVERIFIED)
    if metric == "bandwidth" and bandwidth > perf["physical_limit"] * copy_bandwidth:
        flags.append(f"faster than physically possible: {bandwidth / 1e12:.2f} TB/s effective is above "
                     f"{perf['physical_limit']}x the device-copy bandwidth measured in this run "
                     f"({copy_bandwidth / 1e12:.2f} TB/s)")
    if metric == "flops" and of_ref > perf["physical_limit"]:
        flags.append(f"faster than plausible: {of_ref:.2f}x the {reference_name} reference "
                     f"(limit {perf['physical_limit']}x)")
    pts = 0.0 if flags else performance_points(frac, perf)
    return {"fraction": frac, "fraction_of_reference": of_ref, "basis": basis, "points": pts,
            "flags": flags}


# --------------------------------------------------------------------------- lines from a control
# Each lab's rubric names its "lesson not learned" control ([performance] control, by name): a
# correct solution that misses what the lab teaches (lab 2's two kernels, lab 5's two passes,
# ...), one of the submissions its lab module derives from the master. Its fraction of the
# master, measured by the grader on a GPU (benchmarks/lesson_controls_probe.py,
# records/labs/lesson_controls_<gpu>.json), sets the lines (until then the rubric's are
# provisional, the template's): full marks at 80% of the master or
# halfway from the control to the master, whichever is higher (the master keeps a margin of at
# least 1/0.9 above full marks), and zero_at where the control earns CONTROL_SHARE of the
# points. A control faster than CONTROL_MAX of the master does not show the lesson in speed on
# that GPU: no lines are suggested, and the rubric must name another control.
CONTROL_SHARE = 0.25
CONTROL_MAX = 0.80
FULL_AT_FLOOR = 0.80


def _up2(x: float) -> float:
    """Rounded up to two decimals (a line a hair above the exact one, never below)."""
    import math

    return math.ceil(round(x * 100, 6)) / 100


def lines_from_control(control: float) -> dict | None:
    """{"zero_at", "full_at"} (master units) from the control's measured fraction of the
    master, or None where the control is too close to the master (above CONTROL_MAX) to
    grade the lesson by speed. Both lines are rounded up to two decimals, so the control
    earns at most CONTROL_SHARE of the points."""
    if not 0 < control <= CONTROL_MAX:
        return None
    full = _up2(max(FULL_AT_FLOOR, (1 + control) / 2))
    # points(control) = (control - zero) / (full - zero) = CONTROL_SHARE
    zero = _up2(max(0.0, control - CONTROL_SHARE / (1 - CONTROL_SHARE) * (full - control)))
    return {"zero_at": zero, "full_at": full}
