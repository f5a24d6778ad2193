import math
from pathlib import Path

import numpy as np
import pytest

import book
from book import bench
from repo import ROOT as REPO


sim_only = pytest.mark.skipif(not book.gpu.SIMULATED, reason="simulator behaviour")
gpu_only = pytest.mark.gpu   # skipped in the simulator (tests/conftest.py)


@sim_only
def test_measure_in_simulator_refuses_with_reason():
    with pytest.raises(bench.SimulatorTimingError, match="not measured: .*simulator"):
        bench.measure(lambda a: None, [(np.zeros(4),)], bytes_moved=16)
    with pytest.raises(bench.SimulatorTimingError, match="book/data"):
        bench.host_overhead(lambda: None, [()])
    with pytest.raises(bench.SimulatorTimingError, match="not measured"):
        bench.measure_back_to_back(lambda: None, [()])
    with pytest.raises(bench.SimulatorTimingError, match="not measured"):
        bench.host_timings({"a": (lambda: None, [()])})


def test_summarize_matches_numpy_percentiles():
    xs = [5.0, 1.0, 3.0, 2.0, 4.0, 10.0, 7.0]
    med, p10, p90 = bench.summarize(xs)
    assert med == np.percentile(xs, 50)
    assert p10 == pytest.approx(np.percentile(xs, 10))
    assert p90 == pytest.approx(np.percentile(xs, 90))
    assert bench.summarize([2.0]) == (2.0, 2.0, 2.0)
    assert bench.summarize([1.0, 3.0])[0] == 2.0
    with pytest.raises(ValueError, match="no samples"):
        bench.summarize([])
    with pytest.raises(ValueError, match="positive"):
        bench.summarize([1.0, -1.0])


def test_rotation_count():
    mib = 1 << 20
    # 1 MiB sets against 50 MiB of L2: the other n-1 sets must cover 2 x L2
    n = bench.rotation_count(mib, l2_bytes=50 * mib)
    assert n == 101 and (n - 1) * mib >= 2 * 50 * mib
    assert bench.rotation_count(200 * mib, l2_bytes=50 * mib) == 2  # big sets: alternate
    assert bench.rotation_count(mib, l2_bytes=50 * mib, factor=1) == 51
    if book.gpu.SIMULATED:
        assert bench.rotation_count(mib) == 1  # simulator: no cache to defeat
    with pytest.raises(ValueError, match="positive"):
        bench.rotation_count(0, l2_bytes=mib)


def test_effective_bandwidth():
    n = 8192 * 14336
    assert bench.effective_bandwidth(3 * 4 * n, 0.5e-3) == pytest.approx(3 * 4 * n / 0.5e-3)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="positive number of seconds"):
            bench.effective_bandwidth(100, bad)


def test_batch_size():
    assert bench.batch_size(1e-3, 200e-6) == 1  # long kernel: one call per sample
    assert bench.batch_size(2e-6, 200e-6) == 100  # decode-size kernel: batch
    assert bench.batch_size(1e-9, 1.0) == bench.MAX_BATCH
    assert bench.batch_size(1e-6, 0) == 1
    with pytest.raises(ValueError):
        bench.batch_size(0.0)


def test_timing_row_and_rates():
    t = bench.Timing(median_s=1e-3, p10_s=0.9e-3, p90_s=1.2e-3, reps=50, method="m",
                     bytes_moved=3_000_000_000, flops=2_000_000_000, batch=1)
    assert t.bandwidth == pytest.approx(3e12)
    assert t.flops_per_s == pytest.approx(2e12)
    row = t.row()
    assert row["seconds"] == 1e-3 and row["bandwidth"] == pytest.approx(3e12)
    assert set(row) >= {"seconds", "p10_s", "p90_s", "reps", "method", "bytes", "bandwidth",
                        "flops", "flops_per_s"}
    assert math.isclose(bench.Timing(1.0, 1.0, 1.0, 1, "m").row()["seconds"], 1.0)
    assert bench.Timing(1.0, 1.0, 1.0, 1, "m").bandwidth is None
    assert "GB/s" in str(t)


