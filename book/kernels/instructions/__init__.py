"""Instructions, as intrinsics with their models and simulator versions: the layer where GPU or
simulator is decided (each module picks its inline PTX or its Python stand-in when imported,
after ``import book``). It imports no other layer of ``book.kernels``.

- ``wide``: loads and stores: 8- and 16-byte vectors, one element as float32, ``ld.global.cg``
  around L1 (``load_f32_cg``: the split-K meeting's) and float32 at a shared address (the FP8
  GEMM's scales).
- ``tensorcore``: inline-PTX ``mma.sync``, ``ldmatrix`` and ``cp.async`` (the predicated
  ``cp_async16_zfill_at`` of edge tiles too), ``shfl_xor``, their fragment tables and simulator
  versions; ``target_cc()``, ``cannot_run(dtype)``: the target, the T4 switch included;
  ``check_capability(cc, dtype)`` (the check of :mod:`book.capability`). Graded code may
  import it (autograder/sandbox/trusted.py).
- ``hopper``: Hopper's own instructions: ``wgmma`` with its shared-memory matrix descriptors,
  TMA loads, stores and multicast from host-made tensor maps, ``cp.async`` of a swizzled box
  completing on an ``mbarrier``, ``mbarrier``, fences, ``setmaxnreg``, clusters; each with a
  pure-Python model of what it computes and where it reads and writes (``swizzle``,
  ``descriptor``, ``operand_addresses``, ``d_coords``, ``wgmma_model``, ``tma_box``,
  ``MbarrierModel``).
- ``fp8`` (issue 42): e4m3 and e5m2 bit for bit (``encode_fast``: the same codes by a table),
  ``cvt.rn.satfinite`` pack and ``cvt.rn.f16x2`` widen with their NumPy models, FP8 ``wgmma``
  m64nNk32 built by ``hopper.make_wgmma`` (tests/library/test_fp8.py).
- ``fma``: ``fma32``, float32 ``a * b + c`` rounded once (``fma.rn.f32``; the simulator's own
  ``cuda.fma`` rounds twice, so there it is the model), ``fma32_model``, its NumPy model, and
  ``max_nan32`` (``max.NaN.f32``): ``norm_quant``'s sums and amax bit for bit.
"""
