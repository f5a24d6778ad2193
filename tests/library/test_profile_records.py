"""Chapter 10's profiler records: say where they came from, agree with themselves, ship.

book/data/ncu/diagnosis_h100.json (benchmarks/ncu_diagnose.py) and
book/data/profile/decode_timeline_h100.json (benchmarks/profile_decode.py) were recorded on
the H100. Nothing is re-measured here: the tests check provenance, internal consistency,
that the scripts named in them exist, and that the package ships the files.
"""

import fnmatch
import math
import sys
import tomllib

import pytest

import book
from book import data
from repo import ROOT

RECORDS = {"ncu/diagnosis_h100": "ncu_diagnose", "profile/decode_timeline_h100": "profile_decode"}


@pytest.mark.parametrize("name,script", RECORDS.items())
def test_records_carry_provenance_of_their_script(name, script):
    rec = data.record(name)
    p = rec["provenance"]
    assert "H100" in p["gpu"] and p["simulated"] is False
    # run as a module since issue 44; the H100's records name the file they ran before it
    assert p["command"].startswith((f"python -m benchmarks.{script}",
                                    f"python benchmarks/{script}.py"))
    assert (ROOT / "benchmarks" / f"{script}.py").exists()
    assert p["commit"] and len(p["commit"]) == 40
    for key in ("driver", "numba_cuda", "torch", "date"):
        assert p[key], key


def test_record_names_what_exists_when_missing():
    with pytest.raises(FileNotFoundError, match="ncu/diagnosis_h100"):
        data.record("ncu/no_such_record")
    with pytest.raises(FileNotFoundError):
        data.record("../../pyproject")  # nothing outside book/data


def test_diagnosis_is_consistent():
    rec = data.record("ncu/diagnosis_h100")
    n = math.prod(rec["shape"])
    assert {"fused", "vec4", "naive", "uncoalesced"} <= set(rec["cases"])
    for case, c in rec["cases"].items():
        assert c["minimum_bytes"] == 3 * 4 * n
        dram = sum(l["metrics"]["dram__bytes_read.sum"] + l["metrics"]["dram__bytes_write.sum"]
                   for l in c["launches"])
        assert c["dram_bytes"] == pytest.approx(dram)
        assert c["dram_over_minimum"] == pytest.approx(dram / c["minimum_bytes"])
        for launch in c["launches"]:
            m, stalls = launch["metrics"], launch["stalls"]
            assert "long_scoreboard" in stalls and "selected" in stalls, case
            # the stall reasons add up to the warp cycles per issued instruction
            total = sum(stalls.values())
            assert total == pytest.approx(m["smsp__average_warp_latency_per_inst_issued.ratio"],
                                          rel=0.05), case
    assert len(rec["cases"]["naive"]["launches"]) == 2  # silu_kernel, then mul_kernel
    assert len(rec["cases"]["fused"]["launches"]) == 1


def test_timeline_is_consistent():
    rec = data.record("profile/decode_timeline_h100")
    for mode, run in rec["runs"].items():
        ks = run["kernels"]
        assert len(ks) == rec["steps"], mode
        starts = [k["ts_us"] for k in ks]
        assert starts == sorted(starts)
        assert all(a["ts_us"] + a["dur_us"] <= b["ts_us"] + 1e-3 for a, b in zip(ks, ks[1:]))
        assert min([k["ts_us"] for k in ks] + [a["ts_us"] for a in run["api"]]) == 0
        assert run["unprofiled_step_us"] > 0
    assert len(rec["runs"]["python_loop"]["api"]) == rec["steps"]  # one launch call per kernel
    assert len(rec["runs"]["graph_replay"]["api"]) == 1  # one graph launch for all


def test_records_are_package_data():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["book"]
    for name in RECORDS:
        rel = f"data/{name}.json"
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), (rel, patterns)


def test_scripts_refuse_to_record_in_the_simulator(tmp_path):
    import subprocess

    if not book.gpu.SIMULATED:
        pytest.skip("on a GPU these scripts would measure")
    for script in RECORDS.values():
        out = tmp_path / "x.json"
        res = subprocess.run([sys.executable, "-m", f"benchmarks.{script}", "--out", str(out)],
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert res.returncode == 2 and "no GPU" in res.stdout, (script, res.stdout, res.stderr)
        assert not out.exists()


def test_tensorcore_profiles_are_the_records_ncu_text():
    """book/data/ncu/tensorcore_h100.json is what benchmarks/tensorcore_ncu.py --parse reads
    from records/tensorcore's ncu reports, with the provenance of the run that made them."""
    import importlib

    mod = importlib.import_module("benchmarks.tensorcore_ncu")
    rec = data.record("ncu/tensorcore_h100")
    for key, prof in rec["profiles"].items():
        parsed = mod.parse((ROOT / prof["source"]).read_text())
        assert list(prof["kernels"].values()) == parsed, key
        assert {"ceiling", "swiglu"} <= set(prof["kernels"]), key
        p = prof["provenance"]
        assert "H100" in p["gpu"] and p["simulated"] is False and len(p["commit"]) == 40
    final = rec["profiles"]["final"]["kernels"]
    assert final["swiglu"]["gpu__time_duration.sum"] == pytest.approx(1.08e-3)
    assert final["ceiling"]["smsp__inst_executed.sum"] == 180_088_832
