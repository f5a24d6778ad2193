"""book.answers, the one answer checker: the tolerance test, an output array's message, a
number's, and how far a number is, as the chapters' exercises and the labs both say them
(the labs' side, on the same arrays: tests/grader/test_answer_words.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from book.answers import (compare_array, compare_number, factor_apart, how_far, prefix_apart,
                          within)

TOL = {"rtol": 1e-5, "atol": 1e-6}


def test_within_is_the_tolerance_and_holds_nan_and_infinity_apart():
    expected = np.array([1.0, 1.0, np.inf, np.inf, -np.inf, np.nan, 0.0])
    got = np.array([1.0 + 5e-6, 1.1, np.inf, 5.0, np.inf, np.nan, 1e-7])
    # an infinite reference takes only itself (its tolerance would be infinite); a NaN,
    # the poison an output starts as, matches nothing, not even a NaN reference
    assert within(got, expected, **TOL).tolist() == [True, False, True, False, False, False,
                                                     True]
    assert within(2.0, 2.0 * (1 + 1e-7), rtol=1e-6, atol=0.0)        # numbers too
    assert not within(math.nan, math.nan, rtol=1, atol=1)


def test_an_array_names_shape_dtype_and_the_first_bad_index():
    expected = np.arange(1, 11, dtype=np.float64).reshape(2, 5)
    ok, said = compare_array(expected.astype(np.float32), expected, dtype_name="float32", **TOL)
    assert ok and said == "`out` correct (rtol=1e-05, atol=1e-06)"
    ok, said = compare_array(np.zeros((5, 2), np.float32), expected, dtype_name="float32",
                             shape_hint="x [2, 10]", **TOL)
    assert not ok and said == "`out` has shape (5, 2), expected (2, 5) for x [2, 10]"
    ok, said = compare_array(expected, expected, dtype_name="float32", **TOL)
    assert not ok and "dtype float64, expected float32" in said
    got = expected.astype(np.float32)
    got[0, 3] += 1
    ok, said = compare_array(got, expected, dtype_name="float32", **TOL)
    assert said == ("`out` wrong: 1 of 10 elements off; first bad index (0, 3): expected 4, "
                    "got 5 (tolerance |got-expected| <= 1e-06 + 1e-05*|expected|)")


def test_elements_never_written_are_counted_and_where_they_start_is_said():
    expected = np.arange(1, 11, dtype=np.float64)
    got = expected.astype(np.float32)
    got[6:] = np.nan
    said = compare_array(got, expected, dtype_name="float32", **TOL)[1]
    assert "4 of 10 elements off, 4 never written (the NaN poison put there before the call" in said
    assert "the first at" not in said and "first bad index (6,)" in said   # said once
    got[1] = 0                                         # a wrong value before the gap
    said = compare_array(got, expected, dtype_name="float32", **TOL)[1]
    assert "4 never written, the first at index (6,)" in said and "first bad index (1,)" in said
    said = compare_array(np.full(10, np.nan, np.float32), expected, dtype_name="float32", **TOL)[1]
    assert "nothing was written at all in this call: no store reached `out`" in said


def test_a_number_is_told_the_expected_value_and_how_far():
    assert compare_number(2.88e6 * (1 + 1e-7), 2.88e6, what="b") == (True, "b: correct")
    assert compare_number(23.04e6, 2.88e6, what="b") == (
        False, "b: expected 2.88e+06, got 2.304e+07: too high, by a factor of 8 (a whole "
               "factor: check the units and the bytes per element)")
    # too low by a whole factor is said as such too (it once said nothing below the truth)
    assert "too low, by a factor of 4 (a whole factor" in compare_number(0.72e6, 2.88e6)[1]
    assert compare_number(2.88e9, 2.88e6)[1].endswith(
        "too high, by a factor of 1,000 (a decimal prefix (k, M, G) away: check the units)")
    assert compare_number(2.95e6, 2.88e6)[1].endswith(": 2.4% too high")
    assert compare_number(-1.0, 2.88e6)[1].endswith("too low (check the sign and the units)")
    assert compare_number(True, 1.0)[1] == "answer: expected a number, got bool True"
    assert compare_number(math.inf, 1.0)[1] == "answer: expected 1, got inf"
    assert compare_number(" Memory", "memory")[0] and not compare_number("compute", "memory")[0]


@pytest.mark.parametrize("got, expected, said", [
    (250, 256, "2.3% too low"),
    (1e9 + 3, 1e9, "3 too high"),                   # under 0.1%: the difference itself
    (512, 256, "too high, by a factor of 2"),       # a whole factor, exactly
    (600, 256, "too high, by a factor of about 2.3"),
    (256, 262144, "too low, by a factor of 1,024"),   # in full: not "1,000"
    (1, 2 ** 30, "too low, by a factor of 10^9"),
    (0, 256, "too low (check the sign and the units)"),
])
def test_how_far(got, expected, said):
    assert how_far(got, expected) == said


def test_a_unit_prefix_is_told_from_a_wrong_count():
    assert prefix_apart(factor_apart(256_000, 256)) == "a decimal prefix (k, M, G)"
    assert prefix_apart(factor_apart(256 * 1024 ** 2, 256)) == "a binary prefix (Ki, Mi, Gi)"
    assert prefix_apart(factor_apart(256 * 8, 256)) == "" and prefix_apart(None) == ""
