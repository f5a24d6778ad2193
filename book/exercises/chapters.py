"""The chapters' exercises. Each right answer is computed here from the library
(book.traffic, book.roofline, book.data), so the chapter cell that builds one shows the
question, not the answer."""

from __future__ import annotations

from .choice import Choice
from .fragment import FragmentExercise
from .kernel import KernelExercise
from .number import Number
from .reduction import ReductionExercise

__all__ = ["naive_pair_bytes", "attainable_tflops", "activation_time_share", "fusion_speedup",
           "fix_fused_kernel", "uncoalesced_counter", "add_rmsnorm_bytes", "separate_pass_share",
           "fix_fragment_index", "moved_accumulators", "descriptor_address", "stage_tx_bytes",
           "producer_first_parity", "rule_share", "last_block_sum"]

def naive_pair_bytes(T: int = 4, h: int = 8, dtype: str = "float32") -> Number:
    """Chapter 1: the bytes the two-kernel SwiGLU moves for one [T, h] activation."""
    from .. import traffic

    naive = traffic.activation(T, h, dtype, "naive")
    fused = traffic.activation(T, h, dtype, "fused")
    n, size = T * h, naive.itemsize
    return Number(
        f"The unfused SwiGLU runs two kernels (silu, then multiply) on `gate` and `up` of "
        f"shape [{T}, {h}] in {dtype} ({size} bytes per element). How many bytes do the "
        "two kernels move to and from main memory in all?",
        naive.bytes, unit="bytes", rel=0.0, abs_tol=0.5,
        mistakes=[
            (fused.bytes, "that is one fused kernel. The pair also writes the "
                          "temporary `silu(gate)` and reads it back."),
            (naive.transfers, f"that is the number of transfers; each moves {size} "
                              "bytes."),
            (4 * n * size, "the multiply kernel reads the temporary back as well as "
                           "`up`: count its two reads."),
            (6 * n * size, "`gate` and `up` are read once each, and the temporary is "
                           "written once and read once."),
        ],
        hints=["Count each kernel separately: what it reads and what it writes.",
               f"silu reads `gate` and writes `tmp`: {2 * n} transfers. The multiply reads "
               "`tmp` and `up` and writes `out`.",
               f"Transfers times {size} bytes."],
        explanation=f"silu: {2 * n} transfers (2·T·h), multiply: {3 * n} (3·T·h); in all "
                    f"{naive.transfers} transfers (5·T·h) of {size} bytes. The fused "
                    f"kernel moves 3·T·h transfers: {fused.bytes:,} bytes.")


def attainable_tflops(spec="H100-SXM", dtype: str = "float32", variant: str = "fused",
                      T: int = 8192, h: int = 14336) -> Number:
    """Chapter 2: the roofline's attainable TFLOP/s of the SwiGLU activation."""
    from .. import roofline, specs, traffic

    spec = specs.get(spec)
    tr = traffic.activation(T, h, dtype, variant)
    precision = roofline.default_precision(tr.dtype, "elementwise")
    peak = spec.peak(precision)
    truth = min(peak, tr.intensity * spec.memory_bandwidth) / 1e12
    per_transfer = tr.flops / tr.transfers * spec.memory_bandwidth / 1e12
    return Number(
        f"The {variant} SwiGLU activation in {dtype} does {traffic.FLOPS_PER_ELEMENT} "
        f"flops per output element, for which it moves {tr.transfers // (T * h)} "
        f"elements of {tr.itemsize} bytes ({tr.reads // (T * h)} read, "
        f"{tr.writes // (T * h)} written). On the {spec.name} "
        f"({spec.memory_bandwidth / 1e12:.2f} TB/s, {peak / 1e12:.1f} TFLOP/s "
        f"{precision}), what is its attainable performance, in TFLOP/s?",
        truth, unit="TFLOP/s", rel=0.05,
        mistakes=[
            (peak / 1e12, "that is the compute roof. Is the kernel's intensity left "
                          "or right of the ridge?"),
            (per_transfer, "you divided the flops by transfers, not bytes: intensity "
                           "is flop per byte."),
        ],
        hints=["Intensity I = flops / bytes, per element.",
               f"I = {traffic.FLOPS_PER_ELEMENT} / {tr.bytes // (T * h)} flop/byte; "
               "the ridge is I* = P / β (peak / bandwidth).",
               "Left of the ridge the roof is I · β (intensity × bandwidth)."],
        explanation=f"I = {tr.intensity:.3f} flop/byte, far left of the ridge "
                    f"(I* = P / β = {peak / spec.memory_bandwidth:.1f}): memory-bound, so "
                    f"min(P, I · β) = I · β = {truth:.2f} TFLOP/s, "
                    f"{truth * 1e12 / peak:.1%} of the compute roof.")


