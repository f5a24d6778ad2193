"""The course's autograder, split the way otter-grader is: assign (masters -> labs), check
(the student's self-test inside a lab), grade (a class, sandboxed, on GPU or simulator),
export (Gradescope results and bundles, merging shards). ``python -m autograder --help``.

The map (every module named; tests/tooling/test_contributing.py checks). Its threat model and
the table of labs: autograder/README.md.

The verbs (``__main__``: ``python -m autograder list|new-lab|assign|check|grade|merge|export``)
  ``assign``: masters to labs; a master without its setup cell, or one that drifts from its
  spec, is refused. ``check``: the student's self-test. ``scaffold``: ``new-lab``, a new lab's
  three files from a working template (CONTRIBUTING.md, "Add a lab"). ``grade``: the run and
  its two phases, composed of three parts that each take one ``context.RunContext`` (lab,
  cases, limits, log, folders and the ``ChildFactory`` that builds every sandboxed child).
  ``export``: results.json, feedback.md, grades.csv; the only writer of Gradescope's keys.
  ``gradescope``: the Gradescope bundle and the run of one submission in Gradescope's
  container, root from ``AUTOGRADER_ROOT``: the bundle closed to the submission's uid, the
  course's totals with performance pending, a log on stdout.

What check and grade share
  ``book.answers`` (book's, as a chapter's exercise says a result too): a result against its
  float64 reference, said the same way to student and instructor (imported inside the
  functions that use it: importing book decides GPU or simulator, which grade decides first).
  ``inputs``: inputs generated from a seed, by the grader and inside the child
  alike, and the guard zones every array the grader hands a submission sits between (their
  size, poison and what was written into them). ``submission``: a submission (a Colab
  ``.ipynb`` or a ``.py``) found in a run's folders and named (its id), read into code cells
  without running it, its source scanned for what a reviewer should see. ``rubric``: rubrics (autograder/rubrics/) and the scoring rule
  (``lines_from_control``: a rubric's performance lines from its control's timing).
  ``setup_template``: the setup cell's one template and its place in a notebook, which
  ``assign`` writes into each lab (``tools.setup_cell`` is the build tool around it).
  ``master``: a lab's master read (``graded_cells``: the one reader of its graded code) and
  edited (``labs.edits``' ``Edit``s made: ``namespace``, ``derive``), for the planted bugs, the
  derived fixtures, ``tools.lab_ptx`` and the benchmarks; and its markers, ``assign``'s.
  ``hazards``: a race between blocks or on shared memory, a barrier not every thread reaches,
  a read outside an input: one set of words for the tracer and compute-sanitizer, each costing
  its case. ``feedback``: the access pattern traced in the simulator, printed by ``check``.
  ``rerun``: a student's code run again in a fresh process, what ``feedback`` and ``sanitize``
  need on a GPU; each names itself as that process's entry point.

The grading run's parts
  ``context``: the ``RunContext`` and the ``ChildFactory``. ``loading``: the one way a child is
  started and a submission loaded in it, one typed outcome (``Loaded``, ``FailedBeforeCode``,
  ``CrashedLoading``, ``Unexpected``; the tests inject faults around it:
  tests/grader/faults.py). ``judge``: ``Judge``, each case's calls (every case called several
  times on the same arrays, every call judged: ``context.CALLS_*``), the kernel proof, the
  simulator's replay of a recording, on a GPU the simulator's hazard trace of each case.
  ``compiling``: in the simulator, every kernel the passing tests launched compiled for a real
  GPU without one (a sandboxed child on Numba's real target; ``book.numba_compat.compile_for_cc``):
  a kernel no GPU could compile (host NumPy in its body) costs the correctness points.
  ``timing``: ``Timer``, the timing call recorded, then timed with no submission alive, paired
  with the master. ``recording``: a child's recorded launches copied out, checked, summarised.
  ``replay_client``: the trusted replay process of each GPU seen from the grader; ``replay`` is
  that process. ``sanitize``: ``Sanitizer``, on every GPU ``grade`` (``--no-sanitize`` turns it
  off) racecheck, synccheck and memcheck on the public case that takes the most of the lab's
  paths, a finding costing that case; and ``check(fn, sanitize=True)``: all the grader's
  compute-sanitizer code (the tool itself is ``book.sanitizer``). ``results``: the ``Result``
  and its typed ``TestRecord``s, which the exporters read. ``gpuwatch``: NVML: who holds a GPU
  and how much of its memory (``others_on`` before and after a timing window).

Packages
  ``labs``: one module per lab and the registry (its docstring is its map). ``sandbox``: one
  child in its own process (its docstring is its map; ``sandbox.inside`` the child's side).
"""

__all__ = ["check"]


def check(*args, **kwargs):
    """Run a lab's public tests on your function and say exactly what is wrong."""
    from .check import check as _check

    return _check(*args, **kwargs)
