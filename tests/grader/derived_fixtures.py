"""Submissions derived from a lab's master by one edit each, kept in step with it: the bounds
fixtures (tests/fixtures/bounds/: a store past the end of `out`, a kernel that forgets
`blockIdx` in one dimension) and the "lesson not learned" controls (tests/fixtures/controls/:
a correct solution that misses what the lab teaches, which each rubric names and
benchmarks/lesson_controls_probe.py times against the master).

A fixture is the master's graded code (its code cells up to the one defining the graded
function, less the setup, check and hidden-test cells, SOLUTION markers removed), with its
edits applied and a cell appended, under a header comment saying what it is.
`tests/grader/test_derived_fixtures.py` fails when a file is stale; rewrite them all with

    PYTHONPATH=tests:. python tests/grader/derived_fixtures.py
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from repo import FIXTURES, ROOT as REPO

from autograder import labs


@dataclass(frozen=True)
class Derived:
    lab: str
    header: str                       # what the file is, one comment paragraph
    edits: dict = field(default_factory=dict)   # {cell id: [(old, new), ...]}, each old must occur
    append: str = ""                  # a cell after the master's (a control's own function)


def _master_cells(lab: str) -> list[tuple[str, str]]:
    """(cell id, source) of the master's graded code, up to the graded function's cell."""
    import nbformat   # here: the GPU lane's image lists fixtures without it

    spec = labs.get(lab)
    nb = nbformat.read(REPO / "solutions" / f"{lab}.ipynb", as_version=4)
    out = []
    for c in nb.cells:
        src = c.source
        if (c.cell_type != "code" or c.get("id") == "course-setup" or re.match(r"\s*check\(", src)
                or src.lstrip().startswith("# autograder: setup") or "### BEGIN HIDDEN TESTS" in src):
            continue
        out.append((c.get("id"), src))
        if re.search(rf"^def {spec.function}\(", src, re.M):
            return out
    raise AssertionError(f"no cell of solutions/{lab}.ipynb defines {spec.function}")


def source(name: str) -> str:
    """The text of fixture ``name`` (a path under tests/fixtures/) from today's master."""
    d = DERIVED[name]
    edits = {k: list(v) for k, v in d.edits.items()}
    parts = []
    for cid, src in _master_cells(d.lab):
        for old, new in edits.pop(cid, []):
            assert old in src, f"{name}: {old!r} is not in cell {cid} of the master any more"
            src = src.replace(old, new)
        parts.append("\n".join(line for line in src.split("\n")
                               if not re.match(r"\s*#+\s*(BEGIN|END) SOLUTION", line)).strip("\n"))
    assert not edits, f"{name}: cells {sorted(edits)} are not among the master's graded cells"
    if d.append:
        parts.append(d.append.strip("\n"))
    head = "\n".join("# " + line if line else "#" for line in d.header.strip().split("\n"))
    return head + "\n" + "\n\n\n".join(parts) + "\n"


L2, L3, L4, L5, L6 = (labs.resolve(n) for n in ("lab2", "lab3", "lab4", "lab5", "lab6"))

