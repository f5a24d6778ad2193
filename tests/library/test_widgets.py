"""Python side of book.widgets: constructors, state, validation, agreement of the Python helpers
with book.traffic / book.roofline, measured-data handling, and embeddable state.
The browser side (drawing, responding with no kernel) is tests/built_book/test_widgets_browser.py."""

from __future__ import annotations

import json
import re

import pytest
import traitlets

import book  # noqa: F401  (decides GPU or simulator first)
from book import gpu, roofline, specs, traffic, widgets
from book.widgets import _data
from book.widgets.traffic import mlp_counts

CONSTRUCTORS = [widgets.roofline_explorer, widgets.traffic_explorer, widgets.launch_explorer]


@pytest.fixture
def no_data(monkeypatch, tmp_path):
    """An empty book/data directory: what a checkout without benchmark results has."""
    monkeypatch.setattr(_data, "DATA_DIR", tmp_path)
    return tmp_path


def _dataset(rows, gpu_name="NVIDIA H100 80GB HBM3"):
    return {"provenance": {"gpu": gpu_name, "date": "2026-11-22T07:00:00Z"}, "rows": rows}


@pytest.mark.parametrize("make", CONSTRUCTORS, ids=lambda f: f.__name__)
def test_front_end_is_self_contained(make, no_data):
    w = make()
    esm = w._esm
    assert "export default" in esm and "render" in esm
    # one module, no imports and no network: it must run on a static page and offline
    assert not re.search(r"^\s*import\s", esm, re.M), "the widget ESM imports something"
    assert "import(" not in esm and "fetch(" not in esm and "XMLHttpRequest" not in esm
    urls = set(re.findall(r"https?://[^\s\"'`)]+", esm))
    assert urls <= {"http://www.w3.org/2000/svg"}, f"URLs in the front-end code: {urls}"
    assert ".swg" in w._css
    # the whole state is plain JSON: the book's build saves it into the page
    json.dumps(w.get_state(), default=lambda o: pytest.fail(f"unserialisable state: {o!r}"))


def test_embedded_state_carries_the_front_end(no_data):
    from ipywidgets.embed import embed_data

    w = widgets.traffic_explorer(T=4, h=8)
    data = embed_data(views=[w], drop_defaults=False)
    states = data["manager_state"]["state"]
    mine = states[w.model_id]["state"]
    assert mine["_esm"] == w._esm and mine["T"] == 4 and mine["h"] == 8
    assert states[w.model_id]["model_module"] == "anywidget"


def test_traffic_explorer_matches_book_traffic(no_data):
    w = widgets.traffic_explorer(T=4, h=8)
    counts = w.counts()
    # chapter 1's hand count: 32 elements
    assert {k: v.transfers for k, v in counts.items()} == {"naive": 160, "fused": 96, "epilogue": 64}
    for k, v in counts.items():
        assert v == traffic.activation(4, 8, "float32", k)
    w.scope, w.T, w.h, w.d, w.dtype = "mlp", 2048, 8192, 4096, "bfloat16"
    counts = w.counts()
    assert counts["unfused"] == traffic.mlp_up(2048, 4096, 8192, "bfloat16", "unfused")
    assert counts["epilogue"] == traffic.mlp_up(2048, 4096, 8192, "bfloat16", "epilogue")
    n = 2048 * 8192
    assert counts["naive"].transfers == counts["unfused"].transfers + 2 * n  # 5Th instead of 3Th
    assert counts["naive"].bytes == counts["naive"].transfers * 2


def test_mlp_naive_breakdown_adds_up():
    t = mlp_counts(3, 5, 7, "float16", "naive")
    assert t.transfers == sum(s.reads + s.writes for s in t.breakdown)
    assert [s.step.split(":")[0] for s in t.breakdown][:2] == ["gate GEMM", "up GEMM"]
    assert len(t.breakdown) == 4