def activation_time_share(T: int, d: int, h: int, dtype: str = "bfloat16",
                          spec="H100-SXM") -> Number:
    """Chapter 3: the fused activation's share of one MLP block's roofline time."""
    from .. import roofline, specs, traffic

    spec = specs.get(spec)
    steps = {"gate": traffic.gemm(T, d, h, dtype), "up": traffic.gemm(T, d, h, dtype),
             "act": traffic.activation(T, h, dtype, "fused"),
             "down": traffic.gemm(T, h, d, dtype)}
    times = {k: roofline.predict(s, spec, "bf16").time_s for k, s in steps.items()}
    share = 100 * times["act"] / sum(times.values())
    flops = 100 * steps["act"].flops / sum(s.flops for s in steps.values())
    nbytes = 100 * steps["act"].bytes / sum(s.bytes for s in steps.values())
    return Number(
        f"One MLP block at T = {T} (d = {d}, h = {h}, {dtype}) runs gate, up and down "
        "GEMMs and the fused SwiGLU activation. On the roofline of the "
        f"{spec.name} (bf16 tensor cores for the GEMMs), what percentage of the "
        "block's predicted time is the activation's?",
        share, unit="%", rel=0.25,
        mistakes=[
            (flops, "that is its share of the flops. A memory-bound step's time "
                    "follows its bytes, not its flops."),
            (nbytes, "that is its share of the bytes. The GEMMs are compute-bound: "
                     "their time is flops / peak, not bytes / bandwidth."),
        ],
        hints=["Predict each step's time with the roofline: max(bytes / bandwidth, "
               "flops / peak).",
               "The GEMMs are compute-bound at this T; the activation is memory-bound.",
               "Share = activation time / (sum of the four times)."],
        explanation=f"The activation takes {times['act'] * 1e6:.0f} µs of "
                    f"{sum(times.values()) * 1e6:.0f} µs: {share:.1f}% of the time for "
                    f"{flops:.2f}% of the flops and {nbytes:.1f}% of the bytes.")


def fusion_speedup(T: int, h: int, dtype: str = "float32") -> Number:
    """Chapter 5: the predicted time ratio naive / fused when both stream at one speed."""
    from .. import traffic

    naive = traffic.activation(T, h, dtype, "naive")
    fused = traffic.activation(T, h, dtype, "fused")
    ratio = naive.bytes / fused.bytes
    return Number(
        f"Both SwiGLU designs (the naive pair and one fused kernel) run at the same "
        f"memory bandwidth on [{T}, {h}] {dtype} tensors. Predict time(naive) / "
        "time(fused).",
        ratio, unit="", rel=0.03,
        mistakes=[
            (1 / ratio, "that is fused / naive, upside down: the naive pair is the "
                        "slower one."),
            (2.0, "the naive pair is not two full kernels' worth of the fused one: "
                  "silu moves two tensors, multiply three."),
            (1.0, "same bandwidth, but not the same bytes: the pair writes and reads "
                  "a temporary."),
        ],
        hints=["At one bandwidth, time is proportional to bytes.",
               "Count transfers per element: silu kernel + multiply kernel, against "
               "one fused kernel."],
        explanation=f"{naive.bytes:,} / {fused.bytes:,} bytes = 5·T·h / 3·T·h = "
                    f"{ratio:.3f}, for every shape and dtype.")


