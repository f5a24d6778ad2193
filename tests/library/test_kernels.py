"""Every SwiGLU kernel against the float64 reference, in Numba's CUDA simulator.

Sizes are small (the simulator runs a few thousand threads per second); the same
kernels are checked at full size on a real GPU by ``python -m book.bench`` (its
correctness checks are recorded in book/data/*.json and asserted by test_data.py).
Outputs are poisoned with NaN before every run; inputs are random, never zero.
"""

import numpy as np
import pytest

import book  # noqa: F401  (decides GPU or simulator before numba.cuda)
from numba import cuda

from book import dtypes
from book.kernels import VARIANTS, reference as R
from book.kernels.instructions import wide

DTYPES = dtypes.DTYPES
SMALL_SHAPES = [(1, 127), (1, 128), (1, 129), (3, 131)]


def run(variant, g, u, dtype, **kw):
    """Poison an output, run ``variant`` on (g, u) host arrays, return the host result."""
    v = VARIANTS[variant]
    out = cuda.to_device(np.full(g.shape, R.poison_value(dtype), dtype=R.STORAGE[dtype]))
    if v.layout == "packed":
        v.fn(cuda.to_device(np.ascontiguousarray(np.concatenate([g, u], axis=-1))), out, **kw)
    else:
        v.fn(cuda.to_device(g), cuda.to_device(u), out, **kw)
    return out.copy_to_host()


CASES = [(name, dt) for name, v in VARIANTS.items() for dt in v.dtypes]


@pytest.mark.parametrize("name,dtype", CASES)
@pytest.mark.parametrize("shape", SMALL_SHAPES)
def test_variant_matches_reference(name, dtype, shape):
    g, u = R.random_inputs(shape, dtype, seed=hash((name, dtype, shape)) % 2**32)
    R.check(run(name, g, u, dtype), g, u, dtype)


# Few blocks of few threads over many elements: every thread walks several tiles (the
# grid-stride loop), the last tile is partial and n is not a multiple of the vector width.
@pytest.mark.parametrize("name,dtype", [(n, d) for n, d in CASES
                                        if n in ("ilp4", "vec2", "vec4", "half4", "half8")])
def test_grid_stride_and_ragged_tail(name, dtype):
    shape = (5, 397)  # 1985 elements
    g, u = R.random_inputs(shape, dtype, seed=3)
    R.check(run(name, g, u, dtype, block=32, max_blocks=3), g, u, dtype)


# The model widths at M = 1 (decode), with the kernels that do several elements per
# thread (one-element kernels are checked at these sizes on the GPU by the benchmark).
@pytest.mark.parametrize("name,dtype,F", [
    ("vec4", "float32", 18944), ("vec4", "float32", 11008),
    ("half8", "float16", 12288), ("half8", "bfloat16", 18944),
    ("packed", "float32", 12288), ("packed", "bfloat16", 11008),
    ("naive_vec", "float16", 11008),
])
def test_model_widths_at_decode(name, dtype, F):
    g, u = R.random_inputs((1, F), dtype, seed=F)
    R.check(run(name, g, u, dtype), g, u, dtype)


def test_packed_odd_width_takes_the_scalar_path():
    g, u = R.random_inputs((2, 13), "float32", seed=5)  # 13 % 4 != 0
    R.check(run("packed", g, u, "float32"), g, u, "float32")


def test_packed_reads_the_right_halves():
    # gate and up swapped would still be finite: make sure the result differs if swapped
    g, u = R.random_inputs((2, 64), "float32", seed=6)
    got = run("packed", g, u, "float32")
    R.check(got, g, u, "float32")
    with pytest.raises(AssertionError):
        R.check(got, u, g, "float32")


# ---------------------------------------------------------------- host wrappers
def dev(shape=(2, 8), dtype=np.float32):
    return cuda.to_device(np.ones(shape, dtype=dtype))


