"""Chapter 11's kernels (book/kernels/elementwise/glu_family.py): correct in the simulator (or on a GPU),
float32-only arithmetic in their PTX, clear errors on bad input, and the float16 overflow
that motivates float32 math inside the kernels."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import book  # noqa: F401  (decides GPU or simulator before numba.cuda is imported)
from numba import cuda

from book.kernels.elementwise import glu_family as gf

# fastmath: tanh.approx / ex2.approx on a GPU have ~1e-3 relative error at worst;
# float16 storage adds its own rounding (eps 2**-11) on top.
RTOL = {np.float32: 2e-3, np.float16: 4e-3}
ATOL = {np.float32: 1e-5, np.float16: 1e-3}


def _inputs(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * 3).astype(dtype) for _ in range(2)]


def _poisoned(shape, dtype):
    a = np.full(shape, np.nan, dtype=dtype) if dtype != np.int8 else np.full(shape, -128, np.int8)
    return cuda.to_device(a)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1,), (3, 129), (2, 257)])
def test_geglu_matches_float64_reference(shape, dtype):
    g, u = _inputs(shape, dtype, seed=sum(shape))
    out = _poisoned(shape, dtype)
    gf.geglu(cuda.to_device(g), cuda.to_device(u), out=out)
    got = out.copy_to_host()
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} outputs left unwritten"
    np.testing.assert_allclose(got.astype(np.float64), gf.geglu_reference(g, u),
                               rtol=RTOL[dtype], atol=ATOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_add_rmsnorm_fused_equals_unfused_and_reference(dtype):
    T, d = 3, 300            # d not a multiple of the 256-thread row block
    rng = np.random.default_rng(7)
    x = rng.standard_normal((T, d)).astype(dtype)
    r = rng.standard_normal((T, d)).astype(dtype)
    w = (1 + 0.1 * rng.standard_normal(d)).astype(dtype)
    dx, dr, dw = cuda.to_device(x), cuda.to_device(r), cuda.to_device(w)

    h, y = _poisoned((T, d), dtype), _poisoned((T, d), dtype)
    gf.add_rmsnorm(dx, dr, dw, eps=1e-6, h=h, y=y)
    h, y = h.copy_to_host(), y.copy_to_host()
    h_ref = x.astype(np.float64) + r
    np.testing.assert_allclose(h, h_ref, rtol=RTOL[dtype], atol=ATOL[dtype])
    # the norm reads h as stored (rounded to dtype), as the unfused pair does
    np.testing.assert_allclose(y, gf.rmsnorm_reference(h, w), rtol=RTOL[dtype], atol=ATOL[dtype])

    h2 = gf.residual_add(dx, dr)
    y2 = gf.rmsnorm(h2, dw, eps=1e-6)
    np.testing.assert_array_equal(h2.copy_to_host(), h)
    np.testing.assert_allclose(y2.copy_to_host(), y, rtol=RTOL[dtype], atol=ATOL[dtype])


def test_swiglu_int8_matches_reference_within_one_step():
    g, u = _inputs((1000,), np.float32, seed=3)
    scale = float(np.abs(gf.gated_product_reference(g, u)).max()) / 200.0   # the largest clip
    out = _poisoned((1000,), np.int8)
    gf.swiglu_int8(cuda.to_device(g), cuda.to_device(u), scale, out=out)
    got = out.copy_to_host().astype(int)
    ref = gf.swiglu_int8_reference(g, u, scale).astype(int)
    assert (got != -128).all(), "unwritten outputs"
    # approximate exp on a GPU may move a value across a rounding boundary: one step
    assert np.abs(got - ref).max() <= 1
    assert (np.abs(got) == 127).any(), "the clamp was never exercised"


def test_half_math_overflows_where_float_inside_does_not():
    # silu(-20) * 4000 is about -1.6e-4: representable in float16. Computed in float16
    # as gate*up (-80000 > 65504: -inf) over 1 + exp(20) (inf) it is NaN.
    g = np.array([-20.0], np.float16)
    u = np.array([4000.0], np.float16)
    half = gf.gated_product_all_half(g, u)
    inside = gf.gated_product_float_inside(g, u)
    truth = gf.gated_product_reference(g, u)
    assert np.isnan(half[0])
    assert np.isfinite(inside[0])
    assert abs(float(inside[0]) - truth[0]) <= 1e-3 * abs(truth[0])


def test_bad_inputs_get_clear_errors():
    g = np.ones(4, np.float32)
    with pytest.raises(TypeError, match=r"host \(NumPy\) array.*to_device"):
        gf.geglu(g, g)
    with pytest.raises(ValueError, match="shape"):
        gf.geglu(cuda.to_device(g), cuda.to_device(np.ones(5, np.float32)))
    with pytest.raises(ValueError, match="weight must have shape"):
        x = cuda.to_device(np.ones((2, 4), np.float32))
        gf.rmsnorm(x, cuda.to_device(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="positive finite"):
        gf.swiglu_int8(cuda.to_device(g), cuda.to_device(g), 0.0)
    # a bfloat16 torch tensor arrives as its 16-bit bits: read as numbers it would be a wrong
    # answer, so RMSNorm and its fused forms refuse it and say what to pass
    bits = cuda.to_device(np.ones((2, 4), np.int16))
    w = cuda.to_device(np.ones(4, np.float32))
    with pytest.raises(TypeError, match=r"x is int16 .*bfloat16.*x\.float\(\)"):
        gf.rmsnorm(bits, w)
    with pytest.raises(TypeError, match=r"weight is int16"):
        gf.rmsnorm(cuda.to_device(np.ones((2, 4), np.float32)), cuda.to_device(np.ones(4, np.int16)))
    with pytest.raises(TypeError, match=r"residual is int16"):
        gf.add_rmsnorm(cuda.to_device(np.ones((2, 4), np.float32)), bits, w)


def test_traffic_counts():
    un, fu = gf.traffic_bytes("swiglu", 2, 8, 4)
    assert (un, fu) == (5 * 16 * 4, 3 * 16 * 4)
    un, fu = gf.traffic_bytes("swiglu_int8", 1, 10, 2)
    assert (un, fu) == (10 * 6 + 10 * 3, 10 * 5)
    with pytest.raises(ValueError, match="unknown op"):
        gf.traffic_bytes("softmax", 1, 1, 4)


def test_ptx_is_float32_only_with_fast_transcendentals():
    # compile_ptx needs the real numba.cuda (NVVM wheel, no GPU needed), not the
    # simulator this process may be running: compile in a child process.
    code = textwrap.dedent("""
        from numba import cuda
        from book.kernels import glu_family as gf
        cases = [
            (gf.geglu_kernel, "(float16[::1], float16[::1], float16[::1])", "tanh.approx.f32"),
            (gf.swiglu_int8_kernel, "(float16[::1], float16[::1], float32, int8[::1])", "ex2.approx"),
            (gf.add_rmsnorm_kernel, "(float32[:, ::1], float32[:, ::1], float32[::1], float32,"
                                    " float32[:, ::1], float32[:, ::1])", "sqrt"),
        ]
        for k, sig, needle in cases:
            ptx, _ = cuda.compile_ptx(k.py_func, sig, cc=(9, 0), fastmath=True)
            body = [l for l in ptx.splitlines() if ".f64" in l]
            assert not body, (k.py_func.__name__, body[:3])
            assert needle in ptx, (k.py_func.__name__, needle)
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "BOOK_SIMULATOR")}
    env["BOOK_PTX_ONLY"] = "1"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    # a bare `book` package (as book.kernels.host.ptx does): book/__init__.py would switch to
    # the simulator here
    code = code.replace("from book.kernels import glu_family as gf",
                        "import sys, types\n"
                        "pkg = types.ModuleType('book'); "
                        f"pkg.__path__ = [{os.path.join(root, 'book')!r}]; sys.modules['book'] = pkg\n"
                        "from book.kernels import glu_family as gf")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().endswith("ok")