_FIXED_FUSED = '''@cuda.jit
def my_fused(gate, up, out):
    i = cuda.grid(1)
    if i < out.size:  # the last block has threads past the end
        g = gate[i]
        out[i] = g / (float32(1.0) + math.exp(-g)) * up[i]'''


def fix_fused_kernel(name: str = "fix") -> KernelExercise:
    """Chapter 5: a fused SwiGLU kernel with two bugs to fix, run on the GPU (or in the
    simulator where there is none). ``name``: the chapter's variable for it (``fix``)."""
    return KernelExercise(
        "`my_fused` should compute `out = silu(gate) * up`, one element per thread, "
        "but it has two bugs. Fix them and run the cell until the check says Right.",
        n=300, block=128, solution_source=_FIXED_FUSED, name=name,
        hints=["300 elements in blocks of 128: how many threads run, and what do the "
               "extra ones touch?",
               "`silu(g) = g / (1 + exp(-g))`: check the sign inside the exponential."],
        explanation="The guard `if i < out.size:` keeps the last block's spare threads "
                    "off the end of the arrays; silu needs `exp(-g)`.")


def uncoalesced_counter(diag: dict | None = None) -> Choice:
    """Chapter 10: which counter tells an uncoalesced kernel from one that moves extra bytes.

    The right option is derived from the recorded ncu diagnosis: the one metric that
    stays at the coalesced control's value for the naive pair (extra bytes, coalesced
    loads) and grows for the stride-32 kernel."""
    from .. import data

    diag = diag or data.record("ncu/diagnosis_h100")
    cases = diag["cases"]

    def metric(case, key):
        c = cases[case]
        if key == "time":
            return c["gpu_time_s"]
        if key == "stall":
            name = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
            return c["launches"][0]["metrics"][name]
        return c[key]

    keys = {"a": "dram_over_minimum", "b": "sectors_per_load_request", "c": "stall",
            "d": "time"}
    ratio = {k: (metric("naive", m) / metric("coalesced", m),
                 metric("uncoalesced", m) / metric("coalesced", m)) for k, m in keys.items()}
    # singles out uncoalesced loads: unchanged for the naive pair, at least 2x for stride 32
    telling = [k for k, (nv, un) in ratio.items() if abs(nv - 1) < 0.2 and un >= 2]
    if len(telling) != 1:
        raise ValueError(f"the recorded diagnosis no longer singles out one counter "
                         f"(candidates {telling}); revisit this exercise with the data")

    def said(k):
        nv, un = ratio[k]
        return f"the naive pair shows {nv:.2f}× the control, stride 32 {un:.1f}×"

    # the metric names as chapter 10's table writes them
    options = {"a": "DRAM bytes over the minimum (`dram__bytes_read.sum` + "
                    "`dram__bytes_write.sum`)",
               "b": "sectors per load request "
                    "(`l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum` / `..._requests_...`)",
               "c": "long-scoreboard stalls per issued instruction",
               "d": "kernel time (`gpu__time_duration.sum`)"}
    why = {k: f"it moves for other causes too: {said(k)}." for k in keys if k not in telling}
    return Choice(
        "The naive pair (coalesced loads, extra bytes) and a stride-32 kernel (uncoalesced "
        "loads) are both slower than the coalesced control. Which one counter points at "
        "the access pattern, high for the uncoalesced kernel but at the control's value "
        "for the naive pair?",
        options, telling[0], why=why,
        hints=["A coalesced warp load of 32 floats is 128 bytes: 4 sectors of 32 bytes.",
               "Which counter is about one request, not the whole kernel?"],
        explanation=f"Sectors per request: {said(telling[0])}. Each lane of a stride-32 "
                    "warp lands in its own sector.")


