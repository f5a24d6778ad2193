"""The models of book/kernels/instructions/hopper.py held to a Hopper GPU (GPU lane: `make test-gpu`), and
the wgmma kernels against float64 at whole tiles and at edges."""

import math

import numpy as np
import pytest

import book  # noqa: F401
from book.kernels.host import plan
from book.kernels.instructions import hopper as H

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def hopper():
    from numba import cuda

    cc = tuple(cuda.get_current_device().compute_capability)
    if cc != (9, 0):
        pytest.skip(f"needs a Hopper GPU (sm_90), this one is sm_{cc[0]}{cc[1]}")
    import torch

    return torch


def ints(shape, seed):
    return np.random.default_rng(seed).integers(-3, 4, size=shape).astype(np.float32)


def bits(a):
    return (np.asarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_mbarrier_phases_match_the_model(hopper):
    from book.kernels.probes import hopper_probes as P

    assert P.mbarrier_phases() == P.mbarrier_model_phases()


@pytest.mark.parametrize("mode,box,c0,c1", [("128B", (64, 128), 64, 100), ("128B", (64, 128), 160, 0),
                                            ("none", (8, 64), 8, 250), ("64B", (32, 64), 32, 10),
                                            ("32B", (16, 32), 192, 290)])
def test_tma_box_matches_the_model_byte_for_byte(hopper, mode, box, c0, c1):
    from book.kernels.probes import hopper_probes as P

    torch = hopper
    a = ints((300, 200), 1)
    t = torch.from_numpy(bits(a).view(np.int16)).cuda().view(torch.bfloat16)
    got = P.tma_tile(t, c0, c1, box, mode)
    assert np.array_equal(got, H.tma_box(bits(a), c0, c1, box, mode))


@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("mode,kstep", [("none", 0), ("128B", 0), ("128B", 3), ("64B", 1)])
def test_one_wgmma_matches_the_model_and_the_product(hopper, n, mode, kstep):
    from book.kernels.probes import hopper_probes as P

    width = H.SWIZZLE_WIDTH[mode] if mode != "none" else 128
    k = width // 2
    A, B = ints((64, k), 2), ints((n, k), 3)
    img = np.zeros(64 * width + n * width, dtype=np.uint8)
    b0 = 64 * width
    if mode == "none":  # core matrices laid out by the descriptor model itself
        da, db = H.descriptor(0, 128, 256, "none"), H.descriptor(b0, 128, 256, "none")
        for mat, d in ((A[:, :16], da), (B[:, :16], db)):
            addr = H.operand_addresses(d, mat.shape[0])
            img[addr], img[addr + 1] = bits(mat) & 0xFF, bits(mat) >> 8
    else:  # as TMA writes them
        img[:b0] = H.tma_box(bits(A), 0, 0, (k, 64), mode)
        img[b0:] = H.tma_box(bits(B), 0, 0, (k, n), mode)
        da = H.descriptor(32 * kstep, 16, 8 * width, mode)
        db = H.descriptor(b0 + 32 * kstep, 16, 8 * width, mode)
    got = P.wgmma_once(img, da, db, n)
    placed = np.zeros((64, n), dtype=np.float32)
    for th in range(128):
        for i in range(n // 2):
            placed[H.d_coords(th, i)] = got[th, i]
    ks = slice(16 * kstep, 16 * kstep + 16)
    assert np.array_equal(placed, H.wgmma_model(img, da, db, n, dtype="bfloat16"))
    assert np.array_equal(placed, A[:, ks] @ B[:, ks].T)


@pytest.mark.parametrize("shape", [(256, 512, 1024), (200, 520, 1016), (1, 4096, 1024),
                                   (64, 512, 1024), (130, 4096, 14336)])
@pytest.mark.parametrize("tile", [{}, {"cluster": 1}, {"multicast": True}, {"inflight": 1},
                                  {"stages": 3}])
def test_the_dual_gemm_against_float64(hopper, shape, tile):
    from book.kernels.gemms import wgmma_gemm as W

    torch = hopper
    F = torch.nn.functional
    T, d, h = shape
    gen = torch.Generator(device="cuda").manual_seed(T + d + h)
    x = torch.randn(T, d, device="cuda", generator=gen).bfloat16()
    wg = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wu = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    g, u = x.double() @ wg.double().T, x.double() @ wu.double().T
    o = torch.full((T, h), float("nan"), device="cuda", dtype=torch.bfloat16)
    W.swiglu_wgmma(x, wg, wu, o, tile=W.HopperTile(**tile))
    ref = F.silu(g) * u
    assert not o.isnan().any()
    assert float((o.double() - ref).norm() / ref.norm()) < 1e-2


@pytest.mark.parametrize("shape,cols", [((512, 1024, 14336), 12672), ((200, 520, 1016), 512),
                                        ((384, 512, 2048), 1024)])
def test_a_column_split_covers_every_output_once(hopper, shape, cols):
    """The wide tile's launch over columns [0, cols), the narrow tile's over the rest (the
    dispatcher's ColumnSplit at T = 512): every output written (NaN-poisoned before), right."""
    from book.kernels.gemms import wgmma_gemm as W
    from book.kernels.gemms.waves import NARROW

    torch = hopper
    F = torch.nn.functional
    T, d, h = shape
    gen = torch.Generator(device="cuda").manual_seed(T + h)
    x = torch.randn(T, d, device="cuda", generator=gen).bfloat16()
    wg = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wu = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    ref = F.silu(x.double() @ wg.double().T) * (x.double() @ wu.double().T)
    for cluster in (1, 2):
        split = W.ColumnSplit(W.HopperTile(cluster=cluster),
                              W.HopperTile(bn=NARROW.bn, stages=NARROW.stages, cluster=cluster),
                              cols)
        o = torch.full((T, h), float("nan"), device="cuda", dtype=torch.bfloat16)
        for _ in range(2):  # planned, then the plan's two launches again
            W.swiglu_wgmma(x, wg, wu, o, tile=split)
            assert not o.isnan().any()
            assert float((o.double() - ref).norm() / ref.norm()) < 1e-2


def test_controls_and_float16(hopper):
    from book.kernels.gemms import wgmma_gemm as W

    torch = hopper
    T, d, h = 200, 520, 1016
    gen = torch.Generator(device="cuda").manual_seed(4)
    for dt in (torch.bfloat16, torch.float16):
        x = torch.randn(T, d, device="cuda", generator=gen).to(dt)
        wg = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).to(dt)
        wu = (torch.randn(h, d, device="cuda", generator=gen) / math.sqrt(d)).to(dt)
        g, u = x.double() @ wg.double().T, x.double() @ wu.double().T
        err = lambda o, r: float((o.double() - r).norm() / r.norm())  # noqa: E731
        assert err(W.swiglu_wgmma_identity(x, wg, wu), g + u) < 1e-2
        G, U = W.gate_up_wgmma(x, wg, wu)
        assert err(G, g) < 1e-2 and err(U, u) < 1e-2
        wc = torch.cat([wg, wu], 0)
        assert err(W.matmul_wgmma(x, wc), x.double() @ wc.double().T) < 1e-2
        assert err(W.swiglu_wgmma(x, wg, wu), torch.nn.functional.silu(g) * u) < 1e-2


def test_a_repeated_call_reuses_its_plan_and_stays_right(hopper):
    from book.kernels.gemms import wgmma_gemm as W

    torch = hopper
    x = torch.randn(64, 512, device="cuda").bfloat16()
    wg = torch.randn(1024, 512, device="cuda").bfloat16() / 20
    wu = torch.randn(1024, 512, device="cuda").bfloat16() / 20
    o = torch.empty(64, 1024, device="cuda", dtype=torch.bfloat16)
    W.swiglu_wgmma(x, wg, wu, o)
    pc = plan.planned("swiglu_wgmma")  # the plain call's plans (book.kernels.host.plan)
    n, fast = len(pc._plans), pc.stats["fast"]
    first = o.clone()
    o.fill_(float("nan"))
    W.swiglu_wgmma(x, wg, wu, o)
    assert len(pc._plans) == n and pc.stats["fast"] == fast + 1 and torch.equal(o, first)
    x.mul_(2)  # same tensors, new values: the plan holds addresses, never values
    W.swiglu_wgmma(x, wg, wu, o)
    assert not torch.equal(o, first)