@pytest.mark.parametrize("variant", ["naive", "fused", "unfused", "epilogue"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_roofline_explorer_prediction_is_book_roofline(variant, dtype, no_data):
    w = widgets.roofline_explorer("A100-80GB", dtype=dtype, variant=variant, T=512, h=14336, d=4096)
    expected_traffic = (traffic.activation(512, 14336, dtype, variant) if variant in ("naive", "fused")
                        else traffic.mlp_up(512, 4096, 14336, dtype, variant))
    assert w.traffic() == expected_traffic
    assert w.prediction() == roofline.predict(expected_traffic, "A100-80GB")
    w.precision = "tf32"
    assert w.prediction() == roofline.predict(expected_traffic, "A100-80GB", "tf32")


def test_deliberately_bad_kernels_are_not_drawn_as_fused_swiglu():
    from book.widgets import _data

    # chapter 6's coalescing lesson: strided and uncoalesced variants are not points of the
    # fused design; their control (stride 1) and the IEEE-math controls are
    assert _data.variant_family("uncoalesced", "kernel") is None
    assert _data.variant_family("strided2", "kernel") is None
    assert _data.variant_family("coalesced", "kernel") == "fused"
    assert _data.variant_family("vec4_ieee", "kernel") == "fused"


def test_roofline_explorer_passes_the_gpu_table(no_data):
    w = widgets.roofline_explorer(this_gpu=False)
    assert set(w.gpus) == set(specs.GPU_SPECS) and w.gpu_order == list(specs.GPU_SPECS)
    h100 = w.gpus["H100-SXM"]
    s = specs.GPU_SPECS["H100-SXM"]
    assert h100["memory_bandwidth"] == s.memory_bandwidth and h100["bf16_tensor"] == s.bf16_tensor
    assert h100["source"] == s.source
    assert w.default_precisions == {kind: {dt: roofline.default_precision(dt, kind)
                                           for dt in traffic.DTYPE_BYTES}
                                    for kind in ("elementwise", "gemm")}
    # where the math runs: elementwise on the FP32 CUDA cores, a half-type GEMM on tensor cores
    assert w.default_precisions["elementwise"]["float16"] == "fp32"
    assert w.default_precisions["gemm"]["bfloat16"] == "bf16"


def test_this_gpu_preset():
    from book.widgets.roofline import _this_gpu

    sim = gpu.DeviceInfo("CUDA simulator", None, None, None, None, None, None, None, True)
    assert _this_gpu(sim) is None
    h100 = gpu.DeviceInfo("NVIDIA H100 80GB HBM3", 132, (9, 0), 2619000000, 5120,
                          2 * 2619000000 * 5120 / 8, 50 * 2**20, (13, 0), False)
    entry = _this_gpu(h100)
    assert entry["memory_bandwidth"] == h100.peak_bandwidth
    assert entry["fp32"] == specs.GPU_SPECS["H100-SXM"].fp32 and entry["match"] == "H100-SXM"
    odd = gpu.DeviceInfo("NVIDIA Imaginary 9000", 10, (12, 0), 1e9, 256, 64e9, 1, (13, 0), False)
    entry = _this_gpu(odd)
    assert entry["fp32"] is None and "only the memory roof" in entry["note"]


def test_bad_input_is_refused_with_a_clear_message(no_data):
    w = widgets.roofline_explorer()
    with pytest.raises(traitlets.TraitError, match="T must be a positive whole number"):
        w.T = 0
    with pytest.raises(traitlets.TraitError, match="unknown GPU 'H300'"):
        w.gpu = "H300"
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        w.dtype = "int8"
    with pytest.raises(traitlets.TraitError, match="unknown kernel"):
        w.variant = "magic"
    with pytest.raises(ValueError, match="unknown GPU 'nope'"):
        widgets.roofline_explorer("nope")
    lw = widgets.launch_explorer()
    with pytest.raises(traitlets.TraitError, match="overhead_s must be positive"):
        lw.overhead_s = 0.0
    with pytest.raises(traitlets.TraitError, match="unknown scope"):
        widgets.traffic_explorer(scope="everything")
    assert w.T == 8192  # refused values leave the state alone


def test_no_measurements_recorded(no_data):
    w = widgets.roofline_explorer()
    assert w.points == [] and "No measurements recorded" in w.data_note
    lw = widgets.launch_explorer()
    assert lw.points == [] and lw.overhead_s == widgets.launch.ASSUMED_OVERHEAD_S
    assert "not measured" in lw.data_note and lw.bandwidth == specs.GPU_SPECS["H100-SXM"].memory_bandwidth


def _suite_like_dataset():
    """Rows shaped as book/bench/suite.py writes them (kind, variant, dtype, shape, seconds...)."""
    return _dataset([
        {"kind": "kernel", "variant": "vec4", "dtype": "float32", "shape": [8192, 14336],
         "seconds": 5e-4, "bytes": 3 * 4 * 8192 * 14336, "bandwidth": 2.8e12},
        {"kind": "kernel", "variant": "naive", "dtype": "float16", "shape": [2048, 8192],
         "seconds": 1e-4, "bytes": 3 * 2 * 2048 * 8192, "bytes_actual": 1.0e8, "bandwidth": 1.0e12},
        {"kind": "gemm", "variant": "numba_dual_gemm", "dtype": "float32", "shape": [2048, 4096, 8192],
         "seconds": 0.0175},
        {"kind": "gemm", "variant": "vec4_swiglu_only", "dtype": "float32", "shape": [2048, 8192],
         "seconds": 6e-5},
        {"kind": "reference", "variant": "torch_add", "dtype": "float32", "shape": [8192, 14336],
         "seconds": 4.7e-4, "bandwidth": 2.97e12},
        {"kind": "launch", "variant": "vec4_python_launch", "dtype": "float32", "shape": [1, 18944],
         "seconds": 3e-5},
        {"kind": "kernel", "variant": "vec4_graph", "dtype": "float32", "shape": [1, 18944],
         "seconds": 1.2e-6},
        {"kind": "launch", "variant": "launch_layer_fastcall", "dtype": "float32", "shape": [1, 18944],
         "seconds": 9e-6},
    ])


def test_measured_rows_become_points(no_data):
    ds = _suite_like_dataset()
    pts = _data.roofline_points(ds)
    assert [(p["label"].split()[0], p["variant"]) for p in pts] == [
        ("vec4", "fused"), ("naive", "naive"), ("numba_dual_gemm", "epilogue"), ("vec4_graph", "fused")]
    fused = pts[0]
    t = traffic.activation(8192, 14336, "float32", "fused")
    assert fused["gpu"] == "H100-SXM" and fused["bytes"] == t.bytes and fused["flops"] == t.flops
    assert pts[1]["bytes"] == 1.0e8  # the bytes a row says its kernel really moves win
    assert pts[2]["flops"] == traffic.mlp_up(2048, 4096, 8192, "float32", "epilogue").flops
    w = widgets.roofline_explorer(data=ds)
    assert len(w.points) == 4 and "NVIDIA H100 80GB HBM3, 2026-11-22" in w.data_note

    lw = widgets.launch_explorer(data=ds)
    assert lw.overhead_s == 3e-5  # the Python launch, float32
    assert lw.bandwidth == 2.8e12  # the best fused kernel measured in float32
    assert sorted((p["how"], p["elements"]) for p in lw.points) == [
        ("gpu", 8192 * 14336), ("graph", 18944), ("python", 18944)]
    labels = [p["label"] for p in lw.presets]
    assert any("torch_add" in s and "reference" in s for s in labels)
    assert any("vec4_graph" in s and "graph replay" in s for s in labels)
    assert any("launch_layer_fastcall" in s and "cheap path" in s for s in labels)
    assert "datasheet" in labels[-1]
    assert "Starting overhead: one call from Python (vec4_python_launch, 1x18944" in lw.data_note
    assert "Starting bandwidth: best measured (vec4, 8192x14336" in lw.data_note
    # measurements from an H100 are not a T4's
    t4 = widgets.launch_explorer(data=ds, gpu="T4")
    assert t4.points == [] and t4.overhead_s == widgets.launch.ASSUMED_OVERHEAD_S
    assert t4.bandwidth == specs.GPU_SPECS["T4"].memory_bandwidth
    assert "No measurements recorded on a T4" in t4.data_note
    # a dtype with no measurement falls back to what was measured, saying where it came from
    lw16 = widgets.launch_explorer(data=ds, dtype="bfloat16")
    assert lw16.bandwidth == specs.GPU_SPECS["H100-SXM"].memory_bandwidth
    assert "datasheet peak" in lw16.data_note


def test_launch_presets_take_the_newest_run_of_each_kind(no_data):
    """A record's own decode rows and newer merged ones (book.bench.merge): one preset per
    kind and dtype, the newest run's, so the explorer starts where chapter 6's tables do."""
    newer = {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-24T07:34:39Z"}
    ds = _dataset([
        {"kind": "launch", "variant": "fused_fastmath_python_launch", "dtype": "float32",
         "shape": [1, 18944], "seconds": 17e-6},
        {"kind": "launch", "variant": "vec4_python_launch", "dtype": "float32",
         "shape": [1, 18944], "seconds": 19e-6, "provenance": newer},
        {"kind": "kernel", "variant": "fused_fastmath_graph", "dtype": "float32",
         "shape": [1, 18944], "seconds": 1.4e-6},
        {"kind": "launch", "variant": "launch_layer_graph_replay", "dtype": "float32",
         "shape": [1, 18944], "seconds": 1.7e-6, "provenance": newer},
        {"kind": "launch", "variant": "vec4_python_launch", "dtype": "float32",
         "shape": [1, 12288], "seconds": 18e-6, "provenance": newer},
    ])
    over = {p["how"]: p for p in _data.launch_presets(ds) if p["kind"] == "overhead"}
    assert len([p for p in _data.launch_presets(ds) if p["kind"] == "overhead"]) == 2
    assert over["one call from Python"]["value"] == 19e-6  # newest run, largest decode size
    assert "vec4_python_launch, 1x18944" in over["one call from Python"]["label"]
    assert over["CUDA graph replay, per SwiGLU"]["value"] == 1.7e-6
    assert widgets.launch_explorer(data=ds).overhead_s == 19e-6


def test_recorded_results_reach_the_widgets():
    """With the repository's own book/data files (written on a real GPU by python -m book.bench)."""
    from book import data as book_data

    slugs = book_data.available()
    if not slugs:
        pytest.skip("no results recorded in book/data yet")
    w = widgets.roofline_explorer("H100-SXM", this_gpu=False)
    assert w.points, "recorded results but no roofline points"
    assert all(p["gpu"] in specs.GPU_SPECS for p in w.points if p["gpu"])
    assert "Measured points" in w.data_note and f"book/data/{slugs[0]}.json" in w.data_note
    res = book_data.load(slugs[0])
    for p in w.points:  # every point is a recorded row, with the course's traffic count as x
        assert any(r["seconds"] == p["seconds"] and r["dtype"] == p["dtype"] for r in res.rows)
        assert p["bytes"] > 0 and p["flops"] > 0
    lw = widgets.launch_explorer()
    if any(r.get("kind") == "launch" for r in res.rows):
        assert "Starting overhead" in lw.data_note
        assert lw.overhead_s in [r["seconds"] for r in res.rows]


def test_launch_explorer_model(no_data):
    w = widgets.launch_explorer(overhead_s=2e-5, bandwidth=2e12, dtype="float16", T=1, h=18944)
    b = traffic.activation(1, 18944, "float16", "fused").bytes
    assert w.bytes() == b and w.time() == max(2e-5, b / 2e12)
    assert w.crossover() == pytest.approx(2e-5 * 2e12 / 6)
    assert w.time(10**9) == pytest.approx(traffic.activation(1, 10**9, "float16", "fused").bytes / 2e12)


def test_docstrings_say_how_to_use():
    for f in CONSTRUCTORS:
        assert "Example::" in f.__doc__ and f.__name__ in f.__doc__


@pytest.mark.parametrize("make", CONSTRUCTORS, ids=lambda f: f.__name__)
def test_every_widget_asks_the_reader_a_question(make, no_data):
    # the question is built and checked in the front-end (tests/built_book/test_widgets_browser.py
    # answers each one right and wrong); here: each widget's module creates one
    esm = make()._esm
    own = esm.split("// ---- ", 1)[1]
    assert "quiz(question)" in own and "ask.refresh()" in own
