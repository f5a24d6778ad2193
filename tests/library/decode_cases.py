"""Cases and checks the decode GEMVs' tests share (test_decode_mlp.py, test_staged_gemv.py):
host arrays and their float64 answer, a launch on NaN-poisoned outputs, the tolerances of
float32 accumulation with one rounding to half; on a GPU, torch tensors and their answer."""

import numpy as np
import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from numba import cuda


def bf16(a):
    b = np.asarray(a, np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def f32(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def case(T, d, h, dtype, bias=True, seed=0):
    """Host arrays (x, wg, wu, bg, bu) in ``dtype`` and the float64 answer from the values
    they hold."""
    rng = np.random.default_rng(seed)
    raw = [rng.standard_normal((T, d)), rng.standard_normal((h, d)) / np.sqrt(d),
           rng.standard_normal((h, d)) / np.sqrt(d), rng.standard_normal(h) * 0.5,
           rng.standard_normal(h) * 0.5]
    if dtype == "float16":
        arrs = [a.astype(np.float16) for a in raw]
        vals = [a.astype(np.float64) for a in arrs]
    else:
        arrs = [bf16(a) for a in raw]
        vals = [f32(a).astype(np.float64) for a in arrs]
    x, wg, wu, bg, bu = vals
    g = x @ wg.T + (bg if bias else 0)
    u = x @ wu.T + (bu if bias else 0)
    if not bias:
        arrs[3] = arrs[4] = None
    return arrs, g / (1 + np.exp(-g)) * u


def values(out, dtype):
    return out.astype(np.float64) if dtype == "float16" else f32(out).astype(np.float64)


def close(got, ref, dtype):
    # float32 accumulation, one rounding to half on the store (2^-11 fp16, 2^-8 bf16)
    tol = 2 ** -9 if dtype == "float16" else 2 ** -7
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


def run(fn, arrs, dtype, **kw):
    T, h = arrs[0].shape[0], arrs[1].shape[0]
    dev = [cuda.to_device(a) if a is not None else None for a in arrs]
    nan = np.full((T, h), np.nan, np.float16) if dtype == "float16" else \
        np.full((T, h), 0x7FC0, np.uint16)
    out = cuda.to_device(nan)
    assert fn(*dev, out=out, **kw) is out
    for a, d in zip(arrs, dev):
        if a is not None:
            np.testing.assert_array_equal(d.copy_to_host(), a)  # inputs untouched
    return values(out.copy_to_host(), dtype)


# on a GPU


def torch_case(T, d, h, dtype, seed=0):
    torch = pytest.importorskip("torch")
    gen = torch.Generator(device="cuda").manual_seed(seed)
    tdt = getattr(torch, dtype)
    x = torch.randn(T, d, device="cuda", generator=gen).to(tdt)
    wg = (torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5).to(tdt)
    wu = (torch.randn(h, d, device="cuda", generator=gen) / d ** 0.5).to(tdt)
    g, u = x.double() @ wg.double().T, x.double() @ wu.double().T
    return torch, (x, wg, wu), torch.nn.functional.silu(g) * u


def close_torch(got, ref, dtype):
    tol = 2 ** -9 if dtype == "float16" else 2 ** -7
    err = ((got.double() - ref).abs() - tol * ref.abs() - tol * ref.abs().max()).max().item()
    assert err <= 0, f"{err} beyond tolerance"
