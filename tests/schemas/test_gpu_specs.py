"""Datasheet matching: driver names find their entry, and variants are not confused."""

from __future__ import annotations

import pytest

from schemas import match_spec, pcie_peak_gbps


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("Tesla V100-SXM2-16GB", "Tesla V100 SXM2"),
        ("NVIDIA GeForce RTX 3090 Ti", "GeForce RTX 3090 Ti"),
        ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
        ("NVIDIA RTX A6000", "RTX A6000"),
    ],
)
def test_driver_names_match_their_datasheet(name: str, model: str) -> None:
    spec = match_spec(name)
    assert spec is not None and spec.model == model


def test_unknown_cards_have_no_spec() -> None:
    assert match_spec("NVIDIA H200 NVL") is None
    assert match_spec("Imaginary GPU 9000") is None


def test_peaks_by_dtype() -> None:
    spec = match_spec("NVIDIA H200")
    assert spec is not None
    assert (spec.peak_tflops("bf16"), spec.peak_tflops("fp8_e4m3"), spec.peak_tflops("fp32")) == (989, 1979, 67)


def test_pcie_peak_is_per_direction_after_encoding() -> None:
    assert pcie_peak_gbps(5, 16) == pytest.approx(63.0, rel=1e-3)
    assert pcie_peak_gbps(4, 16) == pytest.approx(31.5, rel=1e-3)
    assert pcie_peak_gbps(None, 16) is None