DERIVED = {
    # ------------------------------------------------------------------ stores outside `out`
    "bounds/lab2_writes_past_end.py": Derived(L2, """\
writes past the end of `out` (issue 28): the master with its column test `j <= F` instead of
`j < F`. On every row but the last the extra store lands on the next row's first element with
that element's right value; on the last row it is one element past the end of `out` (a GPU
took it silently and gave full marks; the simulator raised IndexError). Every case fails with
"wrote 1 element past the end of `out`, the first at flat index M*F".""",
        {"lab2-03": [("if j < F:", "if j <= F:")]}),
    "bounds/lab2_writes_past_input.py": Derived(L2, """\
writes past the end of an input: the master, plus one store into the element after `x` (a
flag it took for free memory). `out` is right; every case fails with "wrote 1 element past
the end of `x`, the first at flat index 2*M*F".""",
        {"lab2-03": [("                out[row, j] = g[e] / (float32(1.0) + math.exp(-g[e])) * u[e]\n",
                      "                out[row, j] = g[e] / (float32(1.0) + math.exp(-g[e])) * u[e]\n"
                      "    if cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0 and cuda.threadIdx.x == 0:\n"
                      "        x[M - 1, 2 * F] = float32(1.0)  # the element after x, taken for a flag\n")]}),
    "bounds/lab3_writes_past_end.py": Derived(L3, """\
writes past the end of `out`: the master without the bounds test of its scalar tail (the last
n % 8 elements): every thread of the last block stores one element, most of them past the end
of `out`; every case fails with "wrote N elements past the end of `out`".""",
        {"lab3-03": [("        if i < n:\n            out[i] = _act(float32(gate[i]), float32(up[i]))\n",
                      "        out[i] = _act(float32(gate[i]), float32(up[i]))  # no `if i < n`\n")]}),
    "bounds/lab4_writes_past_end.py": Derived(L4, """\
writes past the end of `out`: the master's epilogue without its row test `if r < T` (the last
tile's rows past T are stored beyond `out`); every case fails with "wrote N elements past the
end of `out`".""",
        {"lab4-03": [("        if r < T:\n", "        if True:  # the row test `r < T` dropped\n")]}),
    "bounds/lab5_writes_past_end.py": Derived(L5, """\
writes past the end of `out` (issue 28): the master's epilogue without its row test `if r < T`,
so the last tile's rows past T are stored beyond `out` (12/12 on the H100 and the H200 before
guard zones; 0/8 with IndexError in the simulator). Every case fails with "wrote N elements
past the end of `out`".""",
        {"lab5-03": [("if r < T:", "if True:  # the row test `r < T` dropped")]}),
    # ------------------------------------------------------------------ forgets blockIdx
    "bounds/lab2_forgets_blockidx_x.py": Derived(L2, """\
forgets blockIdx.x: every block of a row does the first block's columns. Passes the public
cases (F <= 257: one block covers them); fails every hidden case, which spans two blocks of the
largest block the lab allows (1024 threads x 4 columns) in the simulator too.""",
        {"lab2-03": [("base = cuda.blockIdx.x * (cuda.blockDim.x * EPT) + cuda.threadIdx.x",
                      "base = cuda.threadIdx.x  # blockIdx.x forgotten")]}),
    "bounds/lab2_forgets_blockidx_y.py": Derived(L2, """\
forgets blockIdx.y: every row of blocks starts at row 0, so only rows that are multiples of
gridDim.y are written. Fails every case with more than one row.""",
        {"lab2-03": [("for row in range(cuda.blockIdx.y, M, cuda.gridDim.y):",
                      "for row in range(0, M, cuda.gridDim.y):  # blockIdx.y forgotten")]}),
    "bounds/lab3_forgets_blockidx_x.py": Derived(L3, """\
forgets blockIdx.x (the master's grid is 1D): every block starts at the first vectors. Passes
the public cases (one block covers them); fails every hidden case, which spans two blocks of
the largest block the lab allows (1024 threads x 16 halves) in the simulator too.""",
        {"lab3-03": [("for base in range(cuda.blockIdx.x * tile, nvec, cuda.gridDim.x * tile):",
                      "for base in range(0, nvec, cuda.gridDim.x * tile):  # blockIdx.x forgotten")]}),
    "bounds/lab4_forgets_blockidx_x.py": Derived(L4, """\
forgets blockIdx.x: every block computes the first tile of h. Passes the public cases (h <= 18:
one tile); fails every hidden case, which spans two tiles of the largest block the lab allows
(32 x 32 threads x R = 4: 128 columns) in the simulator too.""",
        {"lab4-03": [("col0 = cuda.blockIdx.x * TN", "col0 = 0 * TN  # blockIdx.x forgotten")]}),
    "bounds/lab4_forgets_blockidx_y.py": Derived(L4, """\
forgets blockIdx.y: every block computes the first tile of T. Passes the public cases (T <= 3:
one tile); fails every hidden case, which spans two tiles of the largest block the lab allows
(128 rows) in the simulator too.""",
        {"lab4-03": [("row0 = cuda.blockIdx.y * TM", "row0 = 0 * TM  # blockIdx.y forgotten")]}),
    "bounds/lab5_forgets_blockidx_x.py": Derived(L5, """\
forgets blockIdx.x: every block computes the first tile of h (BN = 32 columns in the
simulator, 128 on a GPU). Fails the public case with h = 40 and every hidden case, which spans
two of the simulator's tiles in each dimension.""",
        {"lab5-03": [("m0, n0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN",
                      "m0, n0 = cuda.blockIdx.y * BM, 0 * BN  # blockIdx.x forgotten")]}),
    "bounds/lab5_forgets_blockidx_y.py": Derived(L5, """\
forgets blockIdx.y: every block computes the first tile of T (BM = 16 rows in the simulator,
128 on a GPU). Passes the public cases (T <= 5); fails every hidden case, which spans two of
the simulator's tiles in each dimension.""",
        {"lab5-03": [("m0, n0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN",
                      "m0, n0 = 0 * BM, cuda.blockIdx.x * BN  # blockIdx.y forgotten")]}),
    # ------------------------------------------------------------------ lessons not learned
    "controls/lab2_two_kernels.py": Derived(L2, """\
lab 2's "lesson not learned" control: correct, the master's own loop split into two kernels
(silu(gate) into a float32 temporary, then the product with up), so the work moves 7 streams
of float32 where the fused kernel moves 3 (read gate and up, write out). Named by
autograder/rubrics/lab2_packed_swiglu.toml; timed against the master by
benchmarks/lesson_controls_probe.py.""", append='''
# the control: the same kernel, split in two passes through a temporary
@cuda.jit(fastmath=True)
def _silu_pass(x, tmp, M, F):
    g = cuda.local.array(EPT, float32)
    base = cuda.blockIdx.x * (cuda.blockDim.x * EPT) + cuda.threadIdx.x
    for row in range(cuda.blockIdx.y, M, cuda.gridDim.y):
        for e in range(EPT):
            j = base + e * cuda.blockDim.x
            if j < F:
                g[e] = x[row, 2 * j]
        for e in range(EPT):
            j = base + e * cuda.blockDim.x
            if j < F:
                tmp[row, j] = g[e] / (float32(1.0) + math.exp(-g[e]))


@cuda.jit(fastmath=True)
def _times_up_pass(x, tmp, out, M, F):
    s = cuda.local.array(EPT, float32)
    u = cuda.local.array(EPT, float32)
    base = cuda.blockIdx.x * (cuda.blockDim.x * EPT) + cuda.threadIdx.x
    for row in range(cuda.blockIdx.y, M, cuda.gridDim.y):
        for e in range(EPT):
            j = base + e * cuda.blockDim.x
            if j < F:
                s[e] = tmp[row, j]
                u[e] = x[row, 2 * j + 1]
        for e in range(EPT):
            j = base + e * cuda.blockDim.x
            if j < F:
                out[row, j] = s[e] * u[e]


def swiglu_interleaved(x, out):
    M, F = out.shape
    tmp = cuda.device_array((M, F), dtype=np.float32)
    grid = ((F + THREADS * EPT - 1) // (THREADS * EPT), min(M, 1024))
    _silu_pass[grid, THREADS](x, tmp, M, F)
    _times_up_pass[grid, THREADS](x, tmp, out, M, F)
    return out
'''),
    "controls/lab3_two_byte_loads.py": Derived(L3, """\
lab 3's "lesson not learned" control: correct, the lab's own hint 1 of step 3 (the graded
function calls step 2's kernel): EPT = 8 two-byte loads per thread, all before the math, and no
packed 16-byte access. Named by autograder/rubrics/lab3_half_precision.toml; timed against the
master by benchmarks/lesson_controls_probe.py.""", append='''
def swiglu_clamped_fp16(gate, up, out):  # the control: step 2's two-byte loads
    return clamped_ilp(gate, up, out)
'''),
    "controls/lab4_unfused.py": Derived(L4, """\
lab 4's "lesson not learned" control: correct, the lab's own hint 1 of step 4: the two
projections by step 3's register-blocked GEMM into float32 scratch arrays, then a small
elementwise kernel for the biases, SiLU and the product (x read twice, the two projections
written and read back). Named by autograder/rubrics/lab4_dual_gemm.toml; timed against the
master by benchmarks/lesson_controls_probe.py.""", append='''
# the control: two GEMMs, then the epilogue in a kernel of its own
@cuda.jit(fastmath=True)
def _epilogue(a, b, bg, bu, out, T, h):
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r = cuda.blockIdx.y
    if c < h:
        g = a[r, c] + bg[c]
        u = b[r, c] + bu[c]
        out[r, c] = g / (float32(1.0) + math.exp(-g)) * u


def linear_swiglu(x, wg, bg, wu, bu, out):
    T, d = x.shape
    h = wg.shape[0]
    a = cuda.device_array((T, h), dtype=np.float32)
    b = cuda.device_array((T, h), dtype=np.float32)
    gemm_blocked(x, wg, a)
    gemm_blocked(x, wu, b)
    _epilogue[((h + 255) // 256, T), 256](a, b, bg, bu, out, T, h)
    return out
'''),
    "controls/lab4_unfused_tiled.py": Derived(L4, """\
an alternative control for lab 4 (measured beside the rubric's, for the record): hint 1 of
step 4 with step 2's shared-memory tiles instead of step 3's register blocks, so neither the
register block nor the fusion is learned.""", append='''
# the alternative control: two tiled GEMMs (one output per thread), then the epilogue
@cuda.jit(fastmath=True)
def _epilogue(a, b, bg, bu, out, T, h):
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r = cuda.blockIdx.y
    if c < h:
        g = a[r, c] + bg[c]
        u = b[r, c] + bu[c]
        out[r, c] = g / (float32(1.0) + math.exp(-g)) * u


def linear_swiglu(x, wg, bg, wu, bu, out):
    T, d = x.shape
    h = wg.shape[0]
    a = cuda.device_array((T, h), dtype=np.float32)
    b = cuda.device_array((T, h), dtype=np.float32)
    gemm_tiled(x, wg, a)
    gemm_tiled(x, wu, b)
    _epilogue[((h + 255) // 256, T), 256](a, b, bg, bu, out, T, h)
    return out
'''),
    "controls/lab5_two_pass.py": Derived(L5, """\
lab 5's "lesson not learned" control: correct, the lab's own hint 1 of step 4 (issue 28: the
unfused two-pass solution got 11.65/12 at 0.75 of the master on the H100): the two projections
by step 3's pipelined tensor-core GEMM into float32 scratch arrays, then a small elementwise
kernel for the biases, SiLU, the product and the half-precision store. Named by
autograder/rubrics/lab5_tensor_core_dual_gemm.toml; timed against the master by
benchmarks/lesson_controls_probe.py.""", append='''
# the control: two GEMMs into float32, then the epilogue in a kernel of its own
@cuda.jit(fastmath=True)
def _epilogue(a, b, bg, bu, out, T, h):
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r = cuda.blockIdx.y
    if c < h:
        g = a[r, c] + float32(bg[c])
        u = b[r, c] + float32(bu[c])
        out[r, c] = g / (float32(1.0) + math.exp(-g)) * u


def linear_swiglu_tc(x, wg, bg, wu, bu, out):
    T, d = x.shape
    h = wg.shape[0]
    a = cuda.device_array((T, h), dtype=np.float32)
    b = cuda.device_array((T, h), dtype=np.float32)
    gemm_pipelined(x, wg, a)
    gemm_pipelined(x, wu, b)
    _epilogue[((h + 127) // 128, T), 128](a, b, bg, bu, out, T, h)
    return out
'''),
    # ------------------------------------------------------------------ lab 6 (issue 31)
    "bounds/lab6_writes_past_end.py": Derived(L6, """\
writes past the end of `out`: the master launching one block more than there are rows of the
weights ((h + 1) * splits, a grid rounded up) with no test of the row j against h (its scratch
sized for that grid). The extra block reads past the end of wg, wu and the biases (their guard
zones: NaN) and stores out[t, h] for every token: the first element of the next token's row
(where it races block 0; the simulator runs it last, so NaN stays), and for the last token
one element past the end of `out`. Every case fails with "wrote 1 element past the end of
`out`, the first at flat index T*h".""",
        {"lab6-02": [("np.zeros(h * splits * 2 * T_MAX, np.float32)",
                      "np.zeros((h + 1) * splits * 2 * T_MAX, np.float32)"),
                     ("cuda.to_device(np.zeros(h, np.int32))",
                      "cuda.to_device(np.zeros(h + 1, np.int32))")],
         "lab6-03": [("KERNELS[T][h * splits, THREADS]",
                      "KERNELS[T][(h + 1) * splits, THREADS]")]}),
    "bounds/lab6_forgets_blockidx_x.py": Derived(L6, """\
forgets blockIdx.x (the master's grid is 1D: a block per row of the weights): every block
takes row 0, each a share of d that is empty but for the first. Fails every case with more than
one row (the simulator's hidden cases have h >= 2: two blocks at least).""",
        {"lab6-03": [("        j = cuda.blockIdx.x // splits\n",
                      "        j = 0 // splits  # blockIdx.x forgotten\n")]}),
    "controls/lab6_one_thread_per_output.py": Derived(L6, """\
lab 6's "lesson not learned" control: correct, the GEMV a first try writes: one thread per
output out[t, j], reading its two weight rows whole, 2 bytes at a time; the 32 threads of a
warp read 32 rows d halves apart (no coalescing, no 16-byte loads) and every token re-reads
the weights. Named by autograder/rubrics/lab6_decode_mlp_up.toml; timed against the master by
benchmarks/lesson_controls_probe.py.""", append='''
# the control: one thread per output, each reading its weight rows whole
@cuda.jit(fastmath=True)
def _one_thread_per_output(x, wg, bg, wu, bu, out, T, d, h):
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y
    if j < h:
        a = float32(bg[j])
        b = float32(bu[j])
        for k in range(d):
            xk = float32(x[t, k])
            a += float32(wg[j, k]) * xk
            b += float32(wu[j, k]) * xk
        out[t, j] = a / (float32(1.0) + math.exp(-a)) * b


def decode_swiglu(x, wg, bg, wu, bu, out):
    T, d = x.shape
    h = wg.shape[0]
    grid = ((h + THREADS - 1) // THREADS, T)
    _one_thread_per_output[grid, THREADS](x, wg, bg, wu, bu, out, T, d, h)
    return out
'''),
    "controls/lab6_two_pass.py": Derived(L6, """\
(measured for the record, not the rubric's) lab 6's hint 1 of step 3: the two projections by
step 2's split-K GEMV into float32 scratch, then an elementwise kernel for the biases, SiLU and
the product. Each weight is still read once, by whole warps, 16 bytes at a time: at decode the
fused epilogue saves a launch and a little traffic, not a pass over the weights.""",
        append='''
# the control: two GEMVs into float32, then the epilogue in a kernel of its own
@cuda.jit(fastmath=True)
def _epilogue(a, b, bg, bu, out, T, h):
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y
    if j < h:
        g = a[t, j] + float32(bg[j])
        u = b[t, j] + float32(bu[j])
        out[t, j] = g / (float32(1.0) + math.exp(-g)) * u


def decode_swiglu(x, wg, bg, wu, bu, out):
    T, d = x.shape
    h = wg.shape[0]
    a = cuda.device_array((T, h), dtype=np.float32)
    b = cuda.device_array((T, h), dtype=np.float32)
    splits = choose_splits(h, d)
    gemv_splitk(x, wg, a, splits)
    gemv_splitk(x, wu, b, splits)
    _epilogue[((h + THREADS - 1) // THREADS, T), THREADS](a, b, bg, bu, out, T, h)
    return out
'''),
    # ------------------------------------------------------------------ hazards (issue 41)
    "sanitizer/lab6_control.py": Derived(L6, """\
lab 6's master's graded code, unchanged: the control of the hazard fixtures beside it, on which
racecheck, synccheck and memcheck find nothing."""),
    "sanitizer/lab6_missing_syncthreads.py": Derived(L6, """\
lab 6's master without the barrier before the cross-warp sum: lane 0 of each warp stores its
warp's sums in shared memory (`red[0, t, warp] = vg`) and the threads of warp 0 read every
warp's (`v += red[k, t, q]`) with no `cuda.syncthreads()` between. Warp 0 usually arrives
last, so the values often come out right on a GPU; compute-sanitizer's racecheck reports a RAW
hazard on shared memory between those lines, and grade takes the sanitized case's points.""",
        {"lab6-03": [("                red[1, t, warp] = vu\n        cuda.syncthreads()\n",
                      "                red[1, t, warp] = vu\n"
                      "        # (planted) no cuda.syncthreads() here: warp 0 may read a\n"
                      "        # warp's sums before that warp has stored them\n")]}),
    "sanitizer/lab6_reads_x_past_end.py": Derived(L6, """\
lab 6's master with its token loops run over every token slot (T_MAX) instead of the call's
T: each thread loads rows T .. 15 of x, past its end, sums them into accumulators and shared
words that are never stored to `out`. The values are right (the grader's guard zones after x
hold NaN that is never used); with exact-size arrays compute-sanitizer's memcheck reports
"Invalid __global__ read" just past the end of x, and grade takes the sanitized case's points
as a read outside `x`.""",
        {"lab6-03": [("cuda.local.array(T, float32)", "cuda.local.array(T_MAX, float32)"),
                     ("for t in range(T):", "for t in range(T_MAX):  # (planted) not T")]}),
}


