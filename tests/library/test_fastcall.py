"""book.kernels.host.fastcall: the packing matches numba-cuda's, and the path computes what the wrappers do.

There is no GPU here: in the simulator FastCall always takes the ordinary wrapper (it says
so: ``fast`` is False), so these tests check that fallback, the packing against numba-cuda's
own marshalling code (run in a process without the simulator, where numba-cuda's real
dispatcher imports without a driver), and the errors. The driver path itself is checked on
a GPU by the retired fastcall_probe.py (bit-equal outputs, equal packed parameters, graph
replay: records/launch/fastcall_probe_h100.json) and by the bench suite's checks.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import book  # noqa: F401  (decides GPU or simulator before numba.cuda)
from numba import cuda

from book.kernels import VARIANTS, reference as R
from book.kernels.host import fastcall, plan

# numba-cuda's own marshalling (_Kernel._prepare_args), run without the simulator. The array
# it is given stands in for what cuda.core's StridedMemoryView gives numba after
# wrap_arg(...).to_device(): size, dtype, ptr, shape and a layout whose strides_in_bytes is
# None for a C-contiguous array (numba then derives the strides from the shape itself).
_NUMBA_PACKING = r"""
import json, sys
import numpy as np
import numba.cuda.dispatcher as D
from numba import types

class Layout:
    def __init__(self, strides, c):
        self.strides_in_bytes, self.is_contiguous_c, self.is_contiguous_f = strides, c, False

class View:
    def __init__(self, ptr, shape, strides, dtype, contiguous):
        self.ptr, self.shape, self.dtype = ptr, tuple(shape), np.dtype(dtype)
        self.size = int(np.prod(shape))
        self._layout = Layout(None if contiguous else tuple(strides), contiguous)

class Arg:
    def __init__(self, v):
        self.v = v
    def to_device(self, retr, stream=0):
        return self.v

D.wrap_arg = Arg

class Kernel:
    extensions = []

out = []
for ptr, shape, strides, dtype, contiguous in json.loads(sys.argv[1]):
    args = []
    ty = types.Array(getattr(types, {"float32": "float32", "float16": "float16", "int16": "int16"}[dtype]),
                     len(shape), "C" if contiguous else "A")
    D._Kernel._prepare_args(Kernel(), ty, View(ptr, shape, strides, dtype, contiguous), 0, [], args)
    out.append([int(getattr(a, "value", a) or 0) for a in args])
