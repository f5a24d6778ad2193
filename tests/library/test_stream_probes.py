"""The weight-stream probes (book.kernels.probes.stream_probes): their layout and shares on the CPU,
their PTX through ptxas for sm_90a (benchmarks/weight_stream.py times them on a GPU)."""

import re

import numpy as np
import pytest

from book.kernels.instructions import hopper as H
from book.kernels.probes import stream_probes as sp


@pytest.mark.parametrize("h,blocks", [(14336, 132), (7, 3), (5, 5), (130, 132)])
def test_the_bulk_probe_reads_every_row_once_in_whole_rows(h, blocks):
    spans = sp.bulk_spans(h, 8192, blocks)
    assert spans[0] == 0 and spans[-1] == h * 8192 and (np.diff(spans) >= 0).all()
    rows = np.diff(spans) // 8192
    assert (np.diff(spans) % 8192 == 0).all() and rows.max() - rows.min() <= 1


def test_the_ring_starts_after_its_barriers_on_the_swizzle_period():
    lay = sp.ring_layout(6, 16384)
    assert lay["empty"] == 48 and lay["ring"] == H.SWIZZLE_PERIOD
    assert lay["end"] == H.SWIZZLE_PERIOD + 6 * 16384 and lay["shared"] == lay["end"] + 1024
    assert sp.ring_layout(100, 64)["ring"] == 2 * H.SWIZZLE_PERIOD  # 1,600 bytes of barriers


def test_a_bulk_copy_of_a_size_tma_cannot_make_is_refused():
    with pytest.raises(ValueError, match="multiple of 16"):
        sp.bulk_kernel(4, 1000)


NAMES = ["stream_ldg", "stream_tma", "stream_bulk"]


@pytest.fixture(scope="module")
def texts():
    from book.kernels.host import ptx

    out = ptx.ptx_many([(n, "bfloat16") for n in NAMES], cc=H.ARCH)
    return {n: out[f"{n}/bfloat16"] for n in NAMES}


@pytest.mark.parametrize("name,instruction", [
    ("stream_ldg", "ld.global.v4"),
    ("stream_tma", "cp.async.bulk.tensor.2d.shared::cluster.global.tile"),
    ("stream_bulk", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"),
])
def test_each_probe_assembles_and_reads_the_way_it_is_named(texts, name, instruction):
    from book.kernels.host import ptx

    text = texts[name]
    ok, log = ptx.ptxas_log(text)
    assert ok, log[-2000:]
    assert instruction in text
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"]
    if name == "stream_ldg":  # the loads feed a store that never happens, so they stay
        assert text.count("ld.global.v4") >= 2 and "st.global" in text
