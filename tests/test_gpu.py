"""book.gpu: GPU-or-simulator decision, device facts, the driver-too-old diagnosis.

The decision runs at import, so most checks start a fresh Python process with a
controlled environment (CUDA_VISIBLE_DEVICES="" hides any GPU, so these tests
mean the same on a GPU machine).
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import book
from book import gpu

ROOT = Path(__file__).resolve().parents[1]


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
gpu_only = pytest.mark.skipif(gpu.SIMULATED, reason="needs a CUDA GPU")


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


def test_driver_too_old_from_numbas_real_error_path():
    # A process with the real (un-simulated) numba.cuda driver module: raise the
    # CudaAPIError through numba's own result check, wrap it the way numba's
    # linker does, and map both with book's function (loaded from its file:
    # importing `book` there would rightly refuse, there is no GPU).
    r = run_py(f"""
        import importlib.util, json
        import numba.cuda.cudadrv.driver as d
        from cuda.bindings import driver as b
        spec = importlib.util.spec_from_file_location("de", {str(ROOT / 'book' / 'driver_errors.py')!r})
        de = importlib.util.module_from_spec(spec); spec.loader.exec_module(de)
        d._logger = d.make_logger()  # what numba's driver init would set
        try:
            d.driver._check_cuda_python_error(
                "cuLinkAddData", (b.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION,))
        except d.CudaAPIError as e:
            api = e
        log = "ptxas application ptx input, line 9; fatal   : Unsupported .version 8.5; current version is '8.4'"
        linker = d.LinkerError("%s\\n%s" % (api, log))
        out = {{}}
        for name, exc in (("api", api), ("linker", linker)):
            m = de.explain_cuda_error(exc, (12, 4), (12, 5))
            out[name] = [type(m).__name__, str(m)]
        other = d.CudaAPIError(b.CUresult.CUDA_ERROR_OUT_OF_MEMORY, "Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")
        out["other"] = de.explain_cuda_error(other, (12, 4), (12, 5)) is None
        print(json.dumps(out))
    """)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for name in ("api", "linker"):
        kind, msg = out[name]
        assert kind == "DriverTooOldError"
        assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in msg
        assert "CUDA 12.5" in msg and "CUDA 12.4" in msg  # toolkit vs driver
        assert 'pip install -U "numba-cuda[cu12]"' in msg and "restart" in msg
    assert "PTX is version 8.5; this driver accepts at most 8.4" in out["linker"][1]
    assert out["other"] is True


def test_explain_cuda_error_fix_follows_driver_major():
    msg = str(gpu.explain_cuda_error(222, (13, 0), (13, 1)))
    assert 'numba-cuda[cu13]' in msg
    assert gpu.explain_cuda_error(2) is None
    assert gpu.explain_cuda_error("CUDA_ERROR_INVALID_VALUE") is None


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
