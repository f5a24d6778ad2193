"""Elementwise SwiGLU, one module per idea (the variants of ``book.kernels.VARIANTS``), and its
relatives. Each wrapper takes its host side from ``book.kernels.host.launch``.

- ``naive``: two kernels, silu then the product (five transfers an element).
- ``fused``: one kernel; fast math and the float64-literal pitfall.
- ``vectorized``: more bytes in flight: ILP and 8/16-byte accesses (``launch_vector``).
- ``halfprec``: float16 and bfloat16, float32 math inside.
- ``packed``: the [M, 2F] gate|up layout.
- ``coalescing``: strided and uncoalesced access (chapter 6).
- ``glu_family``: the same fusion for GeGLU, RMSNorm and quantization (chapter 11).
- ``norm_quant`` (issue 42): RMSNorm, or the residual add and RMSNorm, fused with the
  activations' per-token e4m3 quantization, one block a token (``NormQuantTile``; the staged
  kernel it replaced kept as the control); bit for bit its NumPy model
  ``rmsnorm_quant_reference`` (tests/library/test_norm_quant.py).
- ``decode``: CUDA graphs for one-token sizes (``GraphedSwiGLU``).
"""