def test_a_timing_row_carries_the_clock_and_power_it_ran_at():
    """Every measurement reads the GPU's state after its samples (book.gpu.state, from
    nvidia-smi's line); a row carries the readings and their medians (issue 43, M3), and
    says None where none was taken (the simulator, or nvidia-smi missing)."""
    line = "1980, 123.84, 36, 0x0000000000000000"  # nvidia-smi --format=csv,noheader,nounits
    st = book.gpu.parse_state(line)
    assert st == {"sm_mhz": 1980.0, "power_w": 123.84, "temp_c": 36.0,
                  "reasons": "0x0000000000000000"}
    states = (st, book.gpu.parse_state("1830, 480.5, 60, 0x0000000000000004"),
              book.gpu.parse_state("1905, 470.0, 58, 0x0000000000000004"), {"error": "x"})
    row = bench.Timing(1e-3, 1e-3, 1e-3, 3, "m", gpu_states=states).row()
    assert (row["sm_mhz"], row["power_w"]) == (1905.0, 470.0)  # the medians of the readings
    assert len(row["gpu_states"]) == 4 and row["gpu_states"][3] == {"error": "x"}
    rec = bench.Timing(2e-6, 1e-6, 3e-6, 3, "m", samples_s=(1e-6, 2e-6, 3e-6),
                       gpu_states=states).record_fields()  # a benchmark record's row, in us
    assert rec == {"median_us": 2.0, "p10_us": 1.0, "p90_us": 3.0, "samples": 3,
                   "gpu_states": [dict(x) for x in states], "sm_mhz_median": 1905.0,
                   "power_w_median": 470.0}
    none = bench.Timing(1e-3, 1e-3, 1e-3, 3, "m").row()
    assert (none["sm_mhz"], none["power_w"], none["gpu_states"]) == (None, None, [])
    if book.gpu.SIMULATED:
        assert book.gpu.state() == {}
    assert book.gpu.STATE_QUERY.split(",")[:2] == ["clocks.sm", "power.draw"]


def test_arg_sets_validation():
    with pytest.raises(ValueError, match="empty"):
        bench._check_arg_sets([])
    with pytest.raises(TypeError, match="list of argument tuples"):
        bench._check_arg_sets(lambda: None)
    assert bench._check_arg_sets([(1, 2), [3, 4], 5]) == [(1, 2), (3, 4), (5,)]


@gpu_only
def test_measure_a_copy_kernel_on_the_gpu():
    from numba import cuda

    @cuda.jit
    def copy(src, dst):
        i = cuda.grid(1)
        if i < dst.size:
            dst[i] = src[i]

    n = 1 << 24  # 64 MiB per array
    nbytes = 2 * 4 * n
    sets = [(cuda.to_device(np.ones(n, np.float32)), cuda.device_array(n, np.float32))
            for _ in range(bench.rotation_count(nbytes))]
    grid = (n + 255) // 256
    t = bench.measure(lambda s, d: copy[grid, 256](s, d), sets, bytes_moved=nbytes, reps=20)
    peak = book.gpu.device_info().peak_bandwidth
    assert 0 < t.p10_s <= t.median_s <= t.p90_s
    assert 0.3 * peak < t.bandwidth < 1.02 * peak  # below the physical ceiling
    assert len(t.samples_s) == 20 and not t.notes
    assert np.array_equal(sets[0][1].copy_to_host(), np.ones(n, np.float32))


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@gpu_only
def test_measure_torch_op_and_graph_replay():
    torch = _torch_cuda()
    n = 1 << 22
    sets = [(torch.randn(n, device="cuda"), torch.randn(n, device="cuda"),
             torch.empty(n, device="cuda")) for _ in range(bench.rotation_count(3 * 4 * n))]
    t = bench.measure(lambda a, b, o: torch.add(a, b, out=o), sets, bytes_moved=3 * 4 * n,
                      reps=20)
    assert t.bandwidth < 1.02 * book.gpu.device_info().peak_bandwidth and not t.notes
    torch.testing.assert_close(sets[0][2], sets[0][0] + sets[0][1])
    small = [(torch.randn(1, 4096, device="cuda"),) for _ in range(8)]
    g = bench.measure(lambda x: torch.nn.functional.silu(x), small, graph=True, reps=10)
    assert g.method.startswith("CUDA graph replay") and g.batch > 1 and g.median_s < 20e-6


