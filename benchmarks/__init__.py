"""The standing instruments: scripts that measure on a GPU and write the records they name.

A package, so that each script runs as a module from the repository's root, with no
``sys.path`` of its own (on the device machine the same, after ``source
benchmarks/device_env.sh`` in the tree's root)::

    python3 -m benchmarks.<name> --help

Each script's docstring says how it is run and, in its ``Record:`` line, what it writes (under
records/ or book/data/); importing one only defines (its work is under ``main()``), and one
script uses another as ``benchmarks.<name>``. The folder's rules: tests/tooling/test_benchmarks.py.
Until issue 44 the scripts put the repository on sys.path themselves and ran as ``python3
benchmarks/<name>.py``, as the runbooks under records/ (what a session ran) still call them.

The map: the suite's phases alone, decode_bench.py, tensorcore_bench.py, hopper_bench.py; FP8,
fp8_bench.py, fp8_decode_bench.py, norm_quant_bench.py; tuning, gemm_bench.py,
tensorcore_tune.py (its CONFIGS are the tiles tensorcore_bench.py and tensorcore_ncu.py name);
counters and traces, ncu_check.py, ncu_diagnose.py, tensorcore_ncu.py (and cuBLAS's
instructions), profile_decode.py, sass_dump.py, coalescing.py, weight_stream.py (those under
ncu find, run and read it through book/bench/ncu.py); the labs'
masters, lab_master_probe.py (--lab N), lesson_controls_probe.py; notes.py (no GPU); device_env.sh, the helper the device sessions
source (it puts this tree on PYTHONPATH; not a module).
"""
