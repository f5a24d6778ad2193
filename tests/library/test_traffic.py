"""Traffic counts against hand counts.

The Vizuara article ("The SwiGLU kernel", book.sources): T=4, h=8 gives 32
elements; reading gate and up and writing the result is 2*32 + 32 = 96 transfers
(the fused 3Th); the unfused two-kernel path is 5Th = 160; the epilogue reads
gate once and writes once (2Th); ~5 flops per element, 12 bytes per element in
f32, intensity ~0.4 flop/byte.
"""

import numpy as np
import pytest

import book  # noqa: F401
from book import traffic


def test_seed_000_hand_counts():
    naive = traffic.activation(4, 8, "float32", "naive")
    fused = traffic.activation(4, 8, "float32", "fused")
    epi = traffic.activation(4, 8, "float32", "epilogue")
    assert (naive.transfers, fused.transfers, epi.transfers) == (160, 96, 64)
    assert (naive.bytes, fused.bytes, epi.bytes) == (640, 384, 256)
    assert fused.flops == naive.flops == 5 * 32
    assert fused.intensity == pytest.approx(5 / 12)  # seed: "5 / 12 ~ 0.4"
    assert naive.transfers / fused.transfers == pytest.approx(5 / 3)


def test_breakdown_rows_add_up():
    naive = traffic.activation(4, 8, "float32", "naive")
    assert [(s.reads, s.writes) for s in naive.breakdown] == [(32, 32), (64, 32)]
    assert naive.reads + naive.writes == naive.transfers
    rows = naive.table()
    assert sum(r["bytes"] for r in rows) == naive.bytes
    assert rows[0]["step"].startswith("silu kernel")


def test_any_shape_and_dtype():
    T, h = 8192, 14336
    n = T * h
    f16 = traffic.activation(T, h, "float16", "fused")
    assert f16.bytes == 3 * n * 2 and f16.itemsize == 2
    assert traffic.activation(T, h, np.float32, "naive").bytes == 5 * n * 4
    assert traffic.activation(T, h, np.dtype("float16"), "fused").dtype == "float16"
    assert traffic.activation(T, h, "bf16", "fused").dtype == "bfloat16"
    assert traffic.activation(1, 18944, "float32", "fused").transfers == 3 * 18944
    assert traffic.dtype_name("fp16") == traffic.dtype_name(np.float16) == "float16"
    assert traffic.itemsize("bfloat16") == 2


def test_mlp_up_hand_count():
    # T=2, d=3, h=4: x has 6 elements, each weight 12, each [T, h] tensor 8.
    un = traffic.mlp_up(2, 3, 4, "float32", "unfused")
    assert (un.reads, un.writes) == (2 * (6 + 12) + 2 * 8, 3 * 8)
    ep = traffic.mlp_up(2, 3, 4, "float32", "epilogue")
    assert (ep.reads, ep.writes) == (6 + 2 * 12, 8)
    assert un.flops == ep.flops == 2 * (2 * 2 * 3 * 4) + 5 * 8
    assert un.bytes == 4 * 76 and ep.bytes == 4 * 38


def test_gemm_hand_count_and_the_unfused_mlp_up_is_two_of_them_and_the_activation():
    # [2, 3] @ [3, 4]: 6 + 12 elements read, 8 written, 2 * 2 * 3 * 4 flops
    g = traffic.gemm(2, 3, 4, "bfloat16")
    assert (g.reads, g.writes, g.flops, g.bytes, g.dtype) == (18, 8, 48, 2 * 26, "bfloat16")
    un = traffic.mlp_up(2, 3, 4, "bfloat16", "unfused")
    act = traffic.activation(2, 4, "bfloat16", "fused")
    assert un.bytes == 2 * g.bytes + act.bytes and un.flops == 2 * g.flops + act.flops
    with pytest.raises(ValueError, match="K must be a positive integer"):
        traffic.gemm(2, 0, 4)


def test_mlp_up_large_is_compute_heavy():
    ep = traffic.mlp_up(2048, 4096, 8192, "bfloat16", "epilogue")
    assert ep.intensity > 1000
    assert traffic.mlp_up(2048, 4096, 8192, "bfloat16", "unfused").bytes > ep.bytes


@pytest.mark.parametrize("kwargs,msg", [
    (dict(T=0, h=8), "T must be a positive integer"),
    (dict(T=4, h=2.5), "h must be a positive integer"),
    (dict(T=4, h=8, dtype="int8"), "unknown dtype"),
    (dict(T=4, h=8, variant="fast"), "unknown activation variant"),
])
def test_bad_input_says_what_is_wrong(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        traffic.activation(**kwargs)
    with pytest.raises(ValueError, match="unknown mlp_up variant"):
        traffic.mlp_up(1, 1, 1, "float32", "fused")


def test_one_dtype_module_names_every_spelling():
    from book import dtypes
    from book.kernels import reference

    for spelling, want in [("fp32", "float32"), ("float", "float32"), ("<f4", "float32"),
                           ("F16", "float16"), ("half", "float16"), ("torch.bfloat16", "bfloat16"),
                           ("bf16", "bfloat16"), (np.float16, "float16"),
                           (np.dtype("float32"), "float32")]:
        assert dtypes.name(spelling) == want
        # traffic and the reference answer through the same function
        assert traffic.dtype_name(spelling) == reference.dtype_name(spelling) == want
    for bad in ("int8", np.float64, np.uint16, "float64"):
        with pytest.raises(ValueError, match="unknown dtype .*float32, float16, bfloat16"):
            dtypes.name(bad)
    assert dtypes.itemsize("bf16") == 2 and dtypes.itemsize(np.float32) == 4
    assert set(dtypes.ITEMSIZE) == set(dtypes.DTYPES) == set(dtypes.STORAGE)
    torch = pytest.importorskip("torch")
    assert [dtypes.name(t) for t in (torch.float32, torch.float16, torch.bfloat16)] == list(dtypes.DTYPES)
