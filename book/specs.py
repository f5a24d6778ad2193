"""Peak memory bandwidth and compute of common GPUs, each with its source.

All compute figures are *dense* (NVIDIA datasheets often print tensor-core
figures "with sparsity", twice the dense rate; those are halved here).
``fp32`` is the non-tensor (CUDA core) rate; ``fp16_tensor``, ``bf16_tensor``
and ``tf32_tensor`` are tensor-core rates (FP32 accumulate where the datasheet
distinguishes); None where the GPU has no such unit. Units: bytes/s and flop/s.

Theoretical figures, not achievable ones: measured elementwise kernels reach
80-90% of the bandwidth (see book/data for this course's measurements).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["GPUSpec", "GPU_SPECS", "match", "get", "slug", "key_of"]

T = 1e12
GB = 1e9


@dataclass(frozen=True)
class GPUSpec:
    name: str
    memory_bandwidth: float  # bytes/s
    fp32: float  # flop/s, CUDA cores (non-tensor)
    fp16_tensor: float | None  # dense flop/s
    bf16_tensor: float | None
    tf32_tensor: float | None
    memory_gb: float
    source: str  # vendor datasheet / spec page URL
    note: str = ""

    def peak(self, precision: str) -> float:
        """Peak flop/s for 'fp32', 'tf32', 'fp16' or 'bf16' (also 'float32', 'float16', 'bfloat16')."""
        key = _PRECISION_ALIASES.get(str(precision).lower())
        if key is None:
            raise ValueError(
                f"unknown precision {precision!r}: use one of fp32, tf32, fp16, bf16")
        value = getattr(self, key)
        if value is None:
            raise ValueError(f"{self.name} has no {key.replace('_', ' ')} peak (no such unit)")
        return value


_PRECISION_ALIASES = {
    "fp32": "fp32", "float32": "fp32", "f32": "fp32",
    "tf32": "tf32_tensor", "tf32_tensor": "tf32_tensor",
    "fp16": "fp16_tensor", "float16": "fp16_tensor", "f16": "fp16_tensor", "half": "fp16_tensor",
    "fp16_tensor": "fp16_tensor",
    "bf16": "bf16_tensor", "bfloat16": "bf16_tensor", "bf16_tensor": "bf16_tensor",
}

_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
_A100 = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
         "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_ADA = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_GA102 = ("https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-"
          "whitepaper-v2.pdf")

GPU_SPECS: dict[str, GPUSpec] = {
    "H100-SXM": GPUSpec(
        "NVIDIA H100 SXM5 80GB (HBM3)", 3.35e12, 67 * T, 989.5 * T, 989.5 * T, 494.5 * T, 80,
        _H100, "datasheet lists 1,979 TFLOPS FP16/BF16 and 989 TF32 with sparsity"),
    "H100-PCIe": GPUSpec(
        "NVIDIA H100 PCIe 80GB (HBM2e)", 2.0e12, 51 * T, 756.5 * T, 756.5 * T, 378 * T, 80,
        _H100, "datasheet lists 1,513 TFLOPS FP16/BF16 and 756 TF32 with sparsity"),
    "H100-NVL": GPUSpec(
        "NVIDIA H100 NVL 94GB (HBM3)", 3.9e12, 60 * T, 835.5 * T, 835.5 * T, 417.5 * T, 94,
        _H100, "datasheet lists 1,671 TFLOPS FP16/BF16 and 835 TF32 with sparsity"),
    "H200": GPUSpec(
        "NVIDIA H200 SXM 141GB (HBM3e)", 4.8e12, 67 * T, 989.5 * T, 989.5 * T, 494.5 * T, 141,
        "https://www.nvidia.com/en-us/data-center/h200/",
        "same compute as H100 SXM; more and faster memory"),
    "A100-40GB": GPUSpec(
        "NVIDIA A100 40GB (HBM2)", 1555 * GB, 19.5 * T, 312 * T, 312 * T, 156 * T, 40, _A100,
        "SXM and PCIe 40GB share 1,555 GB/s"),
    "A100-80GB": GPUSpec(
        "NVIDIA A100 SXM 80GB (HBM2e)", 2039 * GB, 19.5 * T, 312 * T, 312 * T, 156 * T, 80, _A100,
        "the PCIe 80GB card has 1,935 GB/s"),
    "L40S": GPUSpec(
        "NVIDIA L40S 48GB (GDDR6)", 864 * GB, 91.6 * T, 362.05 * T, 362.05 * T, 183 * T, 48,
        "https://www.nvidia.com/en-us/data-center/l40s/",
        "datasheet lists 733 TFLOPS FP16/BF16 and 366 TF32 with sparsity"),
    "L4": GPUSpec(
        "NVIDIA L4 24GB (GDDR6)", 300 * GB, 30.3 * T, 121 * T, 121 * T, 60 * T, 24,
        "https://www.nvidia.com/en-us/data-center/l4/",
        "datasheet lists 242 TFLOPS FP16/BF16 and 120 TF32 with sparsity"),
    "A10": GPUSpec(
        "NVIDIA A10 24GB (GDDR6)", 600 * GB, 31.2 * T, 125 * T, 125 * T, 62.5 * T, 24,
        "https://www.nvidia.com/en-us/data-center/products/a10-gpu/"),
    "A10G": GPUSpec(
        "NVIDIA A10G 24GB (GDDR6, AWS G5)", 600 * GB, 31.52 * T, 70 * T, 70 * T, 35 * T, 24,
        "https://aws.amazon.com/ec2/instance-types/g5/",
        "AWS-only variant of the A10 with no NVIDIA datasheet; memory from AWS, tensor "
        "rates as compared in https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/"),
    "T4": GPUSpec(
        "NVIDIA T4 16GB (GDDR6)", 320 * GB, 8.1 * T, 65 * T, None, None, 16,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
        "t4-tensor-core-datasheet-951643.pdf",
        "Turing: FP16 tensor cores (65 TFLOPS mixed precision), no BF16 or TF32"),
    "V100": GPUSpec(
        "NVIDIA V100 SXM2 (HBM2)", 900 * GB, 15.7 * T, 125 * T, None, None, 32,
        "https://images.nvidia.com/content/technologies/volta/pdf/"
        "volta-v100-datasheet-update-us-1165301-r5.pdf",
        "Volta: FP16 tensor cores only; the PCIe card: 14 TFLOPS FP32, 112 tensor"),
    "P100": GPUSpec(
        "NVIDIA P100 PCIe 16GB (HBM2)", 732 * GB, 9.3 * T, None, None, None, 16,
        "https://images.nvidia.com/content/tesla/pdf/nvidia-tesla-p100-PCIe-datasheet.pdf",
        "Pascal (Kaggle): no tensor cores; 18.7 TFLOPS FP16 on CUDA cores"),
    "RTX-4090": GPUSpec(
        "NVIDIA GeForce RTX 4090 24GB (GDDR6X)", 1008 * GB, 82.6 * T, 165.2 * T, 165.2 * T,
        82.6 * T, 24, _ADA,
        "tensor figures with FP32 accumulate (FP16 accumulate is twice as fast on GeForce)"),
    "RTX-3090": GPUSpec(
        "NVIDIA GeForce RTX 3090 24GB (GDDR6X)", 936 * GB, 35.6 * T, 71 * T, 71 * T, 35.6 * T,
        24, _GA102, "tensor figures with FP32 accumulate"),
}

# Device names as the driver reports them -> table keys. Order matters: the
# first pattern that matches wins (e.g. "H100 PCIe" before plain "H100").
_PATTERNS = [
    (r"H200", "H200"),
    (r"H100.*PCIE", "H100-PCIe"),
    (r"H100.*NVL", "H100-NVL"),
    (r"H100", "H100-SXM"),
    (r"A100.*80\s*GB", "A100-80GB"),
    (r"A100", "A100-40GB"),
    (r"L40S", "L40S"),
    (r"\bL4\b", "L4"),
    (r"A10G", "A10G"),
    (r"\bA10\b", "A10"),
    (r"\bT4\b", "T4"),
    (r"V100", "V100"),
    (r"P100", "P100"),
    (r"RTX 4090", "RTX-4090"),
    (r"RTX 3090", "RTX-3090"),
]


def key_of(device_name: str | None) -> str | None:
    """The table key ("H100-SXM") of a driver-reported device name, or None."""
    if not device_name:
        return None
    for pattern, key in _PATTERNS:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return key
    return None


def match(device_name: str) -> GPUSpec | None:
    """The table entry for a driver-reported device name, or None.

    >>> match("NVIDIA H100 80GB HBM3").name
    'NVIDIA H100 SXM5 80GB (HBM3)'
    """
    key = key_of(device_name)
    return None if key is None else GPU_SPECS[key]


# A table key's variant suffix: the form factor or memory size, which a record's name drops
# (an H100 PCIe's results would go beside the SXM's in h100.json, with the GPU in provenance)
_VARIANT = re.compile(r"-(SXM|PCIe|NVL|\d+GB)$")


def slug(device_name: str | None) -> str:
    """The name of a GPU's records: 'NVIDIA H100 80GB HBM3' -> 'h100'.

    ``book/data/<slug>.json`` (``python -m book.bench``), ``records/chapters/<slug>/``
    (``tools.record``) and ``records/tests/gpu_<slug>.json`` (``tools.gpu_tests``) are named
    by it. A GPU of the table is named by its family (the key without its variant: H100 SXM,
    PCIe and NVL are all "h100"); another by its model number ("NVIDIA B200" -> "b200"), else
    by its whole name made file-safe; no name at all gives "unknown-gpu".
    """
    if not device_name:
        return "unknown-gpu"
    key = key_of(device_name)
    if key is not None:
        return _VARIANT.sub("", key).replace("-", "").lower()
    m = re.search(r"\b([A-Z]{1,3}\d{1,4}[A-Z]?)\b", device_name.replace("NVIDIA", ""))
    if m:
        return m.group(1).lower()
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown-gpu"


def get(key_or_name: str | GPUSpec) -> GPUSpec:
    """A GPUSpec from a table key ("H100-SXM"), a device name, or a GPUSpec."""
    if isinstance(key_or_name, GPUSpec):
        return key_or_name
    if key_or_name in GPU_SPECS:
        return GPU_SPECS[key_or_name]
    spec = match(key_or_name)
    if spec is None:
        raise KeyError(f"no GPU named {key_or_name!r}: use one of {sorted(GPU_SPECS)}")
    return spec