@gpu_only
def test_graph_replay_of_numba_launches_on_the_capture_stream():
    _torch_cuda()
    from numba import cuda

    @cuda.jit
    def inc(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1.0

    a = cuda.to_device(np.zeros(4096, np.float32))

    def launch(x, stream=0):
        inc[32, 128, stream](x)

    t = bench.measure(launch, [(a,)], graph=True, reps=5)
    assert t.method.startswith("CUDA graph replay") and t.median_s < 20e-6
    # every captured and replayed launch really ran: warm-up + captures + replays
    assert a.copy_to_host()[0] > t.batch * t.reps


# ------------------------------------------------------------------ --only / --rows-out / merge
def _row(variant, dtype="float32", shape=(8192, 14336), seconds=1e-3, kind="kernel", nbytes=None):
    n = shape[0] * shape[1]
    b = 3 * 4 * n if nbytes is None else nbytes
    return {"kind": kind, "variant": variant, "dtype": dtype, "shape": list(shape),
            "seconds": seconds, "bytes": b, "bandwidth": b / seconds, "flops": None,
            "flops_per_s": None, "method": "m"}


def _doc(rows, gpu="NVIDIA H100 80GB HBM3", command="python -m book.bench", checks=()):
    return {"provenance": {"gpu": gpu, "command": command, "peak_bandwidth": 3.35e12},
            "rows": rows, "checks": list(checks), "targets": [], "tuning": [], "notes": []}


def test_merge_replaces_same_rows_keeps_the_rest_and_their_provenance():
    from book.bench.merge import merge

    record = _doc([_row("vec4", seconds=0.6e-3), _row("torch_add", kind="reference", seconds=0.6e-3),
                   _row("half8", "float16", seconds=0.3e-3)],
                  checks=[{"variant": "vec4", "dtype": "float32", "shape": [8192, 14336], "ok": False,
                           "error": "old"}])
    part = _doc([_row("vec4", seconds=0.5e-3), _row("half8_torch_call", "float16", kind="launch")],
                command="python -m book.bench --only vec4|torch_call --rows-out x.json",
                checks=[{"variant": "vec4", "dtype": "float32", "shape": [8192, 14336], "ok": True,
                         "error": None}])
    part["only"] = "vec4|torch_call"
    out = merge(record, part)
    assert record["rows"][0]["seconds"] == 0.6e-3  # the input is not modified
    by = {(r["variant"], r["dtype"]): r for r in out["rows"]}
    assert len(out["rows"]) == 4
    assert by[("vec4", "float32")]["seconds"] == 0.5e-3
    assert by[("vec4", "float32")]["provenance"]["command"].endswith("--rows-out x.json")
    assert "provenance" not in by[("torch_add", "float32")]  # untouched rows: the full run's
    assert out["provenance"] == record["provenance"]
    assert [c["error"] for c in out["checks"]] == [None]
    assert out["merged"][0]["only"] == "vec4|torch_call" and len(out["merged"][0]["rows"]) == 2
    tuned = merge(record, dict(part, tuning=[{"variant": "vec4", "dtype": "float32", "shape": [1, 8],
                                               "block": 256, "max_blocks": None, "seconds": 1.0}]))
    assert tuned["tuning"][0]["provenance"]["command"].endswith("x.json")
    # targets recomputed from the merged rows: vec4 0.5 ms against torch.add 0.6 ms
    t = [x for x in out["targets"] if "torch.add bandwidth" in x["target"] and "float32" in x["target"]]
    assert t and t[0]["value"] == pytest.approx(1.2) and t[0]["met"]
    # a second merge of the same row takes it from the first group, which goes when empty
    again = merge(out, _doc([_row("vec4", seconds=0.55e-3), _row("half8_torch_call", "float16",
                                                                  kind="launch")]))
    assert len(again["merged"]) == 1 and len(again["rows"]) == 4


def test_decode_targets_read_the_cheap_path_against_torch_add_of_the_same_run():
    from book.bench.targets import DECODE_SHAPES, targets

    shape = DECODE_SHAPES[-1]
    rows = [_row("launch_layer_fastcall", "float32", shape, kind="launch", seconds=9.6e-6),
            _row("launch_layer_torch_add", "float32", shape, kind="launch", seconds=8.5e-6),
            _row("launch_layer_fastcall", "bfloat16", shape, kind="launch", seconds=12e-6),
            _row("launch_layer_torch_add", "bfloat16", shape, kind="launch", seconds=6.5e-6)]
    got = {t["target"]: t for t in targets(rows, 3.35e12) if "cheap path" in t["target"]}
    f32 = [t for name, t in got.items() if name.startswith("float32")]
    bf16 = [t for name, t in got.items() if name.startswith("bfloat16")]
    assert len(f32) == 2 and all(t["met"] for t in f32)
    assert {t["met"] for t in bf16} == {False}  # 12 us > 10 us, and 1.85x torch.add
    ratio = next(t for t in bf16 if "/ torch.add" in t["target"])
    assert ratio["value"] == pytest.approx(12 / 6.5)


def test_merge_refuses_another_gpus_rows():
    from book.bench.merge import merge

    with pytest.raises(ValueError, match="cannot be merged .*--into"):
        merge(_doc([_row("vec4")]), _doc([_row("vec4")], gpu="Tesla T4"))


def test_merge_command_line(tmp_path, capsys):
    import json

    from book.bench import merge

    into = tmp_path / "h100.json"
    into.write_text(json.dumps(_doc([_row("vec4")])))
    part = tmp_path / "part.json"
    part.write_text(json.dumps(_doc([_row("ilp4")])))
    assert merge.main([str(part), "--into", str(into)]) == 0
    assert {r["variant"] for r in json.loads(into.read_text())["rows"]} == {"vec4", "ilp4"}
    assert "merged 1 row(s)" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SystemExit, match="not JSON"):
        merge.main([str(tmp_path / "bad.json"), "--into", str(into)])
    with pytest.raises(SystemExit, match="does not exist"):
        merge.main([str(tmp_path / "missing.json"), "--into", str(into)])


