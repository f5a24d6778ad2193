"""Probes and demos: kernels the GPU lane and the chapters run beside the models.

- ``fragments``: one-warp ``mma`` demos of which lane holds what; ``probe_tile``: where a
  student's one-tile mma took each element from, drawn by lane (lab 5).
- ``hopper_probes``: one-instruction kernels compared with ``hopper``'s models.
- ``fp8_probes``: the conversions run on the GPU beside their models, FP8 wgmma through
  ``hopper_probes.wgmma_once`` (tests/library/test_fp8_gpu.py).
- ``stream_probes``: the decode weights read with no math, by 16-byte loads, TMA boxes, the same
  boxes by ``cp.async`` and 1-D bulk copies: the ceilings the decode GEMVs work under
  (benchmarks/weight_stream.py).
"""
