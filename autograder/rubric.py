"""A lab's rubric (autograder/rubrics/LAB.toml) and the scoring rule that `check` and `grade`
both apply: correctness points per case, performance points linear in the fraction of the
reference between ``zero_at`` and ``full_at``, nothing for a result that is not verified or is
faster than physically possible."""

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
UNVERIFIED = ("the replayed launches did not leave the right result in every output of every timed "
              "window: the kernel skipped or cached work, or does not compute the answer on its own")


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
    return r


def performance_points(fraction: float, perf: dict) -> float:
    """Linear between zero_at (0 points) and full_at (all points) of the reference."""
    zero, full = perf["zero_at"], perf["full_at"]
    return round(perf["points"] * min(1.0, max(0.0, (fraction - zero) / (full - zero))), 2)


def score_performance(metric, perf, *, per_s, bandwidth, reference_s, copy_bandwidth, verified):
    """Points from the grader's replay timing. Flags (any one gives 0 points): the replayed
    outputs not verified; faster than physically possible (bandwidth above physical_limit x
    the device-copy bandwidth measured in this run; for GEMMs, above physical_limit x cuBLAS)."""
    frac = reference_s / per_s
    flags = []
    if not verified:
        flags.append(UNVERIFIED)
    if metric == "bandwidth" and bandwidth > perf["physical_limit"] * copy_bandwidth:
        flags.append(f"faster than physically possible: {bandwidth / 1e12:.2f} TB/s effective is above "
                     f"{perf['physical_limit']}x the device-copy bandwidth measured in this run "
                     f"({copy_bandwidth / 1e12:.2f} TB/s)")
    if metric == "flops" and frac > perf["physical_limit"]:
        flags.append(f"faster than plausible: {frac:.2f}x the strict-f32 cuBLAS reference "
                     f"(limit {perf['physical_limit']}x)")
    pts = 0.0 if flags else performance_points(frac, perf)
    return {"fraction": frac, "points": pts, "flags": flags}