def add_rmsnorm_bytes(T: int, d: int, dtype_bytes: int = 2) -> Number:
    """Chapter 11: the bytes the fused residual add + RMSNorm moves."""
    from ..kernels.elementwise import glu_family

    unfused, fused = glu_family.traffic_bytes("add_rmsnorm", T, d, dtype_bytes)
    n = T * d * dtype_bytes
    return Number(
        f"The fused residual add + RMSNorm kernel reads `x` and `r`, each [{T}, {d}] "
        f"with {dtype_bytes} bytes per element, and writes `h = x + r` and "
        "`y = rmsnorm(h) * w`. How many bytes does it move to and from main memory? "
        f"(Ignore the weight `w`: {d} elements.)",
        fused, unit="bytes", rel=0.01,
        mistakes=[
            (unfused, "that is five streams: the two-kernel version writes `h` and "
                      "reads it back. The fused kernel's second pass over `h` reads a row "
                      "its block just wrote, from the cache, not from DRAM."),
            (3 * n, "the next layer needs `h` as its residual, so `h` is written as "
                    "well as `y`."),
        ],
        hints=["Count streams of T × d elements: reads, then writes.",
               "Two reads (`x`, `r`) and two writes (`h`, `y`)."],
        explanation=f"4 streams × {T} × {d} × {dtype_bytes} bytes = {fused:,} bytes; "
                    f"unfused, 5 streams = {unfused:,}.")


def separate_pass_share(T: int = 2048, d: int = 4096, h: int = 14336,
                        gpu: str = "h100") -> Number:
    """Chapter 8: the separate SwiGLU pass's share of the unfused tensor-core MLP-up.

    The reader is given the recorded time of the course's ``mma.sync`` GEMM writing gate|up
    and the rate at which a bf16 elementwise pass streams (the compiled pass's, recorded), and
    predicts the half8 pass's share of GEMM + pass; the truth is the recorded run's."""
    from .. import data, traffic
    from ..bench.tensorcore import pass_share

    rec = data.load(gpu)
    gemm = rec.find("tc_gate_up", "bfloat16", (T, d, h))["seconds"]
    pass_s = rec.find("tc_half8_only", "bfloat16", (T, h))["seconds"]
    compiled = rec.find("separate_pass_compiled", "bfloat16", (T, d, h))
    cublas_share = 100 * pass_share(rec, T, d, h, "compiled")["share"]  # as chapter 8 shows it
    bw = compiled["bandwidth"]
    act = traffic.activation(T, h, "bfloat16", "fused")
    share = 100 * pass_s / (gemm + pass_s)
    predicted = act.bytes / bw
    as_f32 = 2 * predicted
    no_write = predicted * 2 / 3
    gpu_name = (rec.find("tc_gate_up", "bfloat16", (T, d, h)).get("provenance")
                or rec.provenance).get("gpu")
    return Number(
        f"On the {gpu_name}, the course's `mma.sync` GEMM writing gate and up in bf16 took "
        f"{gemm * 1e6:,.0f} µs at T = {T}, d = {d}, h = {h} (the measurement table below, "
        "row \"its GEMM alone (gate, up stored)\": the GEMM of the \"control: same GEMM + "
        "half8\" path, timed without its pass). Then the separate SwiGLU pass "
        f"(the `half8` kernel) reads gate and up, [{T}, {h}] bf16 each, and writes `out`, "
        f"streaming at about {bw / 1e12:.2f} TB/s (the compiled pass's measured rate). "
        "Predict the pass's share of the unfused MLP-up time, pass / (GEMM + pass), in %.",
        share, unit="%", rel=0.15,
        mistakes=[  # the first that lies within the tolerance speaks
            (cublas_share, "that is the pass's share beside cuBLAS's GEMM, which is "
                           "faster than ours: the same pass is a smaller share of a slower "
                           "GEMM."),
            (100 * as_f32 / (gemm + as_f32), "bf16 elements are 2 bytes, not 4."),
            (100 * no_write / (gemm + no_write), "the pass also writes `out`: three "
                                                 "transfers per element, not two."),
        ],
        hints=[f"The pass moves 3 × {T} × {h} elements of 2 bytes; its time is bytes / rate.",
               "Share = pass / (GEMM + pass)."],
        explanation=f"{act.bytes / 1e6:.0f} MB / {bw / 1e12:.2f} TB/s ≈ "
                    f"{predicted * 1e6:.0f} µs (recorded: {pass_s * 1e6:.0f} µs), so "
                    f"{pass_s * 1e6:.0f} / ({gemm * 1e6:,.0f} + {pass_s * 1e6:.0f}) = "
                    f"{share:.1f}%. Beside cuBLAS's GEMM the same kind of pass is "
                    f"{cublas_share:.0f}%: the faster the GEMM, the more fusion saves.")


