"""SwiGLU on the packed [M, 2F] gate|up layout.

A fused gate+up projection (one GEMM against the concatenated weights [Wg | Wu]) writes a
single [M, 2F] tensor: row r holds the F gate values, then the F up values. The kernel
reads both halves of each row and writes an [M, F] output, with no copy to split them
(the akunu chapter of `book.sources` describes such a strided silu_gate kernel). Traffic is the same as the fused
kernel's: 2 * M * F loads and M * F stores.

``blockIdx.y`` walks rows (grid-stride for very tall inputs); ``blockIdx.x`` and the
threads walk columns in wide vectors, two per input per thread. A vector must not cross
the gate/up boundary and must stay aligned, so the wide kernels need F to be a multiple
of the vector width (4 for float32, 8 for halves); other F take the scalar kernel.
"""

from numba import cuda

from .fused import silu_mul
from ..host.launch import aligned, as_device, array_dtype, cdiv, flat, launch, sm_count
from .vectorized import silu_mul4, silu_mul8
from ..instructions.wide import load4, load_f32, load_half8, store4, store_f32, store_half8



def make_packed_kernel(load, store, width, apply):
    def kernel(gu, out, F):
        nvec = F // width
        bs = cuda.blockDim.x
        t = cuda.threadIdx.x
        tile = 2 * bs
        for row in range(cuda.blockIdx.y, out.size // F, cuda.gridDim.y):
            g_row = row * 2 * F  # gate half of the row
            u_row = g_row + F  # up half
            o_row = row * F
            for base in range(cuda.blockIdx.x * tile, nvec, cuda.gridDim.x * tile):
                c0 = (base + t) * width
                c1 = c0 + bs * width
                if base + tile <= nvec:
                    g0 = load(gu, g_row + c0)
                    u0 = load(gu, u_row + c0)
                    g1 = load(gu, g_row + c1)
                    u1 = load(gu, u_row + c1)
                    store(out, o_row + c0, apply(g0, u0))
                    store(out, o_row + c1, apply(g1, u1))
                else:
                    if base + t < nvec:
                        store(out, o_row + c0, apply(load(gu, g_row + c0), load(gu, u_row + c0)))
                    if base + bs + t < nvec:
                        store(out, o_row + c1, apply(load(gu, g_row + c1), load(gu, u_row + c1)))

    return cuda.jit(fastmath=True)(kernel)


@cuda.jit(fastmath=True)
def packed_scalar_kernel(gu, out, F):
    """Any F: one element per thread per step, grid-stride over columns and rows."""
    for row in range(cuda.blockIdx.y, out.size // F, cuda.gridDim.y):
        for c in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, F,
                       cuda.gridDim.x * cuda.blockDim.x):
            g = load_f32(gu, row * 2 * F + c)
            u = load_f32(gu, row * 2 * F + F + c)
            store_f32(out, row * F + c, silu_mul(g, u))


packed_vec4_kernel = make_packed_kernel(load4, store4, 4, silu_mul4)
packed_half8_kernel = make_packed_kernel(load_half8, store_half8, 8, silu_mul8)

MAX_GRID_Y = 65535


def swiglu_packed(gate_up, out=None, block=256, stream=0):
    """out[M, F] = silu(gate_up[:, :F]) * gate_up[:, F:] for a contiguous [M, 2F] input."""
    gu = as_device(gate_up, "gate_up")
    if gu.ndim != 2 or gu.shape[1] % 2:
        raise ValueError(f"gate_up must be 2-D [M, 2F] with an even last dimension, got {gu.shape}")
    M, F = gu.shape[0], gu.shape[1] // 2
    dt = array_dtype(gu)
    if out is None:
        if type(gate_up).__module__.startswith("torch"):
            import torch

            result = torch.empty((M, F), dtype=gate_up.dtype, device=gate_up.device)
        else:
            result = cuda.device_array((M, F), dtype=gu.dtype)
    else:
        result = out
    o = as_device(result, "out")
    if tuple(o.shape) != (M, F):
        raise ValueError(f"out must have shape {(M, F)} for gate_up {tuple(gu.shape)}, got {o.shape}")
    if o.dtype != gu.dtype:
        raise TypeError(f"out must have dtype {gu.dtype} like gate_up, got {o.dtype}")
    g1, o1 = flat(gu, "gate_up"), flat(o, "out")
    if M == 0 or F == 0:
        return result
    width = 4 if dt == "float32" else 8
    if F % width == 0 and aligned(g1, o1, to=16):
        kernel = packed_vec4_kernel if dt == "float32" else packed_half8_kernel
        nvec = F // width
        b = block
        while b > 32 and cdiv(nvec, 2 * b) * M < sm_count():  # small M: spread over SMs
            b //= 2
        grid = (cdiv(nvec, 2 * b), min(M, MAX_GRID_Y))
    else:
        kernel, b = packed_scalar_kernel, block
        grid = (cdiv(F, b), min(M, MAX_GRID_Y))
    launch(kernel, grid, b, stream, g1, o1, F)
    return result
