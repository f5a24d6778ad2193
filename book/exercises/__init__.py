"""Checked exercises: predict a number, pick a choice, or fix a kernel, with instant feedback.

One small object per exercise, in the spirit of GPU-Puzzles' ``lib.py``: it holds the
question, checks an answer with feedback about *this* answer ("too high: you counted the
write twice"), reveals hints one at a time, and keeps the answer hidden until asked::

    ex = exercises.Number("Bytes the naive pair moves?", truth=naive.bytes, unit="bytes",
                          mistakes=[(fused.bytes, "that is the fused kernel's count")])
    ex                      # the question; on a page hints and answer sit in <details>
    ex.check(None)          # "write your prediction in `answer` and run the cell again"
    ex.check(1234)          # feedback on this answer
    ex.hint(); ex.hint()    # hints in order
    ex.solution()           # the answer and why

Five kinds: :class:`Number` (a prediction with a tolerance and a unit), :class:`Choice`
(one of a few options, each wrong option with its own explanation),
:class:`KernelExercise` (a kernel to complete, run on a small input on the GPU, or in
Numba's CUDA simulator where there is none, and compared with the float64 truth of
``book.kernels.reference``) and :class:`FragmentExercise` (a tensor-core fragment index
function, compared with the registers of one warp's real ``ldmatrix`` + ``mma.sync``) and
:class:`ReductionExercise` (a split row sum whose blocks meet in the kernel, the last block to
arrive adding their partials, run like a kernel exercise). A number may be typed with its
unit, ``ex.check("0.25 KiB")``. A kernel's output and a number are compared, and a wrong one
said, by :mod:`book.answers`, the checker a lab's ``check()`` and the grader use too: a
reader meets the same words in a chapter and in a lab.

The framework is one module per kind (:mod:`~book.exercises.core`: the verdict and the
question; :mod:`~book.exercises.number`, :mod:`~book.exercises.choice`,
:mod:`~book.exercises.kernel`, :mod:`~book.exercises.fragment`,
:mod:`~book.exercises.reduction`); the chapters' own exercises
are in :mod:`book.exercises.chapters` and the "Eight bits" chapter's in
:mod:`book.exercises.fp8_chapter`, their right answers computed by the library
(``book.traffic``, ``book.roofline``, ``book.data``) or by running the code the exercise names,
never typed, so a chapter cell shows the question without giving the answer away (a question
that asks the reader to run or change code is a checked exercise, never a typed answer:
tests/chapters/test_exercise_answers.py). All are reachable here as ``book.exercises.X``, as
the chapters' cells read them (``exercises.Number``, ``exercises.naive_pair_bytes``), each with
``check(answer)``, ``hint()`` and ``solution()``. Tests: tests/library/test_exercises.py, and
tests/chapters/ for cells taken from a chapter.
"""

from __future__ import annotations

from .chapters import (activation_time_share, add_rmsnorm_bytes, attainable_tflops,
                       descriptor_address, fix_fragment_index, fix_fused_kernel,
                       fusion_speedup, last_block_sum, moved_accumulators, naive_pair_bytes,
                       producer_first_parity, rule_share, separate_pass_share, stage_tx_bytes,
                       uncoalesced_counter)
from .choice import Choice
from .core import PLACEHOLDER, Exercise, Feedback, Text
from .fp8_chapter import e4m3_value, epilogue_scales, fp8_weight_read, unfused_pass_bytes
from .fragment import FragmentExercise
from .kernel import KernelExercise
from .number import Number
from .reduction import ReductionExercise

__all__ = ["Feedback", "Exercise", "Text", "Number", "Choice", "KernelExercise",
           "FragmentExercise", "ReductionExercise", "PLACEHOLDER", "naive_pair_bytes",
           "attainable_tflops", "activation_time_share", "fusion_speedup", "fix_fused_kernel", "uncoalesced_counter",
           "add_rmsnorm_bytes", "separate_pass_share", "fix_fragment_index",
           "moved_accumulators", "descriptor_address", "stage_tx_bytes", "producer_first_parity",
           "rule_share", "last_block_sum", "fp8_weight_read", "e4m3_value", "epilogue_scales",
           "unfused_pass_bytes"]
