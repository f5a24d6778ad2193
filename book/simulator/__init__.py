"""Numba's CUDA simulator made to behave as a GPU does, and watched: what ``book.gpu`` applies
when it picks the simulator, and what the grader's children and ``check()`` record a simulated
launch with. Nothing here imports ``numba.cuda`` at import time (``book.gpu`` imports
``fidelity`` and ``scheduler`` before deciding); each module patches the simulator through
``book.numba_compat``, the one place that reaches past numba-cuda's public API.

The map:

``fidelity``: where Numba's simulator would compute what a GPU does not, it does as the
GPU does (a 2-D device array's ``.T`` is a copy, as numba-cuda's transpose kernel makes it; a
block's threads asking for a ``cuda.shared.array`` at once all get the one array, where
numba-cuda's lookup-then-store could give a preempted thread an ``np.empty`` array of its
own: chapter 7's dual GEMM's inf on loaded CI machines, tests/library/test_simfidelity.py);
applied by ``book.gpu`` when it picks the simulator.
``scheduler``: the simulator's block loop paused between passes instead of holding the
GIL from the threads it waits for, several times faster (records/simulator/); a grid's
blocks run in a seeded order (``block_order``, ``BOOK_SIM_BLOCK_ORDER``: a seed, default 0,
or ``index``), the same in every process; it counts each thread's barriers and tells the
hazard recorder which threads each barrier releases; applied by ``book.gpu`` too.
``sequential``: a block of a kernel whose code (and every function it reaches) has no
barrier, warp exchange or while loop runs its threads one after another on the launching
Python thread, each still its ``BlockThread`` to ``threading.current_thread()`` (the hazard
recorder, the tracer): less CPU for the elementwise labs and chapters, measured in
records/simulator/simsequential_cpu.json (``BOOK_SIM_SEQUENTIAL=0``: always threaded);
called by ``scheduler``'s loop.
``addressing``: a simulated kernel's arrays addressed as on a GPU (an index past a
dimension is the next element in memory; only an address outside the allocation raises):
the grader's driver and ``check()`` launch through it, so a store past the end of ``out``
lands in its guard zone in the simulator as on a GPU.
``hazard_recorder``: hazards in simulated launches (issue 41): ``recording(bodies)`` watches every
launch inside it (``launch``, in the grader's child and ``addressing.installed``): its
arrays, shared arrays, ``cuda.atomic.*``, fences and barriers, and gives
``autograder/hazards.py``'s findings (``Recorder.hazards()``: races between blocks and
between warps, barriers not every thread reaches, reads outside an array, each with its
array, flat index and the student's line), capped where a trace would be too large
(``Recorder.notes``); its cost: records/simulator/simhazards_cost.json;
tests/library/test_simhazards.py, the labs' in tests/grader/test_hazard_trace.py.
``happens_before``: the analysis of one simulated launch's events: the happens-before the
course teaches (program order, barriers, a fence then an atomic released, a later atomic on
the word acquired), and the races, divergent barriers and reads outside an array it finds,
in the student's words.
"""
