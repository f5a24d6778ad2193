"""The GEMMs, their tiles and their schedules. (The layer is ``gemms``, not ``gemm``: that is
the old flat name of ``gemms/gemm.py``, which the chapters still import.)

- ``tile``: what every kernel's tile is (``TileShape``: ``problems``, ``validate``,
  ``shared_bytes``, ``describe``; every tile class of the course is one).
- ``gemm`` and ``dual_gemm``: the tiled float32 GEMM and epilogue fusion (chapter 7).
- ``mma_gemm``: the bf16 tensor-core GEMM and dual GEMM (SwiGLU, identity and gate|up
  epilogues, main-loop ceiling; ``prepare``: one launch worked out once); its tile in
  ``mma_tile``: ``MmaTile`` and ``MmaGeometry``, every size the kernel factory reads.
- ``wgmma_gemm``: the warp-specialized Hopper dual GEMM (TMA into an mbarrier ring, a producer
  warpgroup and two consumer warpgroups, clusters of two, TMA-stored epilogue; chapter 9); its
  geometry in ``wgmma_gemm_tile``: ``HopperTile``, ``ColumnSplit`` and the tiles' ``schedule``.
- ``waves``: wave quantization of that persistent dual GEMM and the tile the dispatcher gives
  it for T tokens.
- ``fp8_gemm``: the fused FP8 MLP-up on Hopper: x per token and the weights per output channel
  in e4m3, bf16 or e4m3 out; ``wgmma_gemm``'s tensor maps and launch; ``model``, the kernel in
  NumPy tile by tile (tests/library/test_fp8_gemm.py).
- ``splitk``: split-K met in the kernel (the last block to arrive adds the partials; its
  workspace; ``fragment_meeting``, the tensor-core GEMVs' warps' sum and that meeting).
- ``stream_k``: stream-K worked out on the host: which block reads which (row tile, k-block)
  steps, the seams' pieces and slots (``stream_k``, ``split``, ``walk``); ``guided``.
"""
