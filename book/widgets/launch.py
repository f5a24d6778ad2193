"""Launch-overhead explorer: a fused SwiGLU's time against its size,
t(n) = max(launch overhead, bytes / bandwidth), and where it becomes overhead-bound."""

from __future__ import annotations

import anywidget
import traitlets as t

from ..dtypes import ITEMSIZE
from ..dtypes import name as dtype_name
from .. import specs, traffic
from . import _assets, _data

#: used when book/data holds no launch-overhead measurement; said so on the widget
ASSUMED_OVERHEAD_S = 10e-6


class LaunchExplorer(anywidget.AnyWidget):
    """The launch-overhead explorer widget (build it with :func:`book.widgets.launch_explorer`)."""

    _esm = _assets.esm("launch.js")
    _css = _assets.css()

    dtypes = t.Dict(dict(ITEMSIZE)).tag(sync=True)
    flops_per_element = t.Float(float(traffic.FLOPS_PER_ELEMENT)).tag(sync=True)
    points = t.List().tag(sync=True)
    presets = t.List().tag(sync=True)
    data_note = t.Unicode(_data.NO_DATA).tag(sync=True)
    overhead_s = t.Float(ASSUMED_OVERHEAD_S).tag(sync=True)
    bandwidth = t.Float(specs.GPU_SPECS["H100-SXM"].memory_bandwidth).tag(sync=True)
    dtype = t.Unicode("float32").tag(sync=True)
    T = t.Int(1).tag(sync=True)
    h = t.Int(18944).tag(sync=True)

    @t.validate("T", "h")
    def _positive(self, proposal):
        return _data.positive_int(proposal)

    @t.validate("overhead_s", "bandwidth")
    def _positive_float(self, proposal):
        v = proposal["value"]
        if not v > 0:
            raise t.TraitError(f"{proposal['trait'].name} must be positive, got {v}")
        return v

    @t.validate("dtype")
    def _known_dtype(self, proposal):
        return dtype_name(proposal["value"])

    def bytes(self, n: int | None = None) -> int:
        """Bytes a fused SwiGLU moves for n output elements (default T*h): book.traffic."""
        if n is None:
            return traffic.activation(self.T, self.h, self.dtype, "fused").bytes
        return traffic.activation(1, n, self.dtype, "fused").bytes

    def time(self, n: int | None = None) -> float:
        """t(n) = max(overhead, bytes / bandwidth) in seconds."""
        return max(self.overhead_s, self.bytes(n) / self.bandwidth)

    def crossover(self) -> float:
        """Output elements below which the launch overhead dominates."""
        per_element = traffic.activation(1, 1, self.dtype, "fused").bytes
        return self.overhead_s * self.bandwidth / per_element


def launch_explorer(*, overhead_s: float | None = None, bandwidth: float | None = None,
                    gpu: str = "H100-SXM", dtype: str = "float32", T: int = 1, h: int = 18944,
                    data=None) -> LaunchExplorer:
    """Explore when a kernel is overhead-bound: time against size on log-log axes.

    The model is t(n) = max(launch overhead, bytes / bandwidth) for a fused SwiGLU with n = T*h
    outputs (bytes from book.traffic). Sliders set the overhead and the bandwidth; "set from"
    offers values measured in book/data (host launch overhead, best measured bandwidth) and the
    GPU's datasheet bandwidth. The readout gives the size below which a launch costs more than
    moving the data, and the time and effective bandwidth at T x h (default: one decode token,
    h = 18944). Measured fused-kernel times from book/data are drawn as points.

    Parameters
    ----------
    overhead_s : seconds per launch. Default: one call of a course kernel from Python as measured
        in book/data on ``gpu``, else an assumed 10 us (the note on the widget says which).
    bandwidth : bytes/s. Default: the best fused-kernel bandwidth measured in book/data on
        ``gpu`` for ``dtype``, else the datasheet peak of ``gpu``.
    gpu : a key of book.specs.GPU_SPECS; measurements (presets and points) come from book/data
        files recorded on that kind of GPU.

    Example::

        from book.widgets import launch_explorer
        w = launch_explorer(T=1, h=18944)
        w.crossover()       # elements below which the launch overhead dominates
    """
    if gpu not in specs.GPU_SPECS:
        raise ValueError(f"unknown GPU {gpu!r}: choose one of {list(specs.GPU_SPECS)}")
    spec = specs.GPU_SPECS[gpu]
    dtype = dtype_name(dtype)
    # only what was measured on this kind of GPU: an H100's launch costs say little about a T4
    measured = [p for p in _data.launch_presets(data) if p["gpu"] == gpu]
    points = [p for p in _data.launch_points(data) if p["gpu"] == gpu]
    presets = list(measured) + [{"kind": "bandwidth", "value": spec.memory_bandwidth, "dtype": None,
                                 "how": "datasheet",
                                 "label": f"bandwidth {spec.memory_bandwidth / 1e12:.3g} TB/s: "
                                          f"{gpu} datasheet peak",
                                 "short": f"bandwidth {spec.memory_bandwidth / 1e12:.3g} TB/s: "
                                          "datasheet peak"}]
    notes = []
    if overhead_s is None:
        # one call of a course kernel from Python (what a decode loop pays), in this dtype first
        ov = sorted((p for p in measured if p["kind"] == "overhead"),
                    key=lambda p: (p["dtype"] != dtype, p["how"] != "one call from Python"))
        if ov:
            overhead_s = ov[0]["value"]
            notes.append(f"Starting overhead: {ov[0]['label'].split(': ', 1)[1]}.")
        else:
            overhead_s = ASSUMED_OVERHEAD_S
            notes.append("Launch overhead not measured yet: the starting value is an assumption; "
                         "drag the slider.")
    if bandwidth is None:
        bws = [p for p in measured
               if p["kind"] == "bandwidth" and p["dtype"] == dtype and p["how"] == "best measured"]
        if bws:
            bandwidth = bws[0]["value"]
            notes.append(f"Starting bandwidth: {bws[0]['label'].split(': ', 1)[1]}.")
        else:
            bandwidth = spec.memory_bandwidth
            notes.append(f"Starting bandwidth: {gpu} datasheet peak.")
    summary = _data.summary(data)
    if not points and summary != _data.NO_DATA:
        summary = f"No measurements recorded on a {gpu}. " + summary.replace(
            "Measured points:", "book/data holds results from")
    w = LaunchExplorer(points=points, presets=presets,
                       data_note=" ".join(notes + [summary]))
    w.overhead_s, w.bandwidth, w.dtype, w.T, w.h = overhead_s, bandwidth, dtype, T, h
    return w
