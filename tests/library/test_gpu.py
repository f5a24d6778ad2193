"""book.gpu: GPU-or-simulator decision, device facts, the driver-too-old diagnosis.

The decision runs at import, so most checks start a fresh Python process with a
controlled environment (CUDA_VISIBLE_DEVICES="" hides any GPU, so these tests
mean the same on a GPU machine).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import book
from book import gpu
from repo import ROOT



def run_py(code, **env_overrides):
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "BOOK_SIMULATOR", "BOOK_QUIET")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, whatever the machine has
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_no_gpu_selects_simulator_prints_one_line_and_runs_a_kernel():
    r = run_py("""
        import book
        import numpy as np
        from numba import cuda
        print("SIMULATED", book.gpu.SIMULATED)

        @cuda.jit
        def add(a, b, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a[i] + b[i]

        a = np.arange(100, dtype=np.float32)
        b = np.full(100, 0.5, dtype=np.float32)
        out = cuda.device_array_like(a)
        add[2, 64](cuda.to_device(a), cuda.to_device(b), out)
        assert np.array_equal(out.copy_to_host(), a + b)
        print("KERNEL OK", book.gpu.check_runnable())
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == gpu.SIMULATOR_LINE
    assert sum(line == gpu.SIMULATOR_LINE for line in lines) == 1
    assert "SIMULATED True" in lines
    assert "KERNEL OK True" in lines


def test_numba_core_imported_first_still_switches():
    # `import numba` (not numba.cuda) before book: the env var alone comes too late,
    # book must also flip numba's already-read config.
    r = run_py("""
        import numba
        import book
        from numba import cuda
        print(book.gpu.SIMULATED, "simulator" in cuda.jit.__module__)
    """, BOOK_QUIET="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True True"


def test_numba_cuda_imported_first_is_a_clear_error():
    r = run_py("""
        from numba import cuda
        import book
    """)
    assert r.returncode != 0
    assert "ImportOrderError" in r.stderr
    assert "import book" in r.stderr and "restart" in r.stderr


def test_book_simulator_env_forces_and_quiet_silences():
    r = run_py("import book; print(book.gpu.SIMULATED, book.gpu.REASON)", BOOK_SIMULATOR="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("BOOK_SIMULATOR=1 is set: kernels run in Numba's CUDA simulator")
    r = run_py("import book; print(book.gpu.SIMULATED)", BOOK_SIMULATOR="1", BOOK_QUIET="1")
    assert r.stdout.strip() == "True"


def test_import_book_is_cheap():
    r = run_py("import sys, book; print('torch' in sys.modules, 'numba.cuda' in sys.modules)",
               BOOK_QUIET="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False False"


sim_only = pytest.mark.skipif(not gpu.SIMULATED, reason="simulator behaviour (CI has no GPU)")
gpu_only = pytest.mark.gpu   # skipped in the simulator (tests/conftest.py)


@sim_only
def test_simulator_device_info_and_helpers():
    info = gpu.device_info()
    assert info.name == "CUDA simulator" and info.simulated
    assert info.sm_count is None and info.peak_bandwidth is None and info.l2_bytes is None
    assert gpu.pick(1024, 16) == 16
    assert "simulator" in gpu.describe().lower()
    assert gpu.check_runnable() is True


def test_peak_bandwidth_formula():
    # field notes: H100 80GB HBM3, 2619 MHz memory clock, 5120-bit bus -> 3.35 TB/s
    assert gpu.peak_bandwidth(2619e6, 5120) == pytest.approx(3.352e12, rel=1e-3)
    with pytest.raises(ValueError, match="must be positive"):
        gpu.peak_bandwidth(0, 5120)


def test_driver_constants_match_cuda_bindings():
    from cuda.bindings import driver as b

    assert int(b.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION) == gpu.CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    a = b.CUdevice_attribute
    assert gpu._ATTR == {
        "sm_count": int(a.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        "memory_clock_khz": int(a.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        "bus_width_bits": int(a.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        "l2_bytes": int(a.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        "cc_major": int(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
        "cc_minor": int(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    }


# Errors numba-cuda really raised on the H100 (records/colab/numba_cuda_errors.json, written by
# `python -m tools.colab_rehearsal record-errors` there; its provenance says how).
ERRORS = ROOT / "records" / "colab" / "numba_cuda_errors.json"
EXPECTED = {
    "no_gpu": "NoGPUError",
    "out_of_memory": "GPUOutOfMemoryError",
    "driver_older_than_ptx": "DriverTooOldError",
    "nvjitlink_older_than_ptx_link": "NvJitLinkTooOldError",
}


def _recorded(chain):
    """The recorded exception chain rebuilt: same type names, texts and CUresult codes."""
    excs = []
    for item in chain:
        exc = type(item["type"].rsplit(".", 1)[-1], (Exception,), {})(item["str"])
        exc.code = item["code"]
        excs.append(exc)
    for outer, inner in zip(excs, excs[1:]):
        outer.__cause__ = inner
    return excs[0]


def _versions(v):
    drv = v.get("driver_cuda")
    njl = v.get("nvjitlink")
    return ((drv // 1000, drv % 1000 // 10) if isinstance(drv, int) else None,
            tuple(njl[:2]) if isinstance(njl, list) else None)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_diagnosis_of_each_recorded_failure(case):
    got = json.loads(ERRORS.read_text())["cases"][case]
    assert got["provenance"]["gpu"] and not got["provenance"]["simulated"], "recorded on a GPU"
    assert got["raised"], f"{case}: nothing was raised when it was recorded: {got}"
    exc = _recorded(got["raised"])
    driver, nvjitlink = _versions(got["versions"])
    err = gpu.explain_cuda_error(exc, driver, None, nvjitlink)
    assert type(err).__name__ == EXPECTED[case], (case, exc, err)
    assert err.cause and err.fix and "Fix: " in str(err)
    # the texts alone (no code, no chain) still lead to the same cause
    text = "\n".join(f"{i['type']}: {i['str']}" for i in got["raised"])
    assert type(gpu.explain_cuda_error(text, driver)).__name__ == EXPECTED[case]


def test_nvjitlink_and_driver_are_told_apart():
    """Both print ptxas's "Unsupported .version" complaint; only one is the driver's fault."""
    cases = json.loads(ERRORS.read_text())["cases"]
    drv = gpu.explain_cuda_error(_recorded(cases["driver_older_than_ptx"]["raised"]), (13, 0))
    njl = gpu.explain_cuda_error(_recorded(cases["nvjitlink_older_than_ptx_link"]["raised"]),
                                 (13, 0), (13, 5), (13, 0))
    assert isinstance(drv, gpu.DriverTooOldError) and isinstance(njl, gpu.NvJitLinkTooOldError)
    assert 'numba-cuda[cu13]' in drv.fix and "restart" in drv.fix.lower()
    assert 'nvidia-nvjitlink>=13.5' in njl.fix and 'nvidia-nvvm==13.0.*' in njl.fix
    assert "driver" in njl.cause and "not the problem" in njl.cause
    # the control: on the same machine a plain kernel compiled, linked and ran
    assert cases["nvjitlink_older_than_nvvm"]["raised"] is None


def test_diagnosis_from_numbas_own_exception_classes():
    # The real (un-simulated) numba.cuda error classes, raised through numba's own result check
    # (book's module loaded from its file: importing `book` there would pick the simulator).
    r = run_py(f"""
        import importlib.util, json
        import numba.cuda.cudadrv.driver as d
        from cuda.bindings import driver as b
        spec = importlib.util.spec_from_file_location("de", {str(ROOT / 'book' / 'driver_errors.py')!r})
        de = importlib.util.module_from_spec(spec); spec.loader.exec_module(de)
        d._logger = d.make_logger()  # what numba's driver init would set
        out = {{}}
        for name in ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_OUT_OF_MEMORY",
                     "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INVALID_VALUE"):
            try:
                d.driver._check_cuda_python_error("cuModuleLoadDataEx", (getattr(b.CUresult, name),))
            except d.CudaAPIError as e:
                m = de.explain_cuda_error(e, (12, 4), (12, 8))
                out[name] = type(m).__name__ if m else None
        print(json.dumps(out))
    """)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "DriverTooOldError",
                   "CUDA_ERROR_OUT_OF_MEMORY": "GPUOutOfMemoryError",
                   "CUDA_ERROR_NO_DEVICE": "NoGPUError", "CUDA_ERROR_INVALID_VALUE": None}


def test_explain_cuda_error_fix_follows_driver_major():
    msg = str(gpu.explain_cuda_error(222, (13, 0), (13, 1)))
    assert 'numba-cuda[cu13]' in msg
    assert 'numba-cuda[cu12]' in str(gpu.explain_cuda_error(222, (12, 4), (12, 8)))
    assert gpu.explain_cuda_error(1) is None
    assert gpu.explain_cuda_error("CUDA_ERROR_INVALID_VALUE") is None


def test_setup_check_without_a_gpu_says_how_to_select_one():
    r = run_py("import book; book.gpu.check_setup()")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == gpu.SIMULATOR_LINE
    assert "No GPU is selected" in lines[1] and "Runtime > Change runtime type" in lines[1]


@gpu_only
def test_real_device_info():
    info = gpu.device_info()
    assert not info.simulated and info.sm_count > 0 and info.l2_bytes > 0
    assert info.compute_capability >= (7, 0)
    assert info.peak_bandwidth == pytest.approx(
        2 * info.memory_clock_hz * info.bus_width_bits / 8)
    assert gpu.pick(1024, 16) == 1024
    assert gpu.check_runnable() is True
    spec = book.specs.match(info.name)
    if spec is not None:  # the table and the attributes agree within 5%
        assert info.peak_bandwidth == pytest.approx(spec.memory_bandwidth, rel=0.05)


def test_ipython_shows_the_diagnosis_under_a_recorded_error():
    """`import book` on a GPU installs this in IPython; here it is installed by hand (no GPU)
    into a real IPython shell, which runs a cell raising the error recorded on the H100."""
    r = run_py(f"""
        import json
        from IPython.core.interactiveshell import InteractiveShell
        import book
        shell = InteractiveShell.instance()
        assert book.gpu.install_ipython_diagnosis(shell)
        assert not book.gpu.install_ipython_diagnosis(shell)  # once
        case = json.load(open({str(ERRORS)!r}))["cases"]["nvjitlink_older_than_ptx_link"]
        item = case["raised"][0]
        shell.user_ns["Err"] = type(item["type"].rsplit(".", 1)[-1], (Exception,), {{}})
        shell.user_ns["text"] = item["str"]
        shell.run_cell("raise Err(text)")
        shell.run_cell("1 / 0")
    """, BOOK_QUIET="1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "nvJitLinkError" in out and "Diagnosis (nvjitlink_older_than_nvvm)" in out
    assert out.count("Fix:") == 1 and "ZeroDivisionError" in out  # other errors: as usual
    assert "Custom TB Handler failed" not in out + r.stderr
