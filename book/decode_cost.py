"""What a decode-size SwiGLU call costs, layer by layer and path by path, from one recorded run.

Chapter 6's decode section reads every figure it shows from here, and every host figure
here is a row of the one interleaved group the benchmark measures per shape and dtype
(``book.bench.host_timings``: the rows take turns, round after round, each with its median
and p10/p90), so no two figures of the section can come from different stretches of
different runs.

* :data:`LAYERS`: the layers of a call and the references beside them, in the order the
  chapter's figure draws them;
* :func:`layer_rows`: those rows for one dtype and shape, with their spread;
* :func:`call_rows`: the section's first table, host rows of that group beside the GPU
  rows of the same kernels (the host rows must come from one run, or it says which do not);
* :func:`paths`: the three ways to launch the same kernel (Numba's dispatcher through the
  wrapper, the cheap path of :mod:`book.kernels.host.fastcall`, a CUDA-graph replay) with host
  and GPU time per call;
* :func:`step_time`: what ``layers`` such calls take in one decode step, per path.
"""

from __future__ import annotations

DECODE = (1, 18944)

# (row, label, kind): "host" rows are host time per call from Python (one interleaved
# group); "gpu" rows are GPU time per call.
LAYERS = (
    ("launch_layer_checks", "wrapper's checks and flat views", "host"),
    ("launch_layer_conversion", "torch -> Numba views (cached)", "host"),
    ("launch_layer_conversion_uncached", "torch -> Numba views (each call)", "host"),
    ("launch_layer_prepared_launch", "prepared launch (launch_kernel)", "host"),
    ("launch_layer_raw_numba_launch", "Numba's own launch, kernel[grid, block]", "host"),
    ("launch_layer_wrapper_numba_arrays", "whole wrapper, Numba arrays", "host"),
    ("{v}_torch_call", "whole wrapper, torch tensors", "host"),
    ("launch_layer_fastcall", "cheap path (fastcall), torch tensors", "host"),
    ("launch_layer_torch_add", "torch.add", "host"),
    ("launch_layer_torch_eager", "torch eager F.silu(g) * u", "host"),
    ("launch_layer_torch_compile", "torch.compile'd F.silu(g) * u", "host"),
    ("launch_layer_graph_replay", "CUDA-graph replay (GPU time)", "gpu"),
)

# The section's first table: what a call costs the host (rows of the one host group, labelled
# as in LAYERS) against what the same work costs the GPU.
CALL_HOST = ("launch_layer_checks", "launch_layer_raw_numba_launch",
             "launch_layer_wrapper_numba_arrays", "{v}_torch_call", "launch_layer_fastcall",
             "launch_layer_torch_eager", "launch_layer_torch_compile")
CALL_GPU = (
    ("{v}", "the kernel (vec4; halves: half8), launches queued back to back"),
    ("torch_eager", "torch eager F.silu(g) * u, queued back to back"),
    ("torch_compile", "torch.compile'd F.silu(g) * u, queued back to back"),
    ("launch_layer_graph_replay", "the kernel in a CUDA-graph replay"),
    ("torch_eager_graph", "torch eager F.silu(g) * u in a CUDA-graph replay"),
)


def _run_of(results, row):
    p = row.get("provenance") or results.provenance
    return (p.get("date"), p.get("command"))


