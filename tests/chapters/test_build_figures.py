"""tools.recordings.with_build_figures: a recording that kept only text gets the build's figure
for the same cell, captioned, and never a figure from a cell the simulator could not measure."""

from nbformat.v4 import new_code_cell, new_notebook, new_output

from tools import recordings

PNG = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}


def nb_of(*cells):
    return new_notebook(cells=list(cells))


def cell(src, *outputs):
    c = new_code_cell(src)
    c.outputs = list(outputs)
    return c


def test_a_text_only_recorded_cell_gets_the_builds_figure_with_a_caption():
    recorded = nb_of(cell("plot(data)", new_output("stream", text="recorded on the GPU\n")))
    built = nb_of(cell("plot(data)", new_output("display_data", data=PNG)))
    assert recordings.with_build_figures(recorded, built) == 1
    outs = recorded.cells[0].outputs
    assert outs[0]["text"] == "recorded on the GPU\n"          # the GPU's text stays first
    assert outs[1]["data"]["image/png"] == PNG["image/png"]
    # a plain stream, so that myst-nb does not wrap it in a second captioned figure
    assert outs[2]["output_type"] == "stream" and outs[2]["text"] == recordings.BUILD_FIGURE_NOTE


def test_no_figure_from_a_simulator_run_that_measured_nothing():
    recorded = nb_of(cell("time_it()", new_output("stream", text="3.1 us\n")))
    built = nb_of(cell("time_it()", new_output("stream", text="Simulator: nothing to time\n"),
                       new_output("display_data", data=PNG)))
    assert recordings.with_build_figures(recorded, built) == 0
    assert len(recorded.cells[0].outputs) == 1


def test_a_recorded_figure_or_a_changed_cell_is_left_alone():
    has_fig = nb_of(cell("plot(data)", new_output("display_data", data=PNG)))
    built = nb_of(cell("plot(data)", new_output("display_data", data=PNG)))
    assert recordings.with_build_figures(has_fig, built) == 0
    changed = nb_of(cell("plot(other)", new_output("display_data", data=PNG)))
    text_only = nb_of(cell("plot(data)"))
    assert recordings.with_build_figures(text_only, changed) == 0



def test_rewrapping_a_line_or_editing_a_comment_keeps_a_recording_current():
    """A recording is stale when a cell's code changes, not when its lines are re-wrapped
    (80-column chapters) or a comment is edited: the key is the syntax tree."""
    before = new_code_cell('print(f"ratio: {a / b:.1f}x")  # old comment')
    wrapped = new_code_cell('print(f"ratio:"\n      f""" {a\n            / b:.1f}x""")')
    changed = new_code_cell('print(f"ratio: {b / a:.1f}x")')
    assert recordings.code_key(before) == recordings.code_key(wrapped)
    assert recordings.code_key(before) != recordings.code_key(changed)
    magic = new_code_cell("%timeit f()")            # not Python: compared as text
    assert recordings.code_key(magic) != recordings.code_key(new_code_cell("%timeit g()"))
