"""Roofline explorer: pick a GPU, a dtype, a kernel and sizes; see the intensity, the binding roof
and the predicted time, beside the course's measured points."""

from __future__ import annotations

import anywidget
import traitlets as t

from ..dtypes import ITEMSIZE
from ..dtypes import name as dtype_name
from .. import roofline, specs, traffic
from . import _assets, _data

#: kernels the explorer knows: key -> (label, kind). "elementwise" uses book.traffic.activation,
#: "gemm" uses book.traffic.mlp_up (gate/up projections plus the activation).
VARIANTS = {
    "naive": ("naive SwiGLU (two kernels)", "elementwise"),
    "fused": ("fused SwiGLU (one kernel)", "elementwise"),
    "unfused": ("2 GEMMs + fused SwiGLU", "gemm"),
    "epilogue": ("dual GEMM, SwiGLU in the epilogue", "gemm"),
}

#: compute peaks: key (as book.roofline.predict takes it) -> (label, GPUSpec attribute).
#: "auto" is the roof where the math runs (book.roofline.default_precision(dtype, kind)): an
#: elementwise kernel computes on the FP32 CUDA cores in every dtype (it widens halves to
#: float32); a GEMM in a half type runs on the tensor cores.
PRECISIONS = {
    "fp32": ("FP32 CUDA cores", "fp32"),
    "tf32": ("TF32 tensor cores", "tf32_tensor"),
    "fp16": ("FP16 tensor cores", "fp16_tensor"),
    "bf16": ("BF16 tensor cores", "bf16_tensor"),
}

#: standard shapes of the course's benchmark (issue 3) and Qwen-like MLP sizes
PRESETS = [
    {"label": "decode 1 × 18944", "T": 1, "h": 18944},
    {"label": "prefill 128 × 18944", "T": 128, "h": 18944},
    {"label": "2048 × 8192", "T": 2048, "h": 8192},
    {"label": "8192 × 14336", "T": 8192, "h": 14336},
    {"label": "GEMM shape T=2048, d=4096, h=8192", "T": 2048, "h": 8192, "d": 4096},
    {"label": "GEMM shape T=512, d=4096, h=14336", "T": 512, "h": 14336, "d": 4096},
]

THIS_GPU = "this GPU"


def _spec_dict(key: str, spec) -> dict:
    return {
        "label": key, "name": spec.name, "match": key,
        "memory_bandwidth": spec.memory_bandwidth, "fp32": spec.fp32,
        "tf32_tensor": spec.tf32_tensor, "fp16_tensor": spec.fp16_tensor,
        "bf16_tensor": spec.bf16_tensor, "memory_gb": spec.memory_gb,
        "source": spec.source, "source_name": "datasheet", "note": spec.note,
    }


def _this_gpu(info) -> dict | None:
    """A preset for the GPU this kernel runs on: bandwidth from its attributes, compute peaks from
    the table entry its name matches (None when the name matches nothing)."""
    if info is None or getattr(info, "simulated", True) or not info.peak_bandwidth:
        return None
    key = specs.key_of(info.name)
    spec = specs.GPU_SPECS.get(key) if key else None
    entry = {
        "label": f"{THIS_GPU}: {info.name}", "name": info.name, "match": key,
        "memory_bandwidth": float(info.peak_bandwidth), "memory_gb": None,
        "fp32": None, "tf32_tensor": None, "fp16_tensor": None, "bf16_tensor": None,
        "source": None,
        "note": (f"{info.name}: bandwidth from the device (2 x memory clock x bus width)"
                 + (f", compute peaks of the {key} entry." if spec else
                    "; its compute peaks are not in book.specs, so only the memory roof is drawn.")),
    }
    if spec:
        for _, attr in PRECISIONS.values():
            entry[attr] = getattr(spec, attr)
    return entry


