"""The child's side of the sandbox: the code that runs inside every sandboxed child, copied
whole into the child's folder (with ``autograder.inputs`` and the ``book`` library minus its
kernels) and started by its entry point, ``__main__.py`` (``launcher`` or ``driver``);
nothing here runs on import.

- ``launcher``: the child's first process: limits, the containment (PID namespace, cgroup, or
  the subreaper of its tree), the driver started; its teardown when the grader dies.
- ``driver``: the driver's order: ``isolation``, then the path and the library, then
  ``session``.
- ``isolation``: the child's namespaces and mounts (what is hidden, private /tmp and
  /dev/shm, the network cut, a /proc of its own), ``privilege`` (the uid drop, capabilities,
  the grader's Python read-only), ``permissions`` (what another uid may read), ``seccomp``
  (the network filter where no namespace can be made), ``linux`` (the kernel's constants),
  ``process`` (the process table, killing a tree, cgroup or uid).
- ``settings``: what the grader tells a child (``DriverSettings``); ``channel``: the JSON-lines
  protocol on the two pipes; ``threads``: the simulator's threads under the address-space
  limit (glibc's malloc arenas capped, and the facts reported when a block's threads still
  cannot start).
- ``session``: the CUDA context, then the submission's cells (``cells``) and the grader's
  commands: a test (``calls``), the simulator's replay (``sim_replay``), the compile check
  (``compile``: on Numba's real target with no GPU, each launched kernel compiled), the probe;
  ``launches``: every launch counted and, in a test, recorded; ``import_blocker``: what graded
  code may not import.

The launcher and what it imports (``launcher``, ``isolation``, ``privilege``, ``permissions``,
``seccomp``, ``linux``, ``process``, ``settings``) use the standard library alone: they run
before the child's path is set, and the launcher as root. The session's modules import numpy,
numba.cuda and ``book`` (the child's copy), after the driver has set the path. The grader
imports ``settings``, ``linux``, ``process``, ``permissions``, ``privilege`` and ``seccomp``
too (through ``autograder.sandbox``); nothing here imports the grader's side.
"""
