"""Traffic explorer: T, h (and d) and a dtype in; transfers and bytes of each SwiGLU variant out."""

from __future__ import annotations

import anywidget
import traitlets as t

from ..dtypes import ITEMSIZE
from ..dtypes import name as dtype_name
from .. import traffic
from . import _assets, _data

SCOPES = ("activation", "mlp")


class TrafficExplorer(anywidget.AnyWidget):
    """The traffic explorer widget (build it with :func:`book.widgets.traffic_explorer`)."""

    _esm = _assets.esm("traffic.js")
    _css = _assets.css()

    dtypes = t.Dict(dict(ITEMSIZE)).tag(sync=True)
    flops_per_element = t.Float(float(traffic.FLOPS_PER_ELEMENT)).tag(sync=True)
    T = t.Int(4).tag(sync=True)
    h = t.Int(8).tag(sync=True)
    d = t.Int(4096).tag(sync=True)
    dtype = t.Unicode("float32").tag(sync=True)
    scope = t.Unicode("activation").tag(sync=True)

    @t.validate("T", "h", "d")
    def _positive(self, proposal):
        return _data.positive_int(proposal)

    @t.validate("dtype")
    def _known_dtype(self, proposal):
        return dtype_name(proposal["value"])

    @t.validate("scope")
    def _known_scope(self, proposal):
        if proposal["value"] not in SCOPES:
            raise t.TraitError(f"unknown scope {proposal['value']!r}: use one of {SCOPES}")
        return proposal["value"]

    def counts(self) -> dict[str, traffic.Traffic]:
        """book.traffic's counts for what the widget shows: variant -> Traffic."""
        if self.scope == "activation":
            return {v: traffic.activation(self.T, self.h, self.dtype, v)
                    for v in ("naive", "fused", "epilogue")}
        return {v: mlp_counts(self.T, self.d, self.h, self.dtype, v)
                for v in ("naive", "unfused", "epilogue")}


def mlp_counts(T, d, h, dtype, variant) -> traffic.Traffic:
    """book.traffic.mlp_up, plus "naive": its two GEMMs followed by the naive two-kernel
    activation (mlp_up("unfused") with the fused activation swapped for the naive one)."""
    if variant != "naive":
        return traffic.mlp_up(T, d, h, dtype, variant)
    unfused = traffic.mlp_up(T, d, h, dtype, "unfused")
    fused = traffic.activation(T, h, dtype, "fused")
    naive = traffic.activation(T, h, dtype, "naive")
    steps = unfused.breakdown[:-len(fused.breakdown)] + naive.breakdown
    transfers = unfused.transfers - fused.transfers + naive.transfers
    return traffic.Traffic(variant="naive", dtype=unfused.dtype, itemsize=unfused.itemsize,
                           transfers=transfers, bytes=transfers * unfused.itemsize,
                           flops=unfused.flops, breakdown=steps, shape=unfused.shape)


def traffic_explorer(T: int = 4, h: int = 8, *, dtype: str = "float32", d: int = 4096,
                     scope: str = "activation") -> TrafficExplorer:
    """Count the memory traffic of SwiGLU variants for any T, h and dtype.

    A table (transfers, transfers per output element, bytes, ratio to the cheapest) and stacked
    bars (inputs read, intermediates written and read back, output written) for:

    - scope="activation": the elementwise silu(gate) * up on [T, h]: naive (two kernels, 5Th),
      fused (3Th) and epilogue-fused in the up GEMM (2Th), as book.traffic.activation counts them.
    - scope="mlp": with the gate/up projections x[T, d] @ W[d, h]: two GEMMs + naive SwiGLU, two
      GEMMs + fused SwiGLU, one dual GEMM with SwiGLU in its epilogue (book.traffic.mlp_up).

    Drawn in the browser: it responds on the static book page with no kernel.

    Example::

        from book.widgets import traffic_explorer
        traffic_explorer(T=4, h=8)          # the hand count of chapter 1: 160, 96 and 64 transfers
        w = traffic_explorer(T=2048, h=8192, d=4096, scope="mlp", dtype="bfloat16")
        w.counts()["epilogue"].bytes        # the same numbers in Python
    """
    w = TrafficExplorer()
    w.T, w.h, w.d, w.dtype, w.scope = T, h, d, dtype, scope
    return w
