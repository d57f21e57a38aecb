"""The name walks that skip to the brackets and commas (``names._wrapped``, ``names.template_args``,
``classify._first_template_arg``, ``names._outside_brackets``) equal the plain character walks they replaced,
on real-looking wrapper names and on bracket soup."""

from __future__ import annotations

import random
import re

from kbase.analysis import classify, names


def wrapped_by_walk(name: str) -> str:
    """``names._wrapped`` as a walk over every character of the template arguments."""
    for _ in range(4):
        args = template_args_by_walk(name)
        if not args:
            return ""
        depth, start, first = 0, 1, ""
        for i, ch in enumerate(args):
            if ch in "<([":
                depth += 1
            elif ch in ">)]":
                depth -= 1
            if (ch == "," and depth == 1) or (depth == 0 and ch == ">"):
                part = args[start:i].strip()
                start = i + 1
                if part and not names._LITERAL.fullmatch(part):
                    first = part
                    break
        if not first:
            return ""
        inner = names._base_name(first)
        if names._PLAIN_TYPE.fullmatch(first) or names._PLAIN_TYPE.fullmatch(inner):
            return ""
        if inner.lower() not in names.WRAPPERS and not inner.startswith("enable_sm"):
            return inner
        name = first
    return ""


def template_args_by_walk(name: str) -> str:
    depth_paren = depth = 0
    start = end = -1
    for i, ch in enumerate(name):
        if ch == "(" and depth == 0:
            if depth_paren == 0 and end >= 0:
                break
            depth_paren += 1
        elif ch == ")" and depth == 0 and depth_paren:
            depth_paren -= 1
        elif depth_paren == 0 and ch == "<":
            if depth == 0:
                start = i
            depth += 1
        elif depth_paren == 0 and ch == ">" and depth:
            depth -= 1
            if depth == 0:
                end = i
    if start < 0 or end < start:
        return ""
    args = re.sub(r"\b[A-Za-z_]\w*::", "", name[start + 1:end])  # always, with or without a "::"
    args = re.sub(r"\s+", " ", args).replace(" >", ">").strip()
    return f"<{args}>"


def first_template_arg_by_walk(name: str, own: str) -> str:
    at = name.find(own)
    if at < 0:
        return name
    rest = name[at + len(own):]
    if name.startswith("_Z"):
        return re.sub(r"L[a-z]+\d+E", "", rest[1:] if rest.startswith("I") else rest)
    if not rest.startswith("<"):
        return rest
    depth = 0
    for i, ch in enumerate(rest):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth == 0:
                return rest[1:i].strip()
        elif ch == "," and depth == 1:
            head = rest[1:i].strip()
            if not head.isdigit() and not head.startswith("("):
                return head
            return first_template_arg_by_walk("<" + rest[i + 1:], "")
    return rest[1:]


def _names() -> list[str]:
    rng = random.Random(17)
    real = [
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x256_64x3_tn_align4>(T1::Params)",
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, float>>(T1::Params)",
        "void ck_tile::kentry<(int)2, ck_tile::FmhaFwdKernel<int>>(int)",
        "void cutlass::Kernel2<cutlass::enable_sm90_or_later<flash::FlashAttnFwdSm90<int>>>(int)",
        "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, float2, float2, (bool)0>(T13)",
        "void at::native::vectorized_elementwise_kernel<(int)8, at::native::FillFunctor<float>, "
        "std::array<char *, (unsigned long)1>>(int, T2, T3)",
        "void kernel<  4 ,\tns::Kernel2< x::y<1>,  (int)3 > >(int)",
    ]
    soup = list("ab <>()[]{}:,_0 ") + ["Kernel2<", "kentry<", "(int)2, ", "ns::", "enable_sm90<", "float, ", "\t"]
    return real + ["".join(rng.choice(soup) for _ in range(rng.randint(0, 30))) for _ in range(4000)]


def test_walks_over_brackets_equal_character_walks() -> None:
    for n in _names():
        assert names.template_args(n) == template_args_by_walk(n), n
        assert names._wrapped(n) == wrapped_by_walk(n), n
        for own in ("Kernel2", "kentry", "", "kernel"):
            assert classify._first_template_arg(n, own) == first_template_arg_by_walk(n, own), (n, own)


def test_outside_brackets_of_a_name_with_nothing_open_is_the_name() -> None:
    for n in ["nvjet_hsh_256x128", "a)b>c", "", "x]y}"]:
        assert names._outside_brackets(n) == n
        assert names._outside_brackets(n, "<([{", ">)]}") == n
    assert names._outside_brackets("a)b(c)d") == "a)bd"
    assert names._outside_brackets("x[y]z", "<([{", ">)]}") == "xz"