_FIXED_A_COORDS = '''def my_a_coords(lane, e):
    g, t = lane >> 2, lane & 3
    row = g + 8 * ((e >> 1) & 1)  # registers 1 and 3: rows 8-15
    col = 2 * t + (e & 1) + 8 * (e >> 2)  # registers 2 and 3: columns 8-15
    return row, col'''


def fix_fragment_index(name: str = "ex") -> FragmentExercise:
    """Chapter 8: fix an A-fragment index function, checked against one warp's real
    registers (``ldmatrix`` + ``mma.sync``, on the GPU or in the simulator)."""
    return FragmentExercise(
        "`my_a_coords(lane, e)` should say which element of the 16 × 16 A tile a lane "
        "holds as its element `e` (0-7: register `e // 2`, low or high half) for "
        "`mma.sync.m16n8k16`, but it swaps the roles of two registers. Fix it and run the "
        "cell until the check says Right.",
        solution_source=_FIXED_A_COORDS, name=name,
        hints=["Look at the drawing of A above: which lanes hold row 8, and in which "
               "register?",
               "Register 1 (elements 2, 3) holds rows 8-15 at the same columns as "
               "register 0; register 2 (elements 4, 5) holds columns 8-15 of rows 0-7."],
        explanation="Registers 0 and 1 cover columns 0-7 (rows g and g + 8), registers 2 "
                    "and 3 columns 8-15: the row offset comes from bit 1 of `e`, the "
                    "column offset from bit 2. `ldmatrix.x4` loads the four 8 × 8 "
                    "quarters in that order.")


def moved_accumulators(A, B, shift: int = 4, name: str = "ex4") -> Choice:
    """Chapter 8: what the one-warp cell does when ``c_coords`` puts accumulators 2 and 3 in
    rows ``g + shift``. The answer is the run itself (:mod:`book.accumulator_table`: the
    chapter's A and B, one warp in Numba's simulator with the table changed), and the GPU's
    option comes from the two tables; no outcome is typed here."""
    from .. import accumulator_table as at

    sim, on_gpu = at.in_simulator(A, B, shift), at.on_a_gpu(shift)
    every = at.Rows(tuple(range(16)), (), (), ())
    options, why = {}, {}
    for key, rows, reason in (
            ("a", sim, None),
            ("b", on_gpu, "that is what a GPU would do: its mma keeps the hardware's layout and "
                          "only your store moves. In the simulator the mma itself reads "
                          "c_coords."),
            ("c", every, "the simulated mma and the store both follow the table, but the "
                         "table now leaves some rows of D without an owner.")):
        text = rows.text()
        if text in options.values():
            continue  # an outcome the run shares with another option is said once
        options[key] = text[:1].upper() + text[1:]
        if reason:
            why[key] = reason
    return Choice(
        f"In `book/kernels/instructions/tensorcore.py`, change `c_coords` so that accumulators 2 and 3 sit "
        f"in rows `g + {shift}` instead of `g + 8`, and run the one-warp cell above in the "
        "simulator. Which rows of D come out right? (And why does "
        "`tests/library/test_tensorcore.py` catch the change twice?)",
        options, "a", why=why, name=name,
        hints=["In the simulator, `mma_bf16_16816` hands each lane the elements of D that "
               "`c_coords` says it holds; the cell's store puts them where `c_coords` says.",
               f"Which rows does `g + 8 * (e >> 1)` reach for g = 0-7, and which does "
               f"`g + {shift} * (e >> 1)`?"],
        explanation=(
            f"Run in the simulator: {sim.text()}. The simulated mma follows c_coords: it hands "
            "each lane D's elements by the changed table, and the store puts them back by the "
            "same table, so every value lands where it belongs, but no lane owns the rows the "
            f"table no longer reaches. On a GPU the instruction's layout is fixed and only the "
            f"store moves: {on_gpu.text()}. The test catches it twice: "
            "test_fragment_tables_match_the_isa compares c_coords with the ISA's formula, and "
            "test_one_warp_mma_registers_and_product compares D with NumPy's A @ B."))


