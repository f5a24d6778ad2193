"""The MLP-up at decode: the GEMVs and the dispatcher by T over them.

- ``decode_mlp``: the MLP-up at decode in nn.Linear layout: the dispatcher by T over the GEMVs
  (``path_for``, ``prepare``, ``swiglu_decode``) with a large-T hook
  (tests/library/test_decode_mlp.py, cases in tests/library/decode_cases.py).
- ``cuda_core_gemv``: the CUDA-core GEMV (``GemvTile``), 16 bytes of a weight row a thread at a
  time, for the fewest tokens.
- ``mma_gemv``: the tensor-core GEMV (``MmaGemvTile``), ``mma.sync`` with the weights on the M
  side, straight to registers or through a ``cp.async`` ring.
- ``staged_gemv``: a measured control: the tensor-core GEMV with its weights staged through
  shared memory in whole-row chunks (``prepare("staged", ...)``, never the dispatcher's pick).
- ``wgmma_gemv``: the decode MLP-up on Hopper: the weights as ``wgmma``'s A operand copied by
  TMA into an mbarrier ring, stream-K over every SM, the seams met by a finisher warp
  (tests/library/test_wgmma_gemv.py); its geometry in ``wgmma_gemv_tile``: ``WgmmaGemvTile``
  (L2 hints, ``cpasync``, ``trace``, ``pdl`` and ``short_settle``, ``FIXES``) and
  ``gemv_tile``, the default for T.
- ``block_trace``: a traced GEMV's timeline: the events a traced block stamps, ``timeline``
  reading them back, ``traced_runs`` launching and reading (benchmarks/weight_stream.py).
- ``fp8_gemv``: the FP8 MLP-up at decode, T <= 32: ``wgmma_gemv``'s design with e4m3 weights and
  tokens, the scales in the epilogue, bf16 or e4m3 out (``swiglu_fp8_gemv``); its geometry in
  ``fp8_gemv_tile``: ``Fp8GemvTile``, ``gemv_tile``; its NumPy model, block by block, in
  ``fp8_gemv_model`` (tests/library/test_fp8_gemv.py).
"""
