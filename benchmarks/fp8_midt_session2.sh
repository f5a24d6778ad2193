#!/bin/bash
# Issue 42's fourth H200 session (one device call): the dual GEMM's narrow tiles at T = 384, 512,
# 768 with and without their cluster, multicast, a wgmma group in flight and a wider L2 group;
# the FP8 decode rows again (their CUDA-graph times now read); lab 6's master on this GPU
# (issue 43: what it reaches).   COURSE_COMMIT=<sha> bash benchmarks/fp8_midt_session2.sh
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
T="--tile HopperTile() --tile HopperTile(cluster=1) --tile HopperTile(bn=64,stages=6)"
T="$T --tile HopperTile(bn=64,stages=6,cluster=1) --tile HopperTile(bn=64,stages=6,multicast=True)"
T="$T --tile HopperTile(bn=64,stages=6,inflight=1) --tile HopperTile(bn=64,stages=6,group=16)"
timeout 200 python3 benchmarks/hopper_bench.py --out $OUT/hopper_tiles2_$GPU_TAG.json \
  --tiles 384,512,768 --rounds 5 $T 2>&1 | grep -v Warning | tail -30
timeout 200 python3 benchmarks/fp8_decode_bench.py --out $OUT/fp8_decode_$GPU_TAG.json \
  2>&1 | grep -v Warning | tail -45
timeout 150 python3 benchmarks/lab6_master_probe.py --out $OUT/lab6_master_$GPU_TAG.json \
  2>&1 | grep -v Warning | tail -20
