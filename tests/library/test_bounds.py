"""book.bounds: the simulator's message for an out-of-bounds store, here and (as on a GPU) from
a simulator subprocess; chapter 4 prints it on every machine."""

import numpy as np
import pytest

from book import bounds  # `import book` first: it decides GPU or simulator


def _arrays(n=20):
    return np.zeros(n, np.int32), np.zeros(n, np.int32)


def test_the_simulator_names_a_spare_thread_of_the_last_block():
    said = bounds.in_simulator(bounds.where_am_i_unguarded, 3, 8, *_arrays())
    assert said.error.startswith("IndexError:") and "out of bounds" in said.error
    assert said.block == 2 and 4 <= said.thread <= 7  # threads 20..23 are the spare ones
    assert 20 <= said.index <= 23
    assert said.explain(20).startswith(f"-> thread {said.thread} of block 2: global index 2 x 8 + "
                                       f"{said.thread} = {said.index}, past the last element (19)")


def test_a_launch_that_fits_says_so():
    said = bounds.in_simulator(bounds.where_am_i_unguarded, 3, 8, *_arrays(24))
    assert said.error is None and said.index is None
    assert "without an out-of-bounds access" in said.explain(24)


def test_the_subprocess_path_used_on_a_gpu_gives_the_same_message():
    # what in_simulator runs when the course is on a GPU: a fresh process with BOOK_SIMULATOR=1
    error = bounds._in_subprocess(bounds.where_am_i_unguarded, 3, 8, list(_arrays()), 120)
    assert error.startswith("IndexError: tid=[") and "ctaid=[2" in error


def test_a_kernel_a_subprocess_cannot_import_is_refused_with_the_fix():
    from numba import cuda

    @cuda.jit
    def local(a):
        a[cuda.grid(1)] = 1

    with pytest.raises(ValueError, match="module-level kernel"):
        bounds._in_subprocess(local, 1, 4, [np.zeros(4, np.int32)], 60)