def fixtures(folder: str, lab: str | None = None) -> list:
    """The derived fixtures under tests/fixtures/<folder>/ (of one lab), as paths."""
    return [FIXTURES / n for n, d in sorted(DERIVED.items())
            if n.startswith(folder + "/") and (lab is None or d.lab == labs.resolve(lab))]


# ---------------------------------------------------------------- lab 6's split-K faults (issue 41)
# Each loses correctness points on every grader, in the same words: the simulator's hidden
# cases make the master split d (autograder/labs/lab6_decode_mlp_up.py PATHS), every case is
# called again on the same arrays (autograder/context.py CALLS_*), and the access tracer
# reports races (tests/grader/test_split_k_faults.py; the GPU lane, test_grader_gpu.py).
DERIVED.update({
    "hazards/lab6_counter_without_atomic.py": Derived(L6, """\
lab 6's master with the split-K arrival counted by a plain read and write of the row's counter
instead of an atomic add: two blocks of a row can read the same count, neither sees itself
last, and the row's `out` is never written (on a GPU on some runs; in the simulator's block
order never). Every grader must report a race between blocks on the counter, every run.""",
        {"lab6-02": [("        last = cuda.atomic.add(count, j, 1) == splits - 1\n",
                      "        n = count[j]  # (planted) a plain read and write, no atomic\n"
                      "        count[j] = n + 1\n"
                      "        last = n == splits - 1\n")]}),
    "hazards/lab6_counter_never_reset.py": Derived(L6, """\
lab 6's master whose last block never sets its row's arrival counter back to zero: the first
call at each shape is right; the next call on the same rows starts from `splits` arrivals, no
block sees itself last and `out` stays unwritten. Graded right on the first call and wrong on
the second, with the same words on every grader (the simulator's split cases included).""",
        {"lab6-02": [("        if last:\n            count[j] = 0  # all of row j's blocks arrived: ready again\n",
                      "        # (planted) the counter is never set back to zero\n")]}),
    "hazards/lab6_one_piece_per_thread.py": Derived(L6, """\
lab 6's master with no loop over a block's share of d: each thread reads one 16-byte piece
(`c = c0 + tid`), so a share longer than the block's threads loses its tail. Right on every
case with at most THREADS pieces per block (all the simulator's cases before issue 41); wrong
wherever a share is longer, which the simulator's split cases now are.""",
        {"lab6-03": [("        for c in range(c0 + tid, c1, THREADS):\n",
                      "        for c in range(c0 + tid, min(c1, c0 + tid + 1)):  # (planted) one piece\n")]}),
})


