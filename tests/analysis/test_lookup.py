"""Finding a kernel by what a person types (``kbase.analysis.lookup``) and telling short names apart
(``kbase.analysis.names.display_names``)."""

from __future__ import annotations

import pytest

from kbase.analysis.lookup import AmbiguousKernel, KernelNotFound, find_kernel, matches
from kbase.analysis.names import display_names, short_id, template_args

DGRAD = "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, float const*)"
WGRAD = [f"void cudnn::detail::wgrad_alg0_engine<float, 128, {t}, 5, 3, 3, 3, false, 512>(int, float*)"
         for t in (5, 6, 7)]
FLASH = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64> >(flash::Flash_fwd_params)"
NAMES = [DGRAD, *WGRAD, FLASH, "Kernel", "kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"]


def test_exact_full_name_first():
    assert find_kernel(DGRAD, NAMES).name == DGRAD
    assert find_kernel("Kernel", NAMES).name == "Kernel"  # exact beats case-folded


@pytest.mark.parametrize("query", ["dgrad_engine", "dgrad", "DGRAD_ENGINE", "cudnn::detail::dgrad_engine",
                                   "detail::dgrad_engine", "/dgrad.*false/", short_id(DGRAD), "#" + short_id(DGRAD)[1:5],
                                   f"dgrad_engine {short_id(DGRAD)}"])
def test_ways_to_name_one_kernel(query):
    assert find_kernel(query, NAMES).name == DGRAD


def test_id_prefix_and_display_cell():
    cell = display_names(NAMES)[1]
    assert cell.endswith(short_id(WGRAD[0]))
    assert find_kernel(cell, NAMES).name == WGRAD[0]  # a table's cell, pasted back
    assert find_kernel("#" + short_id(WGRAD[1])[1:5], NAMES).name == WGRAD[1]


def test_ambiguous_lists_candidates_with_ids():
    with pytest.raises(AmbiguousKernel) as exc:
        find_kernel("wgrad_alg0_engine", NAMES)
    text = str(exc.value)
    assert "3 kernels match" in text
    for n in WGRAD:
        assert short_id(n) in text
    assert sorted(exc.value.candidates) == sorted(WGRAD)
    assert exc.value.code == 2


def test_not_found_suggests():
    with pytest.raises(KernelNotFound) as exc:
        find_kernel("flsh_fwd_kernel", NAMES)
    assert "did you mean: flash_fwd_kernel" in str(exc.value) and exc.value.code == 2
    with pytest.raises(KernelNotFound, match="no kernels stored"):
        find_kernel("x", [])


def test_bad_regex_is_one_error():
    from kbase.errors import InputError

    with pytest.raises(InputError, match="bad regular expression"):
        find_kernel("/[unclosed/", NAMES)
    assert matches("a[b", NAMES) == []  # regex characters without slashes: tried, and quietly no match


def test_display_names_tell_collisions_apart():
    shown = display_names(NAMES)
    assert shown[0] == "dgrad_engine"  # unique: plain short name
    assert len(set(shown[1:4])) == 3 and all("#" in s for s in shown[1:4])
    assert "<float, 128, 5, 5, 3, 3, 3, false, 512>" in shown[1]
    assert shown[5] != shown[6] and shown[5].endswith(short_id("Kernel"))  # Kernel vs kernel
    assert display_names(NAMES, full=True) == NAMES


def test_template_args():
    assert template_args(FLASH) == "<Flash_fwd_kernel_traits<128, 64>>"
    assert template_args("void a::b(int)") == ""
    assert template_args("void ns::f<4, ns::G<float> >(int, ns::H<2>)") == "<4, G<float>>"
