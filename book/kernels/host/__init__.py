"""The host side: how a kernel is planned, launched and compiled for reading.

- ``plan``: the one way to plan and launch a kernel (issue 44): a wrapper's ``prepare``
  returns a ``KernelLaunch`` (kernel, grid, block, shared memory, arguments, an optional
  cluster or dependent launch), ``plans_for`` packs it once into ``LaunchPlan`` s, ``launch``
  makes one with ``cuLaunchKernel`` or ``cuLaunchKernelEx``, ``raw_stream`` is the one way to
  find the stream, and ``PlannedCall`` / ``planned(name)`` is an entry point's plan cache (one
  key: the stream and each tensor's pointer, shape, strides and dtype; ``BoundedCache``), which
  every public wrapper called plainly goes through: capturable in a CUDA graph
  (tests/library/test_plan.py).
- ``launch``: the wrappers' host side: checks, torch views (``prepare``), ``KernelLaunch`` and
  Numba's launch of it, ``launch_kernel`` (the elementwise wrappers' launch, planned by
  ``plan`` once per kernel, grid, block and arrays); ``jit_bounds``: a tile's ``min_blocks`` as
  ``launch_bounds``; ``deliberate_grid`` keeps the course's own small launches from printing
  numba-cuda's "Grid size N" warning.
- ``fastcall``: the cheap elementwise call from torch tensors (``FastCall``, chapter 6's decode
  section: a ``PlannedCall`` whose per-call path reads its key inline and calls
  ``cuLaunchKernel`` itself; tests/library/test_fastcall.py; records/launch/README.md).
- ``ptx``: compile the kernels to PTX, even with no GPU (``kernels()`` and the other tables:
  what tests/library/test_ptx.py reads).
"""