def test_host_array_is_refused_with_a_hint():
    with pytest.raises(TypeError, match="host .*to_device"):
        VARIANTS["fused"].fn(np.ones((2, 8), np.float32), dev())


def test_shape_mismatch():
    with pytest.raises(ValueError, match="same shape"):
        VARIANTS["vec4"].fn(dev((2, 8)), dev((2, 9)))


def test_out_shape_mismatch():
    with pytest.raises(ValueError, match="out must have the shape"):
        VARIANTS["fused"].fn(dev(), dev(), dev((8, 2)))


def test_dtype_mismatch_and_unsupported_dtypes():
    with pytest.raises(TypeError, match="same dtype"):
        VARIANTS["fused"].fn(dev(), dev(dtype=np.float16))
    with pytest.raises(TypeError, match="unsupported dtype"):
        VARIANTS["fused"].fn(dev(dtype=np.float64), dev(dtype=np.float64))
    with pytest.raises(TypeError, match="supports float32"):
        VARIANTS["vec4"].fn(dev(dtype=np.float16), dev(dtype=np.float16))


def test_non_contiguous_is_refused():
    a = cuda.to_device(np.ones((4, 8), np.float32))[:, ::2]
    b = cuda.to_device(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match="not contiguous"):
        VARIANTS["fused"].fn(a, b)


def test_packed_needs_an_even_last_dimension():
    with pytest.raises(ValueError, match=r"\[M, 2F\]"):
        VARIANTS["packed"].fn(dev((2, 7)))


def test_output_is_allocated_when_not_given():
    g, u = R.random_inputs((2, 40), "float16", seed=9)
    out = VARIANTS["half8"].fn(cuda.to_device(g), cuda.to_device(u))
    R.check(out, g, u, "float16")


# ---------------------------------------------------------------- reference and checks
def test_reference_values():
    g = np.array([[0.0, 1.0, -2.0, 30.0]], np.float32)
    u = np.array([[5.0, 2.0, 3.0, 0.5]], np.float32)
    expected = np.array([[0.0, 2.0 / (1 + np.exp(-1.0)), 3.0 * -2.0 / (1 + np.exp(2.0)),
                          0.5 * 30.0 / (1 + np.exp(-30.0))]])
    np.testing.assert_allclose(R.swiglu(g, u), expected, rtol=1e-15)


def test_random_inputs_are_never_zero_and_reproducible():
    for dt in DTYPES:
        g, u = R.random_inputs((64, 64), dt, seed=1)
        assert (R.to_float64(g, dt) != 0).all() and (R.to_float64(u, dt) != 0).all()
        g2, _ = R.random_inputs((64, 64), dt, seed=1)
        assert np.array_equal(g, g2)
        assert R.to_float64(g, dt).std() > 2  # normal * 3, not a constant


def test_check_reports_unwritten_and_first_bad_index():
    g, u = R.random_inputs((3, 5), "float32", seed=2)
    out = R.swiglu(g, u).astype(np.float32)
    R.check(out, g, u, "float32")
    out[1, 2] = np.nan
    out[2, 4] += 1.0
    with pytest.raises(AssertionError) as e:
        R.check(out, g, u, "float32")
    msg = str(e.value)
    assert "2 of 15" in msg and "1 never written" in msg and "(1, 2)" in msg and "float32" in msg


def test_check_rejects_shape_mismatch():
    g, u = R.random_inputs((3, 5), "float32")
    with pytest.raises(AssertionError, match="shape mismatch"):
        R.check(np.zeros((5, 3), np.float32), g, u)