class RooflineExplorer(anywidget.AnyWidget):
    """The roofline explorer widget (build it with :func:`book.widgets.roofline_explorer`)."""

    _esm = _assets.esm("roofline.js")
    _css = _assets.css()

    # data passed in (the front-end needs no Python)
    gpus = t.Dict().tag(sync=True)
    gpu_order = t.List(t.Unicode()).tag(sync=True)
    dtypes = t.Dict(dict(ITEMSIZE)).tag(sync=True)
    variants = t.List([{"key": k, "label": v[0], "kind": v[1]} for k, v in VARIANTS.items()]).tag(sync=True)
    precisions = t.List([[k, label, attr] for k, (label, attr) in PRECISIONS.items()]).tag(sync=True)
    default_precisions = t.Dict({kind: {dt: roofline.default_precision(dt, kind)
                                        for dt in ITEMSIZE}
                                 for kind in ("elementwise", "gemm")}).tag(sync=True)
    presets = t.List(PRESETS).tag(sync=True)
    flops_per_element = t.Float(float(traffic.FLOPS_PER_ELEMENT)).tag(sync=True)
    points = t.List().tag(sync=True)
    data_note = t.Unicode(_data.NO_DATA).tag(sync=True)
    # the state a reader changes
    gpu = t.Unicode("H100-SXM").tag(sync=True)
    dtype = t.Unicode("float32").tag(sync=True)
    variant = t.Unicode("fused").tag(sync=True)
    precision = t.Unicode("auto").tag(sync=True)
    T = t.Int(8192).tag(sync=True)
    h = t.Int(14336).tag(sync=True)
    d = t.Int(4096).tag(sync=True)

    @t.validate("T", "h", "d")
    def _positive(self, proposal):
        return _data.positive_int(proposal)

    @t.validate("gpu")
    def _known_gpu(self, proposal):
        v = proposal["value"]
        if self.gpus and v not in self.gpus:
            raise t.TraitError(f"unknown GPU {v!r}: choose one of {list(self.gpus)}")
        return v

    @t.validate("dtype")
    def _known_dtype(self, proposal):
        return dtype_name(proposal["value"])

    @t.validate("variant")
    def _known_variant(self, proposal):
        v = proposal["value"]
        if v not in VARIANTS:
            raise t.TraitError(f"unknown kernel {v!r}: choose one of {list(VARIANTS)}")
        return v

    @t.validate("precision")
    def _known_precision(self, proposal):
        v = proposal["value"]
        if v != "auto" and v not in PRECISIONS:
            raise t.TraitError(f"unknown compute peak {v!r}: choose 'auto' or one of {list(PRECISIONS)}")
        return v

    # ---- the same numbers in Python (book.traffic / book.roofline), for notebooks and tests
    def traffic(self) -> traffic.Traffic:
        """book.traffic's count for the current kernel and sizes."""
        if VARIANTS[self.variant][1] == "elementwise":
            return traffic.activation(self.T, self.h, self.dtype, self.variant)
        return traffic.mlp_up(self.T, self.d, self.h, self.dtype, self.variant)

    def spec(self):
        """The selected GPU as a book.specs.GPUSpec (for "this GPU": the device's bandwidth)."""
        g = self.gpus[self.gpu]
        if g.get("match") == self.gpu and self.gpu in specs.GPU_SPECS:
            return specs.GPU_SPECS[self.gpu]
        return specs.GPUSpec(
            name=g["name"], memory_bandwidth=g["memory_bandwidth"], fp32=g["fp32"],
            fp16_tensor=g["fp16_tensor"], bf16_tensor=g["bf16_tensor"],
            tf32_tensor=g["tf32_tensor"], memory_gb=g.get("memory_gb") or 0,
            source=g.get("source") or "", note=g.get("note") or "")

    def prediction(self) -> roofline.Prediction:
        """book.roofline.predict for the current state."""
        precision = None if self.precision == "auto" else self.precision
        spec = self.spec()
        if precision and getattr(spec, PRECISIONS[precision][1]) is None:
            precision = None  # as the front-end does: a peak this GPU lacks means "auto"
        return roofline.predict(self.traffic(), spec, precision)


def roofline_explorer(gpu: str | None = None, *, dtype: str = "float32", variant: str = "fused",
                      T: int = 8192, h: int = 14336, d: int = 4096, precision: str = "auto",
                      data=None, this_gpu: bool = True) -> RooflineExplorer:
    """An interactive roofline: choose a GPU, dtype, kernel and sizes.

    Shows the kernel's arithmetic intensity (flop/byte), the ridge point, which roof binds, the
    predicted time (book.roofline's model: max of bytes / bandwidth and flops / peak) and the
    course's measured points from book/data. Everything is drawn in the browser, so the widget
    also responds on the static book page.

    Parameters
    ----------
    gpu : a key of book.specs.GPU_SPECS ("H100-SXM", "T4", ...). Default: this GPU when one is
        present, else "H100-SXM".
    dtype : "float32", "float16" or "bfloat16".
    variant : "naive" or "fused" (the elementwise SwiGLU on [T, h]); "unfused" (two GEMMs then the
        fused SwiGLU) or "epilogue" (one dual GEMM with SwiGLU in its epilogue), both with x [T, d].
    T, h, d : tokens, hidden size of the MLP, model width.
    precision : compute peak for the prediction: "auto" (where the math runs,
        book.roofline.default_precision: the fp32 CUDA cores for the elementwise kernels in
        every dtype; for the GEMMs fp32 in float32 and the tensor cores in float16/bfloat16),
        "fp32", "tf32", "fp16", "bf16".
    data : a dataset from book.data.load (or a list of them); default every book/data/*.json.
    this_gpu : add a "this GPU" preset from book.gpu.device_info() when a GPU is present.

    Example::

        from book.widgets import roofline_explorer
        w = roofline_explorer("H100-SXM", variant="fused", T=8192, h=14336)
        w                       # displays it; w.prediction() gives the same numbers in Python
    """
    gpus = {k: _spec_dict(k, s) for k, s in specs.GPU_SPECS.items()}
    order = list(gpus)
    if this_gpu:
        from .. import gpu as book_gpu

        info = None if book_gpu.SIMULATED else book_gpu.device_info()
        entry = _this_gpu(info)
        if entry is not None:
            gpus = {THIS_GPU: entry, **gpus}
            order = [THIS_GPU] + order
    if gpu is None:
        gpu = THIS_GPU if THIS_GPU in gpus else "H100-SXM"
    if gpu not in gpus:
        raise ValueError(f"unknown GPU {gpu!r}: choose one of {order}")
    points = _data.roofline_points(data)
    w = RooflineExplorer(gpus=gpus, gpu_order=order, points=points, data_note=_data.summary(data))
    # set the reader's state after the data so the validators can check it
    w.gpu, w.dtype, w.variant, w.precision = gpu, dtype, variant, precision
    w.T, w.h, w.d = T, h, d
    return w