print(json.dumps(out))
"""

CASES = [  # ptr, shape, strides (bytes), dtype, C-contiguous
    (0x7F3A00001000, [18944], [4], "float32", True),
    (0x7F3A00201000, [1, 18944], [75776, 4], "float32", True),
    (0x7F3A00401010, [3, 5], [10, 2], "int16", True),
    (0x7F3A00601000, [4, 3], [12, 4], "float16", False),  # a strided view
]


def test_packing_matches_numba_cudas_own_marshalling():
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_SIMULATOR",)}
    env["NUMBA_ENABLE_CUDASIM"] = "0"
    proc = subprocess.run([sys.executable, "-c", _NUMBA_PACKING, json.dumps(CASES)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    numba_args = json.loads(proc.stdout.strip().splitlines()[-1])
    for (ptr, shape, strides, dtype, _c), theirs in zip(CASES, numba_args):
        ours = plan.pack_array(ptr, shape, strides, np.dtype(dtype).itemsize)
        assert list(ours) == theirs, (shape, strides)
        # and the driver buffer holds exactly these values, 8 bytes each, in order
        params = plan.PackedParams(ours)
        assert params.tolist() == theirs
        assert params.tobytes() == np.array(theirs, dtype="<i8").tobytes()


def test_field_order_is_numbas_array_data_model():
    from numba import types
    from numba.core.datamodel import default_manager

    model = default_manager.lookup(types.Array(types.float32, 2, "C"))
    assert tuple(model._fields) == plan.ARRAY_FIELDS
    # meminfo, parent, nitems, itemsize, data, then one shape and one stride per dimension
    assert len(plan.pack_array(0, (2, 3), (12, 4), 4)) == 5 + 2 * 2


def test_packed_params_point_at_their_values():
    import ctypes

    p = plan.PackedParams((0, 0, 7, 4, 0xDEAD0000, 7, 4))
    for i, v in enumerate(p.tolist()):
        assert ctypes.c_int64.from_address(p.pointers[i]).value == v


@pytest.mark.parametrize("name,dtype", [("vec4", "float32"), ("half8", "bfloat16")])
def test_fastcall_computes_what_the_wrapper_does(name, dtype):
    fc = fastcall.FastCall(name)
    assert fc.fast is False  # the simulator: every call is the ordinary launch
    g, u = R.random_inputs((2, 37), dtype, seed=3)
    dg, du = cuda.to_device(g), cuda.to_device(u)
    o1, o2 = cuda.device_array_like(dg), cuda.device_array_like(dg)
    fc(dg, du, o1)
    VARIANTS[name].fn(dg, du, o2)
    assert np.array_equal(o1.copy_to_host(), o2.copy_to_host())
    R.check(o1.copy_to_host(), g, u, dtype)
    assert fc.stats == {"fast": 0, "planned": 0, "ordinary": 1}


def test_fastcall_refuses_what_the_wrapper_refuses():
    fc = fastcall.fast("vec4")
    g = cuda.to_device(np.ones(8, np.float16))
    with pytest.raises(TypeError, match="float32"):
        fc(g, g, cuda.device_array_like(g))
    with pytest.raises(TypeError, match="host"):
        fc(np.ones(8, np.float32), np.ones(8, np.float32), np.ones(8, np.float32))
    with pytest.raises(ValueError, match="vector variants"):
        fastcall.FastCall("naive")


def test_plan_and_stream_caches_are_bounded_and_drop_the_oldest():
    cache = plan.BoundedCache(3)
    for k in range(5):  # a loop over fresh allocations: a new key every call
        cache.put(k, str(k))
    assert list(cache) == [2, 3, 4] and cache.get(4) == "4" and cache.get(0) is None
    cache.put(3, "again")  # an existing key is replaced, nothing dropped
    assert list(cache) == [2, 3, 4] and cache[3] == "again"
    with pytest.raises(ValueError, match="at least one"):
        plan.BoundedCache(0)
    fc = fastcall.FastCall("vec4")
    assert isinstance(fc._plans, plan.BoundedCache) and fc._plans.limit == fc.MAX_PLANS
    assert isinstance(fc._streams, plan.BoundedCache) and fc._streams.limit == fc.MAX_STREAMS



# ---------------------------------------------------------------------------------------
# PlannedCall: the plan cache of the tensor-core and decode entry points. No driver here:
# the per-call path runs with a stand-in cuLaunchKernel that records its arguments (as the
# retired fastcall_host_profile timed it: records/launch/README.md), on CPU tensors (the key reads only their
# pointer, shape, dtype, layout and device); planning, which needs a GPU, is replaced by
# one that records what it was asked. The real launch is checked on the H100 by
# the GPU lane (tests/library/test_decode_mlp.py: every path, the planned call, graph replay).


class RecordingDriver:
    class CUstream(int):
        pass

    CUresult = type("CUresult", (), {"CUDA_SUCCESS": 0})

    def __init__(self):
        self.launches = []

    def cuLaunchKernel(self, *args):
        self.launches.append(args)
        return (0,)

    @staticmethod
    def cuGetErrorName(err):
        return (0, b"CUDA_ERROR_INVALID_VALUE")


def _stubbed(name="decode"):
    torch = pytest.importorskip("torch")
    pc = plan.PlannedCall(name, prepare=None)
    drv = RecordingDriver()
    pc._cu, pc.fast, pc._multi_gpu, pc._launch = drv, True, False, drv.cuLaunchKernel
    pc._tensor, pc._raw_stream = torch.Tensor, lambda device: 7
    planned = []

    def record(key, args, device, raw):  # what _plan stores, without the GPU launch
        planned.append((key, raw))
        pc._plans.put(key, (plan.LaunchPlan(drv.CUstream(99), 12, 128,
                                            plan.PackedParams([len(planned)] * 3), 4096,
                                            device=device),))

    pc._plan = record
    return torch, pc, drv, planned


def test_planned_call_plans_once_per_tensors_and_replays_the_plan():
    torch, pc, drv, planned = _stubbed()
    x, wg, wu, out = torch.ones(1, 16), torch.ones(8, 16), torch.ones(8, 16), torch.ones(1, 8)
    assert pc(x, wg, wu, None, None, out) is out  # planned (and launched the ordinary way)
    for _ in range(3):
        assert pc(x, wg, wu, None, None, out) is out
    assert len(planned) == 1 and pc.stats == {"fast": 3, "planned": 1, "ordinary": 0}
    fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra = drv.launches[-1]
    assert (gx, gy, gz, bx, by, bz, shared, stream, extra) == (12, 1, 1, 128, 1, 1, 4096, 7, 0)
    assert params == pc._plans[planned[0][0]][0].address and planned[0][1] == 7
    # anything a check or a parameter depends on is a new key: planned (validated) again
    pc(x, wg, wu, None, None, torch.ones(1, 8))          # another output
    pc(x, wg, wu, torch.ones(8), torch.ones(8), out)     # with biases
    pc(torch.ones(2, 16), wg, wu, None, None, torch.ones(2, 8))  # another T
    pc(x.half(), wg, wu, None, None, out)                # another dtype
    pc(torch.ones(16, 1).t(), wg, wu, None, None, out)   # same shape, not contiguous
    assert len(planned) == 6 and pc.stats["fast"] == 3
    pc._raw_stream = lambda device: 8                    # another stream: its own plan
    pc(x, wg, wu, None, None, out)
    assert len(planned) == 7 and planned[-1][1] == 8


def test_planned_call_takes_the_ordinary_launch_where_it_cannot_plan(monkeypatch):
    torch, pc, drv, planned = _stubbed()
    monkeypatch.setattr(plan, "numba_stream", lambda device: 0)  # torch's stream: none here
    calls = []

    class Launch:
        grid = 0
        result = "ordinary result"

        def launch(self, stream=0):
            calls.append(stream)
            return self.result

    pc.prepare = lambda *args, **kw: Launch()
    x, w = torch.ones(1, 16), torch.ones(8, 16)
    assert pc(x, w, w, None, None, None) == "ordinary result"  # out=None: no plan
    assert pc(np.ones((1, 16)), w, w, None, None, torch.ones(1, 8)) == "ordinary result"
    assert not planned and not drv.launches and pc.stats["ordinary"] == 2
    out = torch.ones(1, 8)
    pc._plans.put((7, *map(plan.arg_key, (x, w, w, None, None, out))), None)
    assert pc(x, w, w, None, None, out) == "ordinary result"  # a key planned as "not plannable"
    assert calls == [0, 0, 0] and not drv.launches


def test_planned_calls_refuse_an_unknown_entry_point_and_serve_the_known_ones():
    with pytest.raises(ValueError, match="planned\\(\\) serves"):
        fastcall.planned("swiglu_half8")
    assert fastcall.planned("decode") is fastcall.planned("decode")
    assert fastcall.planned("decode").fast is False  # the simulator: ordinary launches


@pytest.mark.parametrize("name,make", [
    ("decode", lambda: [np.ones((2, 16), np.float16), np.ones((4, 16), np.float16) / 16,
                        np.ones((4, 16), np.float16) / 16, None, None]),
    ("swiglu_mma", lambda: [np.zeros((3, 8), np.float16), np.ones((8, 8), np.float16),
                            np.ones((8, 8), np.float16)]),
])
def test_planned_calls_compute_what_the_wrappers_do(name, make):
    from book.kernels.gemv import decode_mlp
    from book.kernels.gemms import mma_gemm

    host = make()
    dev = [cuda.to_device(a) if a is not None else None for a in host]
    T, h = host[0].shape[0], (host[1].shape[0] if name == "decode" else host[1].shape[1])
    o1, o2 = cuda.device_array((T, h), np.float16), cuda.device_array((T, h), np.float16)
    fastcall.planned(name)(*dev, o1)
    (decode_mlp.swiglu_decode if name == "decode" else mma_gemm.swiglu_mma)(*dev, out=o2)
    assert np.array_equal(o1.copy_to_host(), o2.copy_to_host())


def test_pack_args_packs_arrays_as_numba_does_and_integers_as_one_int64():
    class DeviceView:  # what pack_args reads of a device array (the simulator's have no address)
        shape, strides, dtype = (3, 4), (8, 2), np.dtype(np.float16)
        __cuda_array_interface__ = {"data": (0x7F0000001000, False)}

    packed = plan.pack_args([DeviceView(), 5, 7])
    assert packed == [*plan.pack_array(0x7F0000001000, (3, 4), (8, 2), 2), 5, 7]
    assert packed[:5] == [0, 0, 12, 2, 0x7F0000001000]  # meminfo, parent, nitems, itemsize, data


def test_the_courses_small_grids_are_silenced_in_numbas_own_words():
    """Numba words its small-grid warning with a terminal colour when it can (on the H100:
    '\\x1b[1mGrid size 74 will likely result in GPU under-utilization due to low
    occupancy.\\x1b[0m'); a warnings filter matches from the first character, so the course's
    filter must allow the escape. Any other warning still shows, and outside the course's
    launches the small-grid warning still shows."""
    import warnings

    from numba.cuda.core.errors import NumbaPerformanceWarning

    from book.kernels.host.launch import deliberate_grid

    said = "Grid size 74 will likely result in GPU under-utilization due to low occupancy."
    for text in (said, f"\x1b[1m{said}\x1b[0m"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with deliberate_grid():
                warnings.warn(NumbaPerformanceWarning(text, highlighting=False))
                warnings.warn(NumbaPerformanceWarning("\x1b[1mHost array used in CUDA kernel"
                                                      "\x1b[0m", highlighting=False))
            warnings.warn(NumbaPerformanceWarning(text, highlighting=False))
        shown = [str(w.message) for w in caught]
        assert shown == ["\x1b[1mHost array used in CUDA kernel\x1b[0m", text], shown


def test_a_plain_call_of_a_wrapper_is_its_planned_call_and_a_named_stream_is_not():
    """The plain call is the cheap call (issue 44): ``swiglu_decode``, the GEMVs,
    ``swiglu_mma`` and ``matmul_mma`` called with no ``stream`` (and no ``tile``/``split``) go
    through their :func:`fastcall.planned` call (here, in the simulator, its ordinary launch,
    counted), computing what a launch on a named stream computes; a named stream or a tile
    takes the wrapper's own launch."""
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.gemms import mma_gemm as mg

    x = cuda.to_device(np.linspace(-1, 1, 2 * 16).reshape(2, 16).astype(np.float16))
    w = cuda.to_device(np.linspace(-1, 1, 4 * 16).reshape(4, 16).astype(np.float16) / 4)
    wt = cuda.to_device(np.linspace(-1, 1, 16 * 8).reshape(16, 8).astype(np.float16) / 4)
    for name, plain, named in (
            ("decode", lambda: dm.swiglu_decode(x, w, w), lambda: dm.swiglu_decode(x, w, w, stream=0)),
            ("gemv", lambda: dm.swiglu_gemv(x, w, w), lambda: dm.swiglu_gemv(x, w, w, stream=0)),
            ("gemv_tc", lambda: dm.swiglu_gemv_tc(x, w, w), lambda: dm.swiglu_gemv_tc(x, w, w, split=1)),
            ("swiglu_mma", lambda: mg.swiglu_mma(x, wt, wt), lambda: mg.swiglu_mma(x, wt, wt, stream=0)),
            ("matmul_mma", lambda: mg.matmul_mma(x, wt), lambda: mg.matmul_mma(x, wt, stream=0))):
        pc = fastcall.planned(name)
        before = dict(pc.stats)
        a = plain().copy_to_host()
        assert pc.stats["ordinary"] == before["ordinary"] + 1, name
        b = named().copy_to_host()
        assert pc.stats == {**before, "ordinary": before["ordinary"] + 1}, name
        assert np.array_equal(a, b), name


def test_a_plain_call_with_numba_arrays_never_imports_torch():
    """A student in the simulator (or anyone without torch in the process) pays no torch
    import for the planned route: it looks for torch among the modules already loaded."""
    code = ("import sys, numpy as np\n"
            "import book\n"
            "from numba import cuda\n"
            "from book.kernels import decode_mlp as dm, mma_gemm as mg\n"
            "x = cuda.to_device(np.ones((2, 16), np.float16))\n"
            "w = cuda.to_device(np.ones((4, 16), np.float16) / 16)\n"
            "dm.swiglu_decode(x, w, w)\n"
            "mg.matmul_mma(x, cuda.to_device(np.ones((16, 8), np.float16)))\n"
            "print('torch' in sys.modules)\n")
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "BOOK_SIMULATOR": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "False", r.stdout
