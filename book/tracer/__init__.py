"""See the memory traffic: run a kernel in Numba's CUDA simulator and record every access.

Taught in chapter 4 (the first kernel), used again for coalescing, vector loads (chapter 6)
and shared-memory tiles (chapter 7).

A GPU does not move single elements: a warp's load or store instruction becomes one *request*,
and the memory system moves whole 32-byte *sectors* (and keeps 128-byte *lines* in cache) to
serve it. Whether a kernel wastes bandwidth is therefore a property of each warp instruction:
which addresses its 32 lanes touch together. The simulator runs every CUDA thread as a Python
thread, so it can tell us exactly that:

- :func:`trace` launches a kernel in the simulator on small inputs with every array argument
  (and every ``cuda.shared.array`` the kernel makes) wrapped in a recorder. Each access is
  stored with its block, warp, lane, array, element index, bytes and load/store kind, in each
  thread's program order, and with the *instruction* that made it (the source position of the
  Python bytecode that indexed the array).
- A warp-level request is the k-th execution of one instruction by the lanes of one warp (the
  simulator does not run warps in lock step, so the grouping is by instruction and occurrence,
  which is what a converged warp executes together).
- :class:`Trace` computes, per request: sectors and lines touched against the fewest that the
  requested bytes need, bytes requested against bytes moved, and for shared memory the bank
  conflict degree ("ways": the most distinct 4-byte words any one of the 32 banks must serve).
  Its :meth:`~Trace.table` summarises by instruction, :meth:`~Trace.show` draws which thread
  touched which element (a colour per warp) and :meth:`~Trace.heatmap` sectors per request.

One module per part: ``model`` (accesses, warp requests, ``Trace``: sectors per request,
bank-conflict ways, pictures of threads per element and of a shared request bank by bank),
``recorder`` (``trace`` a kernel, or ``trace_call`` a host function and every kernel it
launches, in the simulator), ``advice`` (the one access advice, thresholds as parameters: what
``check()`` prints), ``course`` (the course's kernels launched as their wrappers do,
``COURSE_VARIANTS``; ``gemm_block`` traces one block of the tiled GEMM by name; the agreement
with ncu, tested), ``child`` (a GPU session's side of the simulator process it traces in: the
job, the process, the result) and ``__main__`` (that process, ``python -m book.tracer``).

Vector loads from :mod:`book.kernels.instructions.wide` (``load4``, ``load_half8``, ...) are plain loops in
the simulator; the tracer folds the elements of one such call back into the single 8- or
16-byte access the GPU makes.

Model and limits (said plainly, because they matter when you compare with ``ncu``): arrays are
taken to start on a 256-byte boundary (as ``cudaMalloc`` returns them); a request's sectors are
counted per request, not per cache hit, exactly like ncu's ``l1tex__t_sectors_*`` over
``l1tex__t_requests_*``; 8- and 16-byte shared accesses are split into half- and quarter-warp
phases the way the hardware serves them. Only what the kernel indexes is seen: a kernel whose
loads the compiler would merge or drop looks as written.
"""

from __future__ import annotations

from .advice import advice
from .course import COURSE_VARIANTS, agreement, course_launch, gemm_block
from .model import BANKS, LINE, MAX_THREADS, SECTOR, WARP, Access, Request, Trace, TracerError
from .child import importable_name
from .recorder import trace, trace_call

__all__ = ["trace", "trace_call", "advice", "course_launch", "gemm_block", "agreement", "Trace",
           "Access", "Request", "TracerError", "MAX_THREADS", "SECTOR", "LINE", "WARP", "BANKS",
           "COURSE_VARIANTS", "importable_name"]
