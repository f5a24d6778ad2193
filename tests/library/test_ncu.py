"""book.bench.ncu, the one reader of Nsight Compute's reports, checked without a GPU.

The CSV reports the counter instruments parsed on the H100 were not kept, only what their
parsers made of them (book/data/ncu/*.json, records/bench/cublas_instructions_h200.json, each
with ncu's units beside the values where the script kept them). So each report is written back
here in ncu's own CSV shape (the ``==PROF==`` lines and the child's output before the header,
every column ncu prints, the values in the units ncu gave, thousands separated by commas) and
read again through the scripts' parsers: they must give what is recorded. ncu's text reports
(records/tensorcore/*.txt) were kept whole, so those are read as they are.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from book import data
from book.bench import ncu
from repo import ROOT

HEAD = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
        "Block Size", "Grid Size", "Device", "CC"]
PREAMBLE = ("==WARNING== Note: Running with unmodified GPU clocks.\n"
            "==PROF== Connected to process 644 (/usr/bin/python3.12)\n"
            "==PROF== Profiling \"kernel\" - 0: 0%....50%....100% - 9 passes\n"
            "launched ceiling, swiglu, identity, store2 with MmaTile(warps_m=2)\n"
            "==PROF== Disconnected from process 644\n")


def number(v: float, unit: str) -> str:
    """``v`` (base units) as ncu prints it in ``unit``: thousands separated by commas."""
    x = v / ncu.SCALE.get(unit, 1)
    return f"{x:,.0f}" if x == int(x) and abs(x) >= 1000 else repr(x)


def default_page(launches: list[tuple[str, list[tuple[str, str, float]]]]) -> str:
    """ncu --csv's default page: a row a launch and metric."""
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(HEAD + ["Section Name", "Metric Name", "Metric Unit", "Metric Value"])
    for i, (kernel, metrics) in enumerate(launches):
        for name, unit, v in metrics:
            w.writerow([i, 644, "python3.12", "127.0.0.1", kernel, 1, 7, "(256, 1, 1)",
                        "(57344, 1, 1)", 0, "9.0", "Command line profiler metrics", name, unit,
                        number(v, unit)])
    return PREAMBLE + out.getvalue()


def raw_page(launches: list[tuple[str, list[tuple[str, str, float]]]]) -> str:
    """ncu --csv --page raw: a row a launch, a column a metric, the units in the second row."""
    names = [n for n, _, _ in launches[0][1]]
    units = {n: u for _, ms in launches for n, u, _ in ms}
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(HEAD + ["launch__grid_size", *names])
    w.writerow([""] * len(HEAD) + ["", *(units[n] for n in names)])
    for i, (kernel, metrics) in enumerate(launches):
        got = {n: number(v, u) for n, u, v in metrics}
        w.writerow([i, 644, "python3.12", "127.0.0.1", kernel, 1, 7, "(256, 1, 1)",
                    "(132, 1, 1)", 0, "9.0", "132", *(got[n] for n in names)])
    return PREAMBLE + out.getvalue()


def test_ncu_check_reads_its_record_back():
    from benchmarks.ncu_check import parse_ncu

    per = data.ncu("h100")["ncu"]["per_launch"]
    units = dict(u.split(": ") for u in per["units"])
    names = [n for n in per if n != "units"]
    report = default_page([("vectorized_kernel(float *, float *, float *, long)",
                            [(n, units[n], per[n][i]) for n in names]) for i in range(3)])
    got = parse_ncu(report)
    assert got["units"] == per["units"]
    assert list(got) == list(per)
    for n in names:
        assert got[n] == pytest.approx(per[n], rel=1e-12), n


def test_ncu_check_warns_of_a_unit_it_does_not_know(capsys):
    from benchmarks.ncu_check import parse_ncu

    got = parse_ncu(default_page([("k", [("x.sum", "furlong", 3.0)])]))
    assert got["x.sum"] == [3.0] and "furlong" in capsys.readouterr().out


def test_ncu_diagnose_reads_its_record_back():
    from benchmarks.ncu_diagnose import parse_ncu, stalls

    rec = data.record("ncu/diagnosis_h100")
    unit = {"gpu__time_duration.sum": "nsecond", "dram__bytes_read.sum": "Mbyte",
            "dram__bytes_write.sum": "Mbyte"}
    for case, c in rec["cases"].items():
        report = default_page([(launch["kernel"], [(n, unit.get(n, ""), v)
                                                   for n, v in launch["metrics"].items()])
                               for launch in c["launches"]])
        got = parse_ncu(report)
        assert [g["kernel"] for g in got] == [launch["kernel"] for launch in c["launches"]]
        for g, launch in zip(got, c["launches"]):
            assert g["metrics"] == pytest.approx(launch["metrics"], rel=1e-12), case
            assert stalls(g) == pytest.approx(launch["stalls"], rel=1e-12), case
    assert parse_ncu("ncu: no kernels were profiled\n") == []


