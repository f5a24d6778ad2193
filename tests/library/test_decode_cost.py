"""book.decode_cost: chapter 6's decode figures read from one record, and the decode-step model."""

import pytest

from book import decode_cost
from book.data import Results

SHAPE = [1, 18944]


def _row(variant, seconds, dtype="float32", kind="launch", p10=None, p90=None):
    return {"kind": kind, "variant": variant, "dtype": dtype, "shape": SHAPE, "seconds": seconds,
            "p10_s": p10, "p90_s": p90}


ROWS = [
    _row("vec4", 2.5e-6, kind="kernel"),
    _row("vec4_torch_call", 27e-6, p10=26e-6, p90=28e-6),
    _row("launch_layer_fastcall", 9.6e-6, p10=9.5e-6, p90=9.8e-6),
    _row("launch_layer_torch_add", 8.5e-6),
    _row("launch_layer_graph_replay", 1.8e-6),
    _row("half8", 2.0e-6, "bfloat16", kind="kernel"),
    _row("half8_torch_call", 17e-6, "bfloat16"),
]


def test_paths_and_step_times_follow_the_slower_side():
    res = Results({}, ROWS)
    p = decode_cost.paths(res, "float32")
    assert set(p) == {"dispatcher", "fastcall", "graph"}
    assert p["fastcall"]["host_p90_s"] == 9.8e-6 and p["graph"]["host_s"] is None
    # the host is slower than the 2.5 us kernel on both Python paths; a replay is GPU time alone
    assert decode_cost.step_time(p["dispatcher"]) == pytest.approx(32 * 27e-6)
    assert decode_cost.step_time(p["fastcall"], layers=32) == pytest.approx(32 * 9.6e-6)
    assert decode_cost.step_time(p["graph"]) == pytest.approx(32 * 1.8e-6)
    slow_gpu = dict(p["fastcall"], gpu_s=20e-6)  # a kernel longer than its launch sets the pace
    assert decode_cost.step_time(slow_gpu, layers=2) == pytest.approx(40e-6)
    with pytest.raises(ValueError, match="layers"):
        decode_cost.step_time(p["graph"], layers=0)


def test_missing_rows_leave_their_path_and_layer_out():
    res = Results({}, ROWS)
    bf = decode_cost.paths(res, "bfloat16")  # no fastcall or graph rows for bfloat16 here
    assert set(bf) == {"dispatcher"}
    labels = [label for label, _k, _r in decode_cost.layer_rows(res, "float32")]
    assert labels[:1] == ["whole wrapper, torch tensors"]
    assert "CUDA-graph replay (GPU time)" in labels and len(labels) == 4
    kinds = {label: kind for label, kind, _r in decode_cost.layer_rows(res, "float32")}
    assert kinds["CUDA-graph replay (GPU time)"] == "gpu" and kinds["torch.add"] == "host"


def test_sources_name_each_run_once():
    prov = {"gpu": "H100", "date": "d0", "commit": "a" * 40, "command": "python -m book.bench"}
    merged = dict(prov, date="d1", command="python -m book.bench --only x --rows-out f")
    rows = [dict(ROWS[0]), dict(ROWS[1], provenance=merged), dict(ROWS[2], provenance=merged)]
    lines = decode_cost.sources(Results(prov, rows), rows)
    assert len(lines) == 2 and "d0" in lines[0] and "--only x" in lines[1]


def test_call_rows_are_the_group_rows_and_refuse_two_runs():
    res = Results({"date": "d0", "command": "python -m book.bench"}, ROWS)
    table = decode_cost.call_rows(res, "float32")
    host = [(label, r["variant"]) for label, whose, r in table if whose == "host"]
    # the layer figure's labels for the same rows: one figure per call, whichever table shows it
    assert host == [("whole wrapper, torch tensors", "vec4_torch_call"),
                    ("cheap path (fastcall), torch tensors", "launch_layer_fastcall")]
    assert [r["variant"] for _l, whose, r in table if whose == "GPU"] == [
        "vec4", "launch_layer_graph_replay"]
    other = dict(ROWS[2], provenance={"date": "d1", "command": "python -m book.bench --only x"})
    mixed = Results(res.provenance, [ROWS[0], ROWS[1], other])
    with pytest.raises(ValueError, match="2 runs.*launch_layer_fastcall"):
        decode_cost.call_rows(mixed, "float32")


def test_sources_print_no_device_paths():
    prov = {"gpu": "H100", "date": "d0", "commit": "a" * 40,
            "command": "python -m book.bench --only x --rows-out /root/out/rows.json"}
    (line,) = decode_cost.sources(Results(prov, ROWS[:1]), ROWS[:1])
    assert "/root" not in line and "--rows-out rows.json" in line
