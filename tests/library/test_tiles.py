"""Every kernel's tile is one protocol (book/kernels/gemms/tile.py): found, not listed.

Every class of ``book.kernels`` with a ``validate`` is a ``TileShape`` that says its own
``problems`` and ``shared_bytes``; each default tile validates and describes itself in one
line naming its shared memory; a tile with several problems is refused naming each of them;
and (extended: NVVM and ptxas, no GPU) ``shared_bytes`` is what ptxas reports for the kernel
the tile builds, so a tile's 48 KiB check refuses what ptxas would."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re

import pytest

import book  # (GPU or simulator first)
import book.kernels
from book.kernels.gemms.tile import TileShape


def _tile_classes():
    found = {}
    for info in pkgutil.walk_packages(book.kernels.__path__, "book.kernels."):
        if info.ispkg:
            continue
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and obj.__module__ == mod.__name__ \
                    and callable(getattr(obj, "validate", None)) and obj is not TileShape:
                found[f"{mod.__name__}.{name}"] = obj
    return found


TILES = _tile_classes()


def _example(cls):
    """The class's default tile (a ColumnSplit: chapter 9's tile, then a narrower one)."""
    from book.kernels.gemms.wgmma_gemm_tile import TILE, ColumnSplit

    if cls is ColumnSplit:
        return ColumnSplit(TILE, dataclasses.replace(TILE, bn=64), 8 * TILE.bn)
    return cls()


def test_the_tiles_are_found():
    # the seven tiles the house look counted (and the FP8 GEMV's and the column split)
    names = {n.rsplit(".", 1)[1] for n in TILES}
    assert {"Tile", "MmaTile", "HopperTile", "ColumnSplit", "GemvTile", "MmaGemvTile",
            "StagedTile", "WgmmaGemvTile", "Fp8GemvTile"} <= names, sorted(names)


@pytest.mark.parametrize("name", sorted(TILES))
def test_every_tile_is_one_protocol(name):
    cls = TILES[name]
    assert issubclass(cls, TileShape), f"{name} has a validate of its own: make it a TileShape"
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name
    assert "validate" not in vars(cls), f"{name}: say problems(); TileShape.validate raises"
    assert cls.problems is not TileShape.problems, f"{name} must say its problems()"
    assert cls.shared_bytes is not TileShape.shared_bytes, f"{name} must say its shared_bytes"
    t = _example(cls)
    assert t.problems() == [] and t.validate() is t
    assert isinstance(t.shared_bytes, int) and t.shared_bytes > 0
    line = t.describe()
    assert "\n" not in line and f"{t.shared_bytes:,}" in line, line


def test_a_tile_is_refused_naming_every_problem():
    from book.kernels.gemv.cuda_core_gemv import GemvTile

    bad = GemvTile(tokens=0, threads=33)
    with pytest.raises(ValueError) as e:
        bad.validate()
    msg = str(e.value)
    assert msg.startswith(f"invalid {bad!r}: ")
    assert "tokens and rows must be at least 1" in msg and "threads must be whole warps" in msg


def test_a_column_split_names_which_tile_is_wrong():
    from book.kernels.gemms.wgmma_gemm_tile import TILE, ColumnSplit

    bad = ColumnSplit(TILE, dataclasses.replace(TILE, stages=1), 100)
    p = bad.problems()
    assert p == ["narrow: stages must be at least 2",
                 "cols must be a positive multiple of both tiles' bn (128, 128)"], p


def test_the_cuda_core_gemm_tile_refuses_what_a_block_cannot_hold():
    from book.kernels.gemms.gemm import Tile

    p = Tile(bm=512, bn=512, tm=4, tn=4).problems()
    assert any("16384 threads: a block takes 32 to 1024" in q for q in p), p
    assert any("bytes of shared memory" in q and "48 KiB" in q for q in p), p


@pytest.mark.extended
def test_shared_bytes_is_what_ptxas_reports():
    # sm_90 reserves 1 KiB of every block's shared memory on top of what the kernel declares
    from book.kernels.gemv import cuda_core_gemv as ccg
    from book.kernels.gemms import gemm
    from book.kernels.host import ptx

    cases = {"decode_gemv_t1": ccg.gemv_tile(1, 4096), "decode_gemv_t4_nobias": ccg.gemv_tile(4, 4096),
             "decode_gemv_t8": ccg.gemv_tile(8, 4096), "gemm_sim_tile": gemm.SIM_TILE,
             "gemm_bk16": gemm.TILE_VARIANTS["bk16_flat_u2"]}
    texts = ptx.ptx_many([(n, "bfloat16") for n in cases])
    for name, tile in cases.items():
        ok, log = ptx.ptxas_log(texts[f"{name}/bfloat16"], arch="sm_90")
        assert ok, log
        smem = int(re.search(r"(\d+) bytes smem", log).group(1))
        assert smem == tile.shared_bytes + 1024, (name, tile, smem, log)