def test_merge_variants_takes_only_the_matching_rows_and_says_so(tmp_path, capsys):
    """A sweep's rows merged without the host rows of the same run: the record keeps its own
    host row, the merged entry names the pattern; a pattern matching nothing is refused."""
    import json

    from book.bench import merge

    into = tmp_path / "h100.json"
    into.write_text(json.dumps(_doc([_row("host_decode_planned", kind="launch", seconds=9e-6)])))
    part = tmp_path / "part.json"
    part.write_text(json.dumps(_doc([_row("sweep_ours", seconds=1e-4),
                                     _row("host_decode_planned", kind="launch", seconds=15e-6)])))
    assert merge.main([str(part), "--into", str(into), "--variants", "^sweep_"]) == 0
    doc = json.loads(into.read_text())
    by = {r["variant"]: r for r in doc["rows"]}
    assert by["host_decode_planned"]["seconds"] == 9e-6 and "provenance" not in by["host_decode_planned"]
    assert by["sweep_ours"]["provenance"]["command"] == "python -m book.bench"
    assert doc["merged"][-1]["variants"] == "^sweep_" and len(doc["merged"][-1]["rows"]) == 1
    assert "merged 1 row(s)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="matches none of the file's rows .*sweep_ours"):
        merge.main([str(part), "--into", str(into), "--variants", "^nothing"])
    with pytest.raises(SystemExit, match="not a regular expression"):
        merge.main([str(part), "--into", str(into), "--variants", "("])
    with pytest.raises(SystemExit, match="give no FILE and no --variants"):
        merge.main(["--retarget", "--variants", "x", "--into", str(into)])