def test_bfloat16_conversion_rounds_to_nearest_even():
    x = np.array([1.0, 1.00390625, 1.005859375, 1.0078125, -3.5, np.inf, 1e-40], np.float32)
    bits = R.float32_to_bf16_bits(x)
    back = R.bf16_bits_to_float32(bits)
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even mantissa (1.0) wins
    assert back[1] == 1.0 and back[2] == np.float32(1.0078125) and back[3] == np.float32(1.0078125)
    assert back[0] == 1.0 and back[4] == -3.5 and np.isinf(back[5])
    assert R.float32_to_bf16_bits(np.array([np.nan], np.float32))[0] == 0x7FC0
    rng = np.random.default_rng(0)
    y = (rng.standard_normal(10000) * 100).astype(np.float32)
    err = np.abs(R.bf16_bits_to_float32(R.float32_to_bf16_bits(y)) - y) / np.abs(y)
    assert err.max() <= 2.0**-8 + 1e-12  # half an ulp of an 8-bit significand


def test_simulator_bf16_helpers_match_reference():
    if not wide.SIMULATED:
        pytest.skip("the Python fallbacks exist only in the simulator")
    rng = np.random.default_rng(1)
    y = (rng.standard_normal(500) * 50).astype(np.float32)
    ours = np.array([wide.f32_to_bf16(v) for v in y], np.uint16)
    assert np.array_equal(ours, R.float32_to_bf16_bits(y))
    assert all(wide.bf16_to_f32(b) == R.bf16_bits_to_float32(np.array([b]))[0] for b in ours[:50])


def test_single_loads_and_stores_spelled_out():
    """wide's ld.global.cg load and its float32 accesses at a shared address (the split-K
    meeting's and the FP8 GEMM's): the values put are the values read, in the simulator by
    the stand-ins (an array and a byte offset), on a GPU by the instructions."""
    from numba import float32

    from book.kernels.instructions.tensorcore import shared_address
    from book.kernels.instructions.wide import ld_shared_f32, ld_shared_f32x2, load_f32_cg, st_shared_f32

    @cuda.jit
    def k(src, out):
        buf = cuda.shared.array(8, float32)
        t = cuda.threadIdx.x
        base = shared_address(buf, 0)
        st_shared_f32(base + 4 * t, load_f32_cg(src, t))
        cuda.syncthreads()
        if t < 4:
            lo, hi = ld_shared_f32x2(base + 8 * t)
            out[2 * t] = lo
            out[2 * t + 1] = hi
        out[8 + t] = ld_shared_f32(base + 4 * (7 - t))

    src = np.arange(1, 9, dtype=np.float32) / np.float32(3)
    out = cuda.to_device(np.full(16, np.nan, np.float32))
    k[1, 8](cuda.to_device(src), out)
    got = out.copy_to_host()
    assert np.array_equal(got[:8], src) and np.array_equal(got[8:], src[::-1])


def test_tolerances_are_stated_for_every_dtype():
    assert set(R.TOLERANCE) == set(DTYPES)
    assert R.TOLERANCE["float32"]["rtol"] < R.TOLERANCE["float16"]["rtol"] < R.TOLERANCE["bfloat16"]["rtol"]


def test_registry():
    import book.specs
    import book.traffic
    from book.bench import elementwise_rows, suite, targets

    # one definition each, imported (not copies kept equal); the chapters read the item
    # sizes as reference.ITEMSIZE and traffic.DTYPE_BYTES: the same dict
    assert elementwise_rows.FLOPS_PER_ELEMENT is book.traffic.FLOPS_PER_ELEMENT
    assert book.traffic.DTYPE_BYTES is R.ITEMSIZE is dtypes.ITEMSIZE
    assert suite.DTYPES is R.DTYPES is dtypes.DTYPES
    assert suite.HBM3_PEAK is targets.HBM3_PEAK
    assert targets.HBM3_PEAK == book.specs.GPU_SPECS["H100-SXM"].memory_bandwidth
    for name, v in VARIANTS.items():
        assert v.name == name and set(v.dtypes) <= set(DTYPES) and v.description
        assert v.transfers_per_element in (3, 5)
    assert {"naive", "fused", "vec4", "half8", "packed"} <= set(VARIANTS)


