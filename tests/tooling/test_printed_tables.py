"""tools/sphinx_course.py's reading of a cell's printed output: which lines are a table (kept
whole on a phone, scrolling in their block) and which are prose (wrapping)."""

from tools.sphinx_course import table_runs


def test_column_aligned_lines_are_a_table_and_sentences_are_not():
    text = ("benchmark: fused at 75% of torch.add's bandwidth\n"
            "\n"
            "case                  read GB  write GB\n"
            "fused (1 kernel)        0.940     0.460\n"
            "stride 32              18.789     3.758\n"
            "minimum: 1.409 GB (gate and up read once, out written once)")
    runs = table_runs(text)
    assert [t for t, _ in runs] == [False, True, False]
    assert runs[1][1].splitlines()[0].startswith("case")
    assert runs[2][1] == "minimum: 1.409 GB (gate and up read once, out written once)"


def test_one_line_with_a_gap_or_an_indented_command_is_prose():
    assert table_runs("largest float16: 65504;  exp(x) overflows") == [
        (False, "largest float16: 65504;  exp(x) overflows")]
    text = "benchmarks: H100, 2026-11-22\n    python -m book.bench --tune --out h100.json"
    assert [t for t, _ in table_runs(text)] == [False]