def test_only_needs_rows_out_and_a_valid_pattern(capsys):
    from book.bench import suite

    with pytest.raises(SystemExit):
        suite.main(["--only", "torch_call"])
    assert "--rows-out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        suite.main(["--only", "(", "--rows-out", "x.json"])
    assert "not a regular expression" in capsys.readouterr().err


def test_a_host_row_making_another_rows_call_is_measured_once():
    from book.bench.elementwise_rows import group_jobs

    host = {"vec4_python_launch": (len, [()], "d", "launch_layer_wrapper_numba_arrays"),
            "torch_eager_python_launch": (len, [()], "d", "launch_layer_torch_eager"),
            "wrapper_checks_only": (len, [()], "d", None),
            "launch_layer_wrapper_numba_arrays": (len, [()], "d"),
            "launch_layer_torch_eager": (len, [()], "d")}
    wanted, measured, same = group_jobs(host, lambda k: True)
    assert wanted == list(host)
    assert measured == ["launch_layer_wrapper_numba_arrays", "launch_layer_torch_eager",
                        "wrapper_checks_only"]
    assert same == {"vec4_python_launch": "launch_layer_wrapper_numba_arrays",
                    "torch_eager_python_launch": "launch_layer_torch_eager"}
    # only the alias asked for (--only python_launch): its call is still timed, once
    wanted, measured, _ = group_jobs(host, lambda k: k.endswith("python_launch"))
    assert wanted == ["vec4_python_launch", "torch_eager_python_launch"]
    assert measured == ["launch_layer_wrapper_numba_arrays", "launch_layer_torch_eager"]
    # a group without the row it names (run_decode alone): the row is timed itself
    alone = {k: v for k, v in host.items() if not k.startswith("launch_layer")}
    assert group_jobs(alone, lambda k: True)[1] == list(alone)


def test_shapes_name_the_suites_shapes_and_need_rows_out(capsys):
    from book.bench import suite

    with pytest.raises(SystemExit):
        suite.main(["--shapes", "1x18944"])
    assert "--rows-out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        suite.main(["--shapes", "1x18944", "3x5", "--rows-out", "x.json"])
    err = capsys.readouterr().err
    assert "--shapes 3x5: not a shape of the suite" in err and "1x18944" in err


@gpu_only
def test_back_to_back_shows_host_time_that_priming_hides():
    """A call whose host side takes 300 us around a 1 us kernel: measure() (queued behind the
    delay kernel) reports GPU time, measure_back_to_back the host's pace."""
    import time

    from numba import cuda

    @cuda.jit
    def inc(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1.0

    a = cuda.to_device(np.zeros(1024, np.float32))

    def slow_host(x):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 300e-6:
            pass
        inc[4, 256](x)

    primed = bench.measure(slow_host, [(a,)], reps=5, min_batch_s=0)
    paced = bench.measure_back_to_back(slow_host, [(a,)], calls=10, reps=5)
    assert paced.median_s >= 290e-6 > 10 * primed.median_s
    assert paced.batch == 10 and "back-to-back" in paced.method


def test_recorded_merges_list_their_rows_and_keep_their_provenance():
    """book/data/*.json after `python -m book.bench.merge`: every merged row carries the
    provenance of the run that measured it, and the record's `merged` list names exactly
    those rows."""
    import json

    from book.bench.merge import row_key

    for path in sorted((Path(book.__file__).parent / "data").glob("*.json")):
        doc = json.loads(path.read_text())
        stamped = {row_key(r): r["provenance"] for r in doc["rows"] if "provenance" in r}
        listed = {}
        for m in doc.get("merged", []):
            # written by the bench (python -m book.bench) or by a measurement script of
            # benchmarks/ that writes the bench's rows (python -m benchmarks.tensorcore_bench;
            # before issue 44 run as a file, python3 benchmarks/tensorcore_bench.py)
            cmd = m["provenance"].get("command", "").split()
            script = (cmd[2].replace(".", "/") + ".py" if cmd[1:2] == ["-m"] and len(cmd) > 2
                      else cmd[1] if len(cmd) > 1 else "")
            assert cmd and (cmd[1:3] == ["-m", "book.bench"] or (
                script.startswith("benchmarks/") and (REPO / script).is_file())), (path, cmd)
            for kind, variant, dtype, shape in m["rows"]:
                listed[(kind, variant, dtype, tuple(shape))] = m["provenance"]
        assert listed == stamped, path.name


def test_pass_share_agrees_with_the_measurement_table_where_it_has_its_rows():
    """Issue 30: the share table gave GEMM 2,477 us + eager pass 721.8 us (the pass timed alone)
    beside a one-call "cuBLAS + eager SwiGLU" of 3,496 us: a table that did not add up. Where the
    record has the one-call rows and what the pass adds is beyond their spread, the share is what
    the pass adds inside the call; where the spread swallows it (a noisy GEMM row slower than the
    call that contains it) or there is no one-call row, the two timed apart, said so."""
    from book.bench.tensorcore import pass_share, pass_shares
    from book.data import Results

    def row(variant, shape, seconds, spread=1e-6):
        return {"kind": "tensorcore", "variant": variant, "dtype": "bfloat16",
                "shape": list(shape), "seconds": seconds, "p10_s": seconds - spread / 2,
                "p90_s": seconds + spread / 2}

    big, small = (8192, 4096, 14336), (1, 4096, 14336)
    apart = [row("cublas_bf16_gemm_share", big, 2.561e-3), row("separate_pass_eager", big, 0.72e-3),
             row("separate_pass_compiled", big, 0.233e-3),
             row("cublas_bf16_gemm_share", small, 85e-6), row("separate_pass_eager", small, 5e-6),
             row("separate_pass_compiled", small, 2e-6)]
    res = Results({}, [row("cublas_bf16_gemm", big, 2.477e-3),
                       row("cublas_mlp_up_eager", big, 3.496e-3),
                       row("cublas_mlp_up_compiled", big, 2.715e-3)] + apart)
    s = pass_share(res, *big, "eager")
    assert s["gemm"]["variant"] == "cublas_bf16_gemm" and s["timed"] == "one call"
    assert s["total"] == pytest.approx(3.496e-3)  # the measurement table's row, exactly
    assert s["pass_s"] == pytest.approx(3.496e-3 - 2.477e-3)
    assert s["share"] == pytest.approx((3.496 - 2.477) / 3.496)
    assert [r["variant"] for r in s["rows"]] == ["cublas_bf16_gemm", "cublas_mlp_up_eager"]
    t = pass_share(res, *small, "eager")  # T = 1: no one-call row, the two timed apart
    assert t["gemm"]["variant"] == "cublas_bf16_gemm_share" and t["timed"] == "apart"
    assert t["total"] == pytest.approx(90e-6) and t["share"] == pytest.approx(5 / 90)
    # a GEMM row whose spread is wider than what the compiled pass adds (here it came out
    # slower than GEMM + pass): both passes read apart, never a negative share
    noisy = Results({}, [row("cublas_bf16_gemm", big, 3.181e-3, spread=0.715e-3),
                         row("cublas_mlp_up_eager", big, 3.855e-3, spread=0.44e-3),
                         row("cublas_mlp_up_compiled", big, 2.639e-3, spread=0.18e-3)] + apart)
    n = pass_shares(noisy, *big)
    assert n["timed"] == "apart" and n["gemm"]["variant"] == "cublas_bf16_gemm_share"
    assert n["compiled"]["share"] == pytest.approx(0.233 / (2.561 + 0.233))
    assert n["eager"]["share"] == pytest.approx(0.72 / (2.561 + 0.72))


def test_decode_mlp_up_targets_are_issue_31s_ratios():
    from book.bench import decode
    from book.bench.targets import targets
    from book.specs import GPU_SPECS

    def row(variant, T, seconds, dtype="bfloat16", kind="decode"):
        wb = decode.weight_bytes()
        return {"kind": kind, "variant": variant, "dtype": dtype, "shape": [T, decode.D, decode.H],
                "seconds": seconds, "bandwidth": wb / seconds}

    rows = [row("decode_mlp_up", 1, 80e-6), row("cublas_linear_silu_compiled", 1, 142e-6),
            row("decode_mlp_up", 64, 95e-6), row("cublas_linear_silu_compiled", 64, 93e-6),
            row("host_decode_planned", 1, 9e-6, kind="launch"),
            row("host_decode_plain", 1, 10e-6, kind="launch"),
            row("host_torch_matmul", 1, 6e-6, kind="launch")]
    got = {t["target"]: t for t in decode.targets(rows)}
    t1 = got["decode MLP-up bfloat16 T=1: time / (cuBLAS + compiled SiLU*up)"]
    assert t1["value"] == pytest.approx(80 / 142) and t1["met"]
    t64 = got["decode MLP-up bfloat16 T=64: time / (cuBLAS + compiled SiLU*up)"]
    assert t64["value"] == pytest.approx(95 / 93) and not t64["met"]
    bw = got["decode MLP-up bfloat16 T=1: weight bandwidth / HBM peak"]
    peak = GPU_SPECS["H100-SXM"].memory_bandwidth
    assert bw["value"] == pytest.approx(decode.weight_bytes() / 80e-6 / peak)
    assert bw["met"] == (bw["value"] >= 0.85)
    assert "decode MLP-up bfloat16 T=64: weight bandwidth / HBM peak" not in got  # T <= 16 only
    # an H200's rows are held to the H200's peak, not the H100's
    h200 = {t["target"]: t for t in decode.targets(rows, GPU_SPECS["H200"].memory_bandwidth)}
    bw200 = h200["decode MLP-up bfloat16 T=1: weight bandwidth / HBM peak"]
    assert bw200["value"] == pytest.approx(decode.weight_bytes() / 80e-6
                                           / GPU_SPECS["H200"].memory_bandwidth)
    assert bw200["value"] < bw["value"]
    host = got["host_decode_planned: host time per call (us)"]
    assert host["value"] == pytest.approx(9.0) and host["met"] and "torch.matmul 6.0 us" in host["detail"]
    # the plain call: under 15 us, yet slower than torch.matmul's own call: not met
    plain = got["host_decode_plain: host time per call (us)"]
    assert plain["met"] and plain["value"] == pytest.approx(10.0)
    vs = got["host_decode_plain: host time / torch.matmul's"]
    assert vs["value"] == pytest.approx(10 / 6) and not vs["met"]
    assert "host_decode_planned: host time / torch.matmul's" not in got
    # the suite's and the merge's targets include them
    assert t1["target"] in {t["target"] for t in targets(rows, peak)}
    # and they take the peak the suite and the merge pass (an H200 record's, here)
    merged = {t["target"]: t for t in targets(rows, GPU_SPECS["H200"].memory_bandwidth)}
    assert merged[bw200["target"]]["value"] == pytest.approx(bw200["value"])


def test_a_call_that_waits_for_the_gpu_does_not_lengthen_every_later_sample(monkeypatch):
    """A call that waits for the GPU (a host-to-device copy of a number) reaches its start
    event whatever the delay: the primer retakes the sample with longer delays, says so once,
    and hands the next sample the delay it was given, not sixteen times it (the norm-quant
    timing's delays grew 16x a sample, for hours on an H200). Stand-in events and delay: the
    primer's bookkeeping only (the GPU's part runs in test_measure_a_copy_kernel_on_the_gpu)."""
    from book.bench import delay as D

    asked = []
    monkeypatch.setattr(D, "delay", lambda s, stream=None: asked.append(s))

    class Reached:   # the GPU is at the start event already: the host waited for it
        def query(self):
            return True

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 0.01

    notes, d = [], 1e-4
    for _ in range(5):
        t, d = D.primed(lambda: (Reached(), Reached()), d, notes)
        assert t == 1e-5
    assert d == 1e-4 and max(asked) == 1e-4 * 2 ** D.RETAKES
    assert len(asked) == 5 * (D.RETAKES + 1)
    assert notes == [D.NOT_PRIMED]


@pytest.mark.gpu
def test_torchs_quantization_never_waits_for_the_gpu():
    """quantize_torch makes its divisors on the GPU (a fill), never copies a number from the
    host: torch raises on any synchronizing call under sync_debug_mode "error"."""
    torch = pytest.importorskip("torch")
    from book import quantize as Q

    x = torch.randn(16, 256, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for scheme in ("tensor", "row"):
            Q.quantize_torch(x, scheme)
        Q.quantize_torch(x, scale=0.5)
    finally:
        torch.cuda.set_sync_debug_mode("default")