def call_rows(results, dtype, shape=DECODE):
    """``[(label, whose, row)]``: the first decode table for ``dtype``, ``whose`` "host" or
    "GPU". Every host row is a row of :data:`LAYERS` (the interleaved group), so the table
    and the layer figure show the same figure for the same call. Raises ValueError where
    the host rows come from more than one run: two stretches of host noise cannot be
    compared row against row (measure them together: ``--only`` with every
    ``launch_layer`` row, then merge)."""
    v = kernel_of(dtype)
    labels = {name.format(v=v): label for name, label, _kind in LAYERS}
    out = []
    for name in CALL_HOST:
        r = _row(results, name.format(v=v), dtype, shape)
        if r is not None:
            out.append((labels[name.format(v=v)], "host", r))
    runs = {_run_of(results, r) for _l, _w, r in out}
    if len(runs) > 1:
        names = ", ".join(f"{r['variant']} ({_run_of(results, r)[0]})" for _l, _w, r in out)
        raise ValueError(f"the {dtype} host rows at {tuple(shape)} come from {len(runs)} runs "
                         f"({names}): re-measure them as one group with python -m book.bench "
                         "--only 'launch_layer|_torch_call$' and merge the rows")
    for name, label in CALL_GPU:
        r = _row(results, name.format(v=v), dtype, shape)
        if r is not None:
            out.append((label, "GPU", r))
    return out


# The three launch paths of one kernel: (key, label, host row or None, GPU row)
PATHS = (
    ("dispatcher", "wrapper through Numba's dispatcher", "{v}_torch_call", "{v}"),
    ("fastcall", "cheap path (book.kernels.host.fastcall)", "launch_layer_fastcall", "{v}"),
    ("graph", "CUDA-graph replay", None, "launch_layer_graph_replay"),
)


def kernel_of(dtype):
    """The course kernel the decode rows launch for ``dtype`` (its widest variant)."""
    return "vec4" if str(dtype) == "float32" else "half8"


def _row(results, variant, dtype, shape):
    rows = results.select(variant=variant, dtype=dtype, shape=shape)
    return rows[0] if rows else None


def layer_rows(results, dtype, shape=DECODE):
    """``[(label, kind, row)]`` for the rows of :data:`LAYERS` this record has."""
    v = kernel_of(dtype)
    out = []
    for variant, label, kind in LAYERS:
        r = _row(results, variant.format(v=v), dtype, shape)
        if r is not None:
            out.append((label, kind, r))
    return out


def paths(results, dtype, shape=DECODE):
    """``{key: {"label", "host_s", "host_p10_s", "host_p90_s", "gpu_s"}}`` for the paths
    whose rows this record has. The kernel's GPU time is its own row (``vec4`` or
    ``half8`` at ``shape``: the GPU kept busy, no host in the way); a graph replay has no
    host time per call (one driver call replays every launch)."""
    v = kernel_of(dtype)
    out = {}
    for key, label, host_row, gpu_row in PATHS:
        gpu = _row(results, gpu_row.format(v=v), dtype, shape)
        host = _row(results, host_row.format(v=v), dtype, shape) if host_row else None
        if gpu is None or (host_row and host is None):
            continue
        out[key] = {"label": label, "gpu_s": gpu["seconds"],
                    "host_s": host["seconds"] if host else None,
                    "host_p10_s": host.get("p10_s") if host else None,
                    "host_p90_s": host.get("p90_s") if host else None}
    return out


def step_time(path, layers=32):
    """Seconds for ``layers`` decode-size calls in a row on one path (a :func:`paths` entry).

    From Python, the host enqueues one call while the GPU runs the one before: whichever
    is slower per call sets the pace, ``layers x max(host, GPU)``. A graph replay has no
    host per call: ``layers x GPU time per replayed call``."""
    if layers < 1:
        raise ValueError(f"layers must be at least 1, got {layers}")
    per = path["gpu_s"] if path["host_s"] is None else max(path["host_s"], path["gpu_s"])
    return layers * per


def sources(results, rows):
    """One line per run the given rows come from: a merged row carries its own run's
    provenance (``python -m book.bench.merge``), the others the record's; each command
    without the device machine's paths."""
    from book.provenance import without_paths

    seen = []
    for r in rows:
        p = r.get("provenance") or results.provenance
        line = f"{p.get('gpu')}, {p.get('date')}, commit {(p.get('commit') or '?')[:8]}: {without_paths(p.get('command'))}"
        if line not in seen:
            seen.append(line)
    return seen