def descriptor_address(row: int = 10, k: int = 37, start: int = 2048,
                       name: str = "ex") -> Number:
    """Chapter 9: the shared byte a wgmma reads for one element of a 128B-swizzled operand,
    from the descriptor model (``book.kernels.instructions.hopper.operand_addresses``)."""
    from ..kernels.instructions.hopper import descriptor, operand_addresses, swizzle

    if start % 1024 or not 0 <= k < 64 or row < 0:
        raise ValueError("start must be a multiple of 1024, k in 0..63, row >= 0")
    step = k // 16
    desc = descriptor(start + 32 * step, 16, 1024, "128B")
    truth = int(operand_addresses(desc, row + 1)[row, k % 16])
    logical = start + (row // 8) * 1024 + (row % 8) * 128 + 2 * k
    assert truth == int(swizzle(logical)), "the descriptor model and the swizzle disagree"
    return Number(
        f"A consumer's tile of x (64 rows × 64 k, bf16, K-major) was written by TMA with the "
        f"128-byte swizzle at shared byte {start:,}: row r is one 128-byte line, 8-row "
        "groups are 1024 bytes apart. The wgmma of k16 step s reads it through a descriptor "
        f"whose start address is {start:,} + 32·s (SBO 1024, 128B swizzle). At which shared "
        f"byte address does it read element (row {row}, k = {k})?",
        truth, unit="", rel=0.0, abs_tol=0.5,
        mistakes=[
            (logical, "that is where the element would be without the swizzle. The 16-byte "
                      "chunk of the line is XORed with the line's place in its 8-row group."),
            (swizzle(start + (row % 8) * 128 + 2 * k),
             f"8-row groups are SBO = 1024 bytes apart: row {row} is in group {row // 8}."),
            (swizzle(start + (row // 8) * 1024 + (row % 8) * 128 + 4 * k),
             "bf16 elements are 2 bytes, not 4."),
        ],
        hints=[f"Without the swizzle: start + 1024·(row // 8) + 128·(row % 8) + 2·k = "
               f"{logical:,}.",
               "The 128B swizzle XORs bits 4-6 of the address (the 16-byte chunk of the "
               "128-byte line) with bits 7-9 (the line within 1024 bytes)."],
        explanation=f"Logical byte {logical:,}: line {(logical >> 7) & 7} of its 1024 bytes, "
                    f"chunk {(logical >> 4) & 7}; the swizzle moves it to chunk "
                    f"{((logical >> 4) & 7) ^ ((logical >> 7) & 7)}: byte {truth:,}. "
                    "Element k of step s is byte 2·(k - 16·s) past the step's start "
                    "address, so the same formula holds for every step.", name=name)


def stage_tx_bytes(tile=None, name: str = "ex") -> Number:
    """Chapter 9: the bytes one stage's ``arrive.expect_tx`` counts, from the kernel's tile
    (``book.kernels.gemms.wgmma_gemm_tile.HopperTile``)."""
    from ..kernels.gemms.wgmma_gemm import TILE

    t = (tile or TILE).validate()
    return Number(
        f"Each stage of the dual GEMM's ring holds a {t.bm} × {t.bk} tile of x and, for "
        f"{t.bn} output columns, the same {t.bn} rows of `wg` and of `wu` ({t.bk} k each), "
        "all bf16, loaded by three TMA boxes that report their bytes to the stage's full "
        "barrier. How many bytes does the producer's `arrive.expect_tx` announce for one "
        "stage?",
        t.stage_bytes, unit="bytes", rel=0.0, abs_tol=0.5,
        mistakes=[
            (t.a_bytes + t.b_half_bytes, "count the third box: up's rows as well as "
                                         "gate's."),
            (t.a_bytes, "that is x's box alone; the weights' two boxes report to the same "
                        "barrier."),
            (2 * t.stage_bytes, "bf16 elements are 2 bytes, not 4."),
            (t.stage_bytes - t.a_bytes // 2, "each consumer reads 64 rows, but the stage "
                                             f"holds all {t.bm} rows of x."),
        ],
        hints=["Three boxes: x (rows × k), wg (columns × k), wu (columns × k).",
               "Elements × 2 bytes."],
        explanation=f"x: {t.bm} × {t.bk} × 2 = {t.a_bytes:,}; wg and wu: {t.bn} × {t.bk} × 2 "
                    f"= {t.b_half_bytes:,} each; in all {t.stage_bytes:,} bytes "
                    f"({t.stage_bytes // 1024} KiB). The phase completes when the producer "
                    "has arrived and all of them have landed.", name=name)


def producer_first_parity(tile=None, name: str = "ex") -> Choice:
    """Chapter 9: the parity the producer's first wait on an empty barrier asks for; the
    answer is the one a fresh ``MbarrierModel`` lets through, and the other one's feedback
    is what the ring model says when the producer asks for it."""
    from ..hopper_figures import ring_model
    from ..kernels.instructions.hopper import MbarrierModel
    from ..kernels.gemms.wgmma_gemm import TILE

    t = (tile or TILE).validate()
    fresh = MbarrierModel(t.consumers)
    passes = [p for p in (0, 1) if fresh.try_wait(p)]
    if len(passes) != 1:
        raise ValueError(f"a fresh barrier lets parities {passes} through; revisit this "
                         "exercise with the model")
    right = passes[0]
    wrong = 1 - right
    try:  # the producer's first wait asks for parity first_parity (its phase bit is 0)
        ring_model(t, k_blocks=2, tiles=1, first_parity=wrong)
        stuck = None
    except RuntimeError as e:
        stuck = str(e)
    if stuck is None:
        raise ValueError("the ring model no longer gets stuck on the wrong parity")
    return Choice(
        f"The producer's first pass over the ring finds every stage's empty barrier fresh "
        f"(initialised with a count of {t.consumers}, no arrivals yet: it is in phase 0). "
        "It must not wait for the consumers, who have read nothing yet. Which parity does "
        "its first `mbarrier.try_wait.parity` on an empty barrier ask for?",
        {"0": "parity 0", "1": "parity 1"}, str(right),
        why={str(wrong): f"phase {wrong} has not completed and cannot: the consumers arrive "
                         "only after reading a stage the producer has not loaded. The model: "
                         + stuck.replace("the ring is stuck", "stuck")},
        hints=["`try_wait.parity p` passes once the phase with parity p has completed.",
               "On a fresh barrier, which parity counts as 'the phase before this one'?"],
        explanation=f"Parity {right}: a fresh barrier is in phase 0, and the wait passes for "
                    "the parity of the phase before it, as if it had completed. So the "
                    "producer waits on `ph ^ 1` with `ph` starting at 0, and the consumers, "
                    "on the full barriers, on `ph`.", name=name)


def rule_share(d: int = 5120, gpu: str = "h100", name: str = "ex") -> Number:
    """Chapter 9: the separate pass's share of the MLP-up that the rule 1.5 P / (BW d)
    predicts at width ``d``, with P and BW from the record."""
    from .. import data
    from ..bench.hopper import RULE_H, RULE_T, predicted_share

    rec = data.load(gpu)
    gemm = rec.find("cublas_linear_gemm", "bfloat16", (RULE_T, 4096, RULE_H))
    copy = rec.find("copy_bandwidth_bf16", "bfloat16")
    p, bw = gemm["flops_per_s"], copy["bandwidth"]
    r = 1.5 * p / (bw * d)
    truth = 100 * predicted_share(p, bw, d)
    peak = rec.provenance.get("peak_bandwidth") or bw
    return Number(
        f"cuBLAS's bf16 GEMM ran at {p / 1e12:,.0f} TFLOP/s on the "
        f"{(gemm.get('provenance') or rec.provenance).get('gpu')}, and a bf16 elementwise "
        f"pass streams at about {bw / 1e12:.2f} TB/s there. The separate SwiGLU pass after "
        "the GEMM moves 3·T·h bf16 elements, the GEMM does 4·T·d·h flops. Predict the "
        f"pass's share of the MLP-up time, pass / (GEMM + pass), for a model of width "
        f"d = {d:,}, in %.",
        truth, unit="%", rel=0.05,
        mistakes=[
            (100 * r, "that is pass / GEMM; the share is pass / (GEMM + pass)."),
            (100 * predicted_share(p, peak, d), "that uses the datasheet's bandwidth, "
                                                "which no kernel reaches: use the pass's "
                                                "own rate."),
        ],
        hints=["Pass time 3·T·h·2 / BW, GEMM time 4·T·d·h / P (at prefill, where the GEMM "
               "is compute-bound): their ratio is 1.5·P / (BW·d), with no T or h in it.",
               "share = ratio / (1 + ratio)."],
        explanation=f"1.5 × {p / 1e12:,.0f} / ({bw / 1e12:.2f} × {d:,}) = {r:.3f} "
                    f"(TFLOP/s over TB/s: flops per byte), so the share is "
                    f"{r:.3f} / {1 + r:.3f} = {truth:.1f}%: what fusing the pass into the "
                    "GEMM can save at that width.", name=name)


_LAST_BLOCK = '''@cuda.jit
def row_sum_split(a, out, part, count, splits):
    row = cuda.blockIdx.x // splits
    s = cuda.blockIdx.x - row * splits
    n = a.shape[1]
    per = (n + splits - 1) // splits
    lo, hi = s * per, min(n, (s + 1) * per)
    v = float32(0.0)
    for k in range(lo + cuda.threadIdx.x, hi, cuda.blockDim.x):
        v += a[row, k]
    total = block_sum(v)
    if cuda.threadIdx.x == 0:
        part[row * splits + s] = total
        cuda.threadfence()  # the partial is visible before it is counted
        if cuda.atomic.add(count, row, 1) == splits - 1:  # the last to arrive
            acc = float32(0.0)
            for q in range(splits):  # in order: the same sum every run
                acc += cuda.atomic.add(part, row * splits + q, float32(0.0))
            out[row] = acc
            count[row] = 0  # ready for the next launch'''


def last_block_sum(name: str = "ex") -> ReductionExercise:
    """The reductions section: complete a split row sum whose blocks meet in the kernel (the
    last block to arrive adds the partials), run on the GPU or in the simulator."""
    return ReductionExercise(
        "`row_sum_split` sums each row of `a` with `splits` blocks per row, each block summing "
        "its share with `block_sum`. As written, every block stores its own share in "
        "`out[row]` and the last writer wins. Make the blocks of a row meet in the kernel: "
        "each leaves its partial in `part`, counts its arrival on `count[row]`, and the last "
        "to arrive adds the row's partials, stores `out[row]` and resets the counter.",
        solution_source=_LAST_BLOCK, name=name,
        hints=["Only thread 0 needs to take part: it holds the block's sum. It writes "
               "`part[row * splits + s] = total`, then `cuda.threadfence()`, then counts "
               "with `old = cuda.atomic.add(count, row, 1)`.",
               "`old == splits - 1` in exactly one block of the row: the last. It adds "
               "`cuda.atomic.add(part, row * splits + q, float32(0.0))` for q in "
               "`range(splits)` (an atomic reads what L2 holds: the other blocks' writes), "
               "stores `out[row]`, and sets `count[row] = 0`."],
        explanation="The fence makes the partial visible to every SM before the count says "
                    "it is there; the atomic makes exactly one block the last; reading the "
                    "partials through L2 avoids a stale copy in this SM's L1; adding them in "
                    "order gives the same sum whichever block arrives last; and the reset "
                    "leaves the workspace ready, so the next launch needs no memset.")