# ---------------------------------------------------------------- labs 2-5: state and reads (issue 41)
_CACHE = """
# (planted) the first call's result kept by shape and copied into `out` on every later call
_FIRST = {{}}
_computed = {fn}


def {fn}(*args):
    key = tuple(tuple(a.shape) for a in args)
    out = args[-1]
    if key in _FIRST:
        out.copy_to_device(_FIRST[key])
        return out
    _computed(*args)
    _FIRST[key] = out.copy_to_host()
    return out
"""
for _lab in (L2, L3, L4, L5):
    DERIVED[f"hazards/{_lab.split('_')[0]}_cache_by_shape.py"] = Derived(_lab, """\
the lab's master with its function wrapped in a cache: the first call at each shape runs the
kernels, every later call copies that call's result into `out`. Right on the first call of a
case, wrong on its second (the same arrays, new inputs): every case fails, on every grader,
said as a dependence on an earlier call.""", append=_CACHE.format(fn=labs.get(_lab).function))
DERIVED["hazards/lab2_reads_past_x.py"] = Derived(L2, """\
lab 2's master with its loads' column test `j <= F` instead of `j < F` (its stores keep
`j < F`): the threads at column F load x[row, 2F] and x[row, 2F + 1], past the row; on the last
row that is past the end of x. `out` is right; the simulator's tracer (and compute-sanitizer's
memcheck on a GPU) sees the read outside `x`, and every case with a ragged last block fails.""",
    {"lab2-03": [("            if j < F:\n                g[e] = x[row, 2 * j]\n",
                  "            if j <= F:  # (planted) one column past the row\n"
                  "                g[e] = x[row, 2 * j]\n")]})


if __name__ == "__main__":
    for name in DERIVED:
        (FIXTURES / name).parent.mkdir(parents=True, exist_ok=True)
        (FIXTURES / name).write_text(source(name))
        print("wrote", FIXTURES / name)
