#!/bin/bash
# The launch branch (issue 44: one plan-and-launch mechanism, book/kernels/plan.py) on one GPU
# (H100 or H200; carry .whl; COURSE_COMMIT=<sha>), under 300 s in all:
#   1  the gpu-marked tests of every test file the branch touched, JUnit XML to $OUT:
#      tests/library/test_plan.py: every entry point's plain (planned) call bit for bit against
#        its unplanned launch (a named stream: validated and launched on every call), three
#        calls (planned, then the plan replayed twice); each plain call captured in a CUDA
#        graph (planned before the capture) and replayed, bit for bit; the planned call's host
#        time, measured per entry point beside torch.matmul's (a loose bound; the targets are 2);
#        entry points: swiglu_decode at T = 1, 3, 16, 64, 300 (every path the dispatcher takes,
#        the wgmma dual GEMM at 64 and 300 on sm_90), swiglu_gemv, swiglu_gemv_tc, swiglu_mma,
#        matmul_mma, fastcall.fast vec4 / half8, and on sm_90 swiglu_wgmma, matmul_wgmma,
#        swiglu_fp8, swiglu_fp8_gemv;
#      of test_decode_mlp.py, test_hopper_gpu.py, test_fp8_gpu.py, test_fp8_gemv.py and
#        test_kernels.py the tests of the launch (-k): every decode path and its planned call,
#        graph replay, no small-grid warning, a plan reused (the planned call's cache and its
#        "fast" count), and launch_kernel's planned launch against Numba's on new arrays and on
#        a torch tensor whose storage changed.
#   2  python3 -m benchmarks.decode_bench --only 'host_': the host time of one call of every
#      plain entry point beside torch.matmul's and F.linear's (T = 1, bfloat16), printed with
#      the targets: each plain call <= 15 us and <= 1.0x torch.matmul's own on this host.
#   COURSE_COMMIT=<sha> bash records/tests/launch_gpu_session.sh
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
# (the Hopper files' other gpu tests, the conversions and models, are not the launch's: left out
# by -k to keep the session under 300 s)
timeout 215 python3 -m pytest tests/library/test_plan.py tests/library/test_fastcall.py \
  tests/library/test_decode_mlp.py tests/library/test_hopper_gpu.py tests/library/test_fp8_gpu.py \
  tests/library/test_fp8_gemv.py tests/library/test_kernels.py -m gpu \
  -k "plan or graph or warn or reuse or plain or prepared" -q -rf \
  -p no:cacheprovider --junitxml=$OUT/gpu_launch_$GPU_TAG.xml 2>&1 | grep -v Warning | tail -25
timeout 70 python3 -u -m benchmarks.decode_bench --out $OUT/decode_host_$GPU_TAG.json \
  --only 'host_' 2>&1 | grep -v Warning | tail -30