def test_a_value_that_is_no_number_is_left_out():
    report = default_page([("k", [("a.sum", "byte", 2048.0), ("b.ratio", "", 1.0)])])
    report = report.replace('"1.0"', '"n/a"')
    (launch,) = ncu.launches(report)
    assert launch.metrics == {"a.sum": 2048.0} and launch.units == {"a.sum": "byte"}


def test_coalescing_reads_its_record_back():
    from benchmarks.coalescing import METRICS, PROFILED, parse_ncu

    rec = data.record("ncu/coalescing_h100")
    key = {"gpu__time_duration.sum": "ncu_gpu_time_s", "dram__bytes_read.sum": "dram_bytes_read",
           "dram__bytes_write.sum": "dram_bytes_write",
           "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "ld_sectors",
           "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "ld_requests",
           "lts__t_sectors_srcunit_tex_op_read.sum": "l2_sectors_read"}
    launches = []
    for name in PROFILED:   # each launched twice, the second kept
        k = rec["kernels"][name]
        ld = k["ld_sectors"] / k["ld_requests"]
        st = k["st_sectors_per_request"]
        values = {m: k[key[m]] for m in key}
        values["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] = st * k["ld_requests"] / 2
        values["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"] = k["ld_requests"] / 2
        metrics = [(m, k["ncu_units"][m], values[m]) for m in METRICS]
        launches += [(k["ncu_kernel_name"], metrics)] * 2
        assert ld == pytest.approx(k["ld_sectors_per_request"])
    got = parse_ncu(default_page(launches))
    assert [g["id"] for g in got] == list(range(2 * len(PROFILED)))
    for i, name in enumerate(PROFILED):
        g, k = got[2 * i + 1], rec["kernels"][name]
        assert g["kernel"] == k["ncu_kernel_name"] and g["units"] == k["ncu_units"]
        for m, field in key.items():
            assert g[m] == pytest.approx(k[field], rel=1e-12), (name, m)


def test_tensorcore_instructions_read_the_raw_page_back(monkeypatch):
    import subprocess

    from benchmarks.tensorcore_ncu import profile

    rec = json.loads((ROOT / "records/bench/cublas_instructions_h200.json").read_text())
    metrics = [m for ms in rec["metrics"].values() for m in ms]
    for name, w in rec["workloads"].items():
        report = raw_page([(k["kernel"], [("gpu__time_duration.sum", "nsecond",
                                           k["ncu_duration_us"] * 1e-6),
                                          *((m + ".sum", "inst", k[m]) for m in metrics)])
                           for k in w["kernels"]])
        ran = []
        monkeypatch.setattr(ncu, "run", lambda cmd, timeout=None: ran.append(cmd) or
                            subprocess.CompletedProcess(cmd, 0, report, ""))
        got = profile("/usr/local/cuda/bin/ncu", name, metrics)
        assert ran[0][-2:] == ["--child", name] and "raw" in ran[0]
        assert len(got) == len(w["kernels"]), name
        for g, k in zip(got, w["kernels"]):
            assert g.keys() == k.keys(), name
            assert g["kernel"] == k["kernel"]
            assert g["ncu_duration_us"] == pytest.approx(k["ncu_duration_us"], rel=1e-12)
            assert {m: g[m] for m in metrics} == {m: k[m] for m in metrics}, name


def test_tensorcore_text_reports_are_the_record():
    """ncu's text reports (kept whole) read by :func:`ncu.details` give book/data's record."""
    rec = data.record("ncu/tensorcore_h100")
    for key, prof in rec["profiles"].items():
        got = ncu.details((ROOT / prof["source"]).read_text(), "mma_gemm")
        assert got == list(prof["kernels"].values()), key
    final = rec["profiles"]["final"]["kernels"]
    assert final["swiglu"]["gpu__time_duration.sum"] == pytest.approx(1.08e-3)
    assert final["ceiling"]["Warp Cycles Per Issued Instruction"] == 9.48


def test_the_command_as_a_record_names_it(monkeypatch):
    import sys

    cmd = ncu.command("/usr/local/cuda/bin/ncu", ["--csv"], "benchmarks.ncu_check", "--profile")
    assert cmd == ["/usr/local/cuda/bin/ncu", "--csv", sys.executable, "-m",
                   "benchmarks.ncu_check", "--profile"]
    assert ncu.shown(cmd) == "/usr/local/cuda/bin/ncu --csv python -m benchmarks.ncu_check " \
                             "--profile"
    assert ncu.shown(cmd, bare=True) == "ncu --csv python -m benchmarks.ncu_check --profile"


def test_the_binary_is_found_on_path_then_in_the_installs(monkeypatch, tmp_path):
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    monkeypatch.setattr(ncu, "INSTALLS", (str(tmp_path / "a"), str(tmp_path / "b")))
    assert ncu.binary() is None
    with pytest.raises(SystemExit, match="no ncu"):
        ncu.require()
    (tmp_path / "b").write_text("")
    assert ncu.binary() == str(tmp_path / "b")
    monkeypatch.setattr(ncu.shutil, "which", lambda name: "/on/path/ncu")
    assert ncu.require() == "/on/path/ncu"
