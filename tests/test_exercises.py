"""book.exercises: each kind of exercise answered right, wrong and not at all."""

from __future__ import annotations

import math

import pytest

import book  # noqa: F401  (decides GPU or simulator first)
from book import exercises
from book.exercises import Choice, KernelExercise, Number
from numba import cuda, float32  # after import book: GPU or simulator


def _number():
    return Number("Bytes the naive pair moves?", 640, unit="bytes", rel=0.02,
                  mistakes=[(384, "that is the fused kernel's count"),
                            (160, "that is transfers: multiply by 4 bytes")],
                  hints=["count reads and writes of each kernel", "5 transfers each"],
                  explanation="5Th transfers of 4 bytes.")


def test_number_placeholder_asks_for_an_answer_without_error():
    fb = _number().check(None)
    assert fb.correct is None and not fb
    assert "`answer`" in str(fb) and "bytes" in str(fb)


@pytest.mark.parametrize("answer", [640, 645.0, "640", "6.4e2", "6_40"])
def test_number_right_within_tolerance(answer):
    fb = _number().check(answer)
    assert fb.correct is True and str(fb).startswith("Right.")


def test_number_known_mistake_gets_its_own_message():
    ex = _number()
    fb = ex.check(384)
    assert fb.correct is False
    assert "too low" in str(fb) and "fused kernel's count" in str(fb)
    assert "multiply by 4" in str(ex.check(160))


def test_number_other_wrong_answers_say_which_side_and_how_far():
    ex = _number()
    high = str(ex.check(1280))
    assert "too high" in high and "factor of about 2" in high
    assert "too low" in str(ex.check(-3))


@pytest.mark.parametrize("answer", ["six hundred", True, [640], math.nan, math.inf])
def test_number_rejects_non_numbers_with_a_reason(answer):
    fb = _number().check(answer)
    assert fb.correct is False
    assert "must be" in str(fb)


def test_number_mistake_inside_the_tolerance_is_dropped():
    ex = Number("q", 100.0, rel=0.1, mistakes=[(105, "never shown")])
    assert ex.check(105).correct is True


def test_number_bad_construction_is_refused():
    with pytest.raises(ValueError, match="finite"):
        Number("q", math.nan)
    with pytest.raises(ValueError, match="tolerance"):
        Number("q", 0.5, rel=0)


def test_hints_in_order_then_the_solution():
    ex = _number()
    assert ex.hint().startswith("Hint 1 of 2: count reads")
    assert ex.hint().startswith("Hint 2 of 2: 5 transfers")
    assert "No more hints" in ex.hint()
    sol = ex.solution()
    assert "640 bytes" in sol and "5Th" in sol


def test_answer_is_hidden_in_the_question_and_collapsed_on_the_page():
    ex = _number()
    assert "640" not in repr(ex)
    page = ex._repr_html_()
    # the answer only inside a collapsed <details>
    before_answer, answer_part = page.split("<summary>Answer</summary>")
    assert "640" not in before_answer and "640" in answer_part
    assert page.count("<details>") == 3  # two hints and the answer


def test_choice_right_wrong_and_unknown():
    ex = Choice("Which roof binds?", {"a": "memory", "b": "compute"}, "a",
                why={"b": "SwiGLU is left of the ridge"}, explanation="intensity 0.42")
    assert ex.check(None).correct is None
    assert ex.check(" A ").correct is True
    assert ex.check("memory").correct is True
    wrong = ex.check("b")
    assert wrong.correct is False and "left of the ridge" in str(wrong)
    unknown = ex.check("c")
    assert unknown.correct is False and "'a', 'b'" in str(unknown)
    assert "a) memory" in ex.solution()


def test_choice_bad_construction_is_refused():
    with pytest.raises(ValueError, match="not one of the options"):
        Choice("q", {"a": "x", "b": "y"}, "c")
    with pytest.raises(ValueError, match="not options"):
        Choice("q", {"a": "x", "b": "y"}, "a", why={"z": "?"})


# -- kernels, in the simulator -------------------------------------------------------------

# module-level kernels: the simulator patches `cuda` in a kernel's globals, not in a
# closure, so a kernel defined inside a function would not find cuda.grid there
@cuda.jit
def good(g, u, o):
    i = cuda.grid(1)
    if i < o.size:
        o[i] = g[i] / (float32(1.0) + math.exp(-g[i])) * u[i]


@cuda.jit
def no_guard(g, u, o):
    i = cuda.grid(1)
    o[i] = g[i] / (float32(1.0) + math.exp(-g[i])) * u[i]


@cuda.jit
def wrong_sign(g, u, o):
    i = cuda.grid(1)
    if i < o.size:
        o[i] = g[i] / (float32(1.0) + math.exp(g[i])) * u[i]


@cuda.jit
def half(g, u, o):
    i = cuda.grid(1)
    if i < o.size // 2:
        o[i] = g[i] / (float32(1.0) + math.exp(-g[i])) * u[i]


def test_kernel_exercise_right_and_each_kind_of_wrong():
    ex = KernelExercise("Complete the fused kernel", n=300, block=128)
    assert ex.check(None).correct is None
    assert ex.check(good).correct is True
    fb = str(ex.check(no_guard))
    assert "indexed past the end of the arrays" in fb and "384 threads" in fb and "last 84" in fb
    fb = str(ex.check(wrong_sign))
    assert "300 of 300 elements are wrong" in fb and "expected silu(" in fb
    fb = str(ex.check(half))
    assert "150 of 300 elements were never written" in fb and "index 150" in fb
    assert "kernel itself" in str(ex.check(lambda g, u, o: None))


def test_kernel_exercise_needs_a_ragged_size():
    with pytest.raises(ValueError, match="multiple of block"):
        KernelExercise("q", n=256, block=128)


def test_placeholder_message_is_exported():
    assert "`answer`" in exercises.PLACEHOLDER
