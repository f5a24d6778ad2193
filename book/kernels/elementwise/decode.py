"""The decode regime: when launching costs more than the kernel.

At decode (one token: gate and up are 1 x 18944) a SwiGLU moves 3 x 18944 x 4 B = 227 KB
in float32, well under a microsecond of HBM time, and the kernel's duration is set by
launch and memory latency rather than bandwidth. A Numba launch from Python costs far
more host time than that (argument checks, type dispatch, the driver call), so
back-to-back launches are host-bound: the GPU idles between kernels. The benchmark
records both (rows ``fused_kernel_raw_launch`` and ``*_graph`` in book/data/h100.json).

The fix used by serving stacks: record the launches once into a CUDA graph and replay the
graph. A replay submits all recorded kernels with one driver call. Numba can launch onto
any stream (``cuda.external_stream``), so its kernels can be captured by
``torch.cuda.graph`` like torch's own.
"""

from numba import cuda

from ..host.launch import as_device


class GraphedSwiGLU:
    """``repeat`` launches of ``fn(gate, up, out, stream=...)`` captured in one CUDA graph.

    ``fn`` is any wrapper of this package (``swiglu_vec4``, ``swiglu_half8``...). Inputs are
    torch CUDA tensors or Numba device arrays; they are converted to Numba arrays before
    capture (a conversion may synchronize, which a capturing stream forbids). ``replay()``
    enqueues the whole graph on torch's current stream. ``repeat > 1`` stands for the many
    kernels of a real decode step graph and lets timing divide one replay by ``repeat``.
    """

    def __init__(self, fn, gate, up, out, repeat=1):
        import torch

        if repeat < 1:
            raise ValueError("repeat must be at least 1")
        self.fn, self.repeat = fn, repeat
        self._keep = (gate, up, out)  # the graph holds raw pointers: keep the buffers alive
        g, u, o = (self._numba(x, n) for x, n in ((gate, "gate"), (up, "up"), (out, "out")))
        self.args = (g, u, o)
        fn(g, u, o)  # compile and load the kernel outside the capture
        cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        capture = torch.cuda.Stream()
        capture.wait_stream(torch.cuda.current_stream())
        with torch.cuda.graph(self.graph, stream=capture):
            ns = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
            for _ in range(repeat):
                fn(g, u, o, stream=ns)
        torch.cuda.current_stream().wait_stream(capture)

    @staticmethod
    def _numba(x, name):
        if type(x).__module__.startswith("torch"):
            import torch

            if x.dtype == torch.bfloat16:
                x = x.view(torch.int16)
            return cuda.as_cuda_array(x.detach(), sync=False)
        return as_device(x, name)

    def replay(self):
        self.graph.replay()
