import matplotlib

matplotlib.use("Agg")

import pytest

import book  # noqa: F401
from book import roofline, specs, traffic


def test_h100_ridge_point_is_seed_000s_295_from_the_bf16_tensor_peak():
    # the Vizuara article (book.sources): "the crossover on an H100 is around 295 flops per byte"
    assert roofline.ridge_point("H100-SXM", "bf16") == pytest.approx(295.4, abs=0.5)
    assert roofline.ridge_point("H100-SXM", "fp16") == pytest.approx(295.4, abs=0.5)
    assert roofline.ridge_point("H100-SXM", "fp32") == pytest.approx(20.0, abs=0.1)
    table = roofline.ridge_table("T4")
    assert table["bf16"] is None and table["fp16"] == pytest.approx(65e12 / 320e9)


def test_predict_memory_bound_activation():
    t = traffic.activation(8192, 14336, "float32", "fused")
    p = roofline.predict(t, "H100-SXM")
    assert p.bound == "memory" and p.precision == "fp32"
    assert p.time_s == pytest.approx(3 * 8192 * 14336 * 4 / 3.35e12)
    assert p.memory_time_s > 40 * p.compute_time_s
    naive = roofline.predict(traffic.activation(8192, 14336, "float32", "naive"), "H100-SXM")
    assert naive.time_s / p.time_s == pytest.approx(5 / 3)


def test_predict_compute_bound_dual_gemm():
    t = traffic.mlp_up(2048, 4096, 8192, "bfloat16", "epilogue")
    p = roofline.predict(t, specs.GPU_SPECS["H100-SXM"])
    assert p.bound == "compute"
    assert p.time_s == pytest.approx(t.flops / 989.5e12)
    assert p.intensity > p.ridge


def test_predict_refuses_missing_unit():
    # a bfloat16 GEMM needs bfloat16 tensor cores, which a T4 lacks
    with pytest.raises(ValueError, match="T4"):
        roofline.predict(traffic.mlp_up(4, 8, 16, "bfloat16", "epilogue"), "T4")


def test_elementwise_math_runs_on_the_fp32_cuda_cores_in_every_dtype():
    # an fp16 elementwise kernel widens to float32: its roof is FP32, not the tensor cores
    for dtype in ("float32", "float16", "bfloat16"):
        p = roofline.predict(traffic.activation(8192, 14336, dtype, "fused"), "H100-SXM")
        assert p.precision == "fp32" and p.ridge == pytest.approx(20.0, abs=0.1), dtype
    # so a T4, which has no bfloat16 unit at all, still predicts a bfloat16 activation
    assert roofline.predict(traffic.activation(4, 8, "bfloat16"), "T4").precision == "fp32"
    # a GEMM in a half type runs on the tensor cores
    g = roofline.predict(traffic.mlp_up(2048, 4096, 8192, "float16", "unfused"), "H100-SXM")
    assert g.precision == "fp16" and g.ridge == pytest.approx(295.4, abs=0.5)
    assert roofline.kernel_kind(traffic.mlp_up(1, 2, 3, "float32", "epilogue")) == "gemm"
    assert roofline.kernel_kind(traffic.activation(1, 2, "float32", "epilogue")) == "elementwise"
    assert roofline.kernel_kind(traffic.gemm(1, 2, 3, "bfloat16")) == "gemm"
    with pytest.raises(ValueError, match="kind"):
        roofline.default_precision("float16", "tensor")


def test_plot_axes_units_and_palette():
    ax = roofline.plot(None, "H100-SXM", points=[("fused f32", 0.42, 1.1e12)],
                       precision=("fp32", "bf16"))
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "flop/byte" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    colors = {line.get_color().upper() for line in ax.get_lines()}
    assert colors <= {c.upper() for c in roofline.OKABE_ITO.values()}
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("ridge 295" in s for s in labels) and "fused f32" in labels