@pytest.mark.parametrize("name", [n for n, v in VARIANTS.items() if v.layout == "separate"])
def test_empty_input_is_a_no_op(name):
    e = cuda.to_device(np.zeros((0, 8), np.float32 if "float32" in VARIANTS[name].dtypes else np.float16))
    out = VARIANTS[name].fn(e, e)
    assert out.shape == (0, 8)


# ---------------------------------------------------------------- torch tensors: views made once
def test_torch_views_are_reused_until_the_tensor_changes():
    """The per-tensor cache behind the torch call path (book.kernels.host.launch._TorchViews):
    a hit only while data pointer, shape, strides and dtype are unchanged; the entry goes
    with the tensor. Exercised on CPU tensors: the cache logic does not touch the GPU."""
    import gc

    torch = pytest.importorskip("torch")
    from book.kernels.host.launch import _TorchViews

    views = _TorchViews()
    x = torch.ones(4, 8)
    assert views.get(x) is None
    marker = object()
    assert views.put(x, marker) is marker and views.get(x) is marker
    assert views.get(torch.ones(4, 8)) is None  # another tensor, even an equal one
    x.resize_(8, 4)  # same object, new shape: the old view must not be used
    assert views.get(x) is None
    views.put(x, marker)
    x.set_(torch.zeros(8, 4))  # same object, new storage
    assert views.get(x) is None
    views.put(x, marker)
    assert len(views) == 1
    del x
    gc.collect()
    assert len(views) == 0  # no view outlives its tensor


def test_cpu_torch_tensor_is_refused_with_a_hint():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"torch tensor on the CPU.*\.cuda\(\)"):
        VARIANTS["fused"].fn(torch.ones(2, 8), torch.ones(2, 8))


@pytest.mark.gpu   # skipped in the simulator (tests/conftest.py)
def test_prepared_launch_computes_what_numbas_launch_does():
    """launch_kernel's prepared path (arguments marshalled once per array) against the
    same kernels launched through Numba, on new arrays and on torch tensors that change."""
    from book.kernels.host import launch

    assert launch.PREPARED_LAUNCH  # on a GPU with this numba-cuda the fast path is in use
    for name, dtype in (("vec4", "float32"), ("half8", "float16"), ("ilp4", "bfloat16"),
                        ("fused", "float32")):
        for seed in range(3):  # new arrays each time: their own arguments, never stale ones
            g, u = R.random_inputs((3, 4099), dtype, seed=seed)
            R.check(run(name, g, u, dtype), g, u, dtype)
    torch = pytest.importorskip("torch")
    g = torch.randn(2, 4096, device="cuda")
    u = torch.randn(2, 4096, device="cuda")
    o = torch.full_like(g, float("nan"))
    VARIANTS["vec4"].fn(g, u, o)
    o.set_(torch.full_like(g, float("nan")))  # same tensor object, new storage
    VARIANTS["vec4"].fn(g, u, o)
    R.check(o, g, u, "float32")


def test_wrappers_ask_the_driver_for_the_sm_count_once(monkeypatch):
    # Each vector wrapper sizes its block from the SM count on every call. The driver
    # query behind it cost ~500 us of host time per call on the H100 when its cache was
    # lost (a decorator moved onto another function): a call after the first must not
    # query the device again.
    from book import gpu
    from book.kernels.host import launch
    from book.kernels.elementwise import vectorized

    g = cuda.to_device(np.ones(64, np.float32))
    u = cuda.to_device(np.ones(64, np.float32))
    vectorized.swiglu_vec4(g, u)  # the first call may ask

    def no_query(*a, **k):
        raise AssertionError("device_info() queried again on a later call")

    monkeypatch.setattr(gpu, "device_info", no_query)
    assert launch.sm_count() >= 1
    out = vectorized.swiglu_vec4(g, u)
    np.testing.assert_allclose(out.copy_to_host(), R.swiglu(np.ones(64, np.float32), np.ones(64, np.float32)),
                               rtol=1e-5)
