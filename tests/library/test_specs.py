import math

import pytest

import book  # noqa: F401
from book import specs


def test_every_entry_is_sane_and_sourced():
    assert {"T4", "L4", "A10G", "A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200",
            "V100", "RTX-4090", "L40S"} <= set(specs.GPU_SPECS)
    for key, s in specs.GPU_SPECS.items():
        assert s.source.startswith("https://"), key
        assert 1e11 < s.memory_bandwidth < 1e13, key  # 100 GB/s .. 10 TB/s
        assert 1e12 < s.fp32 < 2e14, key
        assert s.memory_gb > 0, key
        for t in (s.fp16_tensor, s.bf16_tensor, s.tf32_tensor):
            assert t is None or t > s.fp32 or math.isclose(t, s.fp32), key
        if s.tf32_tensor is not None:  # TF32 runs at half the FP16 tensor rate
            assert s.tf32_tensor == pytest.approx(s.fp16_tensor / 2, rel=0.02), key


def test_h100_figures():
    h = specs.GPU_SPECS["H100-SXM"]
    assert h.memory_bandwidth == 3.35e12
    assert h.bf16_tensor == pytest.approx(989.5e12)


@pytest.mark.parametrize("name,key", [
    ("NVIDIA H100 80GB HBM3", "H100-SXM"),
    ("NVIDIA H100 PCIe", "H100-PCIe"),
    ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA H200", "H200"),
    ("Tesla T4", "T4"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("NVIDIA A100 80GB PCIe", "A100-80GB"),
    ("Tesla V100-SXM2-16GB", "V100"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"),
])
def test_match(name, key):
    assert specs.match(name) is specs.GPU_SPECS[key]


def test_match_unknown_and_get():
    assert specs.match("NVIDIA GeForce GT 710") is None
    assert specs.match("") is None
    assert specs.get("H100-SXM") is specs.GPU_SPECS["H100-SXM"]
    assert specs.get("Tesla T4") is specs.GPU_SPECS["T4"]
    with pytest.raises(KeyError, match="use one of"):
        specs.get("GT 710")


def test_peak_names_and_missing_units():
    h = specs.GPU_SPECS["H100-SXM"]
    assert h.peak("bfloat16") == h.peak("bf16") == h.bf16_tensor
    assert h.peak("float32") == h.fp32
    with pytest.raises(ValueError, match="no bf16 tensor peak"):
        specs.GPU_SPECS["T4"].peak("bf16")
    with pytest.raises(ValueError, match="unknown precision"):
        h.peak("int8")


@pytest.mark.parametrize("name, slug", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100"), ("NVIDIA H200", "h200"),
    ("Tesla T4", "t4"), ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA A100-SXM4-40GB", "a100"),
    ("NVIDIA L4", "l4"), ("NVIDIA L40S", "l40s"), ("NVIDIA GeForce RTX 4090", "rtx4090"),
    ("NVIDIA B200", "b200"), ("Some New GPU 9000", "some-new-gpu-9000"), (None, "unknown-gpu"),
    ("", "unknown-gpu")])
def test_slug_names_every_record_of_a_gpu(name, slug):
    """One name per GPU for book/data/<slug>.json, records/chapters/<slug>/ and
    records/tests/gpu_<slug>.json: a table GPU by its family, another by its model number."""
    assert specs.slug(name) == slug
