"""The needles that guard the classifier's regular expressions (``kbase.analysis.guarded_regex``) never change an
answer: every guarded pattern is proven, from its parse tree, to hold a needle in each match; each guarded
search equals the plain search on real and generated names; and classifying every name with the guards equals
classifying it rule by rule with plain searches (the real exports and traces of ../shared/data when present)."""

from __future__ import annotations

import gzip
import json
import random
import re
import re._constants as sre  # the parse tree's opcodes: a test-only look at the regex parser
import re._parser as sre_parse
from pathlib import Path

import pytest

from kbase.analysis import classify
from kbase.analysis.guarded_regex import GuardedRegex

from helpers.shared import KINETO_DIR, NSYS_DIR, ro_connect

_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


def _holds_a_needle(tree: sre_parse.SubPattern, needles: tuple[str, ...], fold: bool) -> bool:
    """Whether every match of ``tree`` contains one of ``needles`` (lower-cased with ``fold``)."""
    return _items_hold(list(tree.data), "", needles, fold)


def _items_hold(items: list, run: str, needles: tuple[str, ...], fold: bool) -> bool:
    """Whether every match of the sequence ``items``, preceded by the literal text ``run``, contains a needle: a
    run of literal characters contains one, or a part that must match holds one (a group, a branch whose every
    alternative does, a repeat of at least one, a small class whose every character does), the literal text
    before it counted as its prefix. Anything else (zero-width items, other classes) breaks a run: conservative."""
    def run_holds(text: str) -> bool:
        return any(n in (text.lower() if fold else text) for n in needles)

    for at, (op, av) in enumerate(items):
        if op is sre.LITERAL:
            run += chr(av)
            continue
        if op is sre.IN and 0 < len(av) <= 4 and all(o is sre.LITERAL for o, _ in av):
            if all(_items_hold(items[at + 1:], run + chr(c), needles, fold) for _, c in av):
                return True
        if run_holds(run):
            return True
        if op is sre.SUBPATTERN and not av[1] and not av[2] and _items_hold(list(av[3].data), run, needles, fold):
            return True
        if op is sre.BRANCH and all(_items_hold(list(alt.data), run, needles, fold) for alt in av[1]):
            return True
        if op in _REPEATS and av[0] >= 1 and _items_hold(list(av[2].data), run, needles, fold):
            return True
        if op is sre.ATOMIC_GROUP and _items_hold(list(av.data), run, needles, fold):
            return True
        run = ""
    return run_holds(run)


def guarded_patterns() -> list[GuardedRegex]:
    """Every GuardedRegex of the classifier: module constants, the rule tables and the rules outside them."""
    found: dict[int, GuardedRegex] = {}

    def add(v: object) -> None:
        if isinstance(v, GuardedRegex):
            found[id(v)] = v
        elif isinstance(v, classify.TcRule):
            add(v.pattern)
        elif isinstance(v, (list, tuple)):
            for x in v:
                add(x)
        elif isinstance(v, dict):
            for x in v.values():
                add(x)

    for v in vars(classify).values():
        add(v)
    return list(found.values())


def test_every_needle_set_is_implied_by_its_pattern() -> None:
    patterns = guarded_patterns()
    assert len(patterns) >= 30
    guarded = [p for p in patterns if p.needles is not None]
    assert len(guarded) >= 27  # all but the rare ones (fp16 SGEMM rule, MMA tile, split-K word lists)
    for p in guarded:
        fold = bool(p.flags & re.IGNORECASE)
        assert _holds_a_needle(sre_parse.parse(p.pattern, p.flags), p.needles, fold), (p.pattern, p.needles)


def test_the_proof_rejects_a_needle_a_match_can_miss() -> None:
    """The prover is no rubber stamp: a needle of one alternative only, or of an optional part, is refused."""
    def proves(pattern: str, *needles: str) -> bool:
        return _holds_a_needle(sre_parse.parse(pattern), needles, False)

    assert proves(r"^(?:nccl|rccl)|all_?reduce", "ccl", "all")
    assert not proves(r"nccl|sendrecv", "nccl")
    assert not proves(r"x(?:abc)?y", "abc")
    assert not proves(r"x(?:abc)*y", "abc")
    assert proves(r"x(?:abc)+y", "abc")
    assert not proves(r"[hib]mma", "hmma")
    assert proves(r"[hib]mma", "hmma", "imma", "bmma")
    assert proves(r"f32|fp32", "f32", "fp32")  # the parser takes the common "f" out of the branch
    assert not proves(r"copy|memcpy", "copy")
    assert proves(r"(?<!sub)tensorop", "tensorop")
    assert not proves(r"tensor\dop", "tensor1op")


def test_a_plain_word_alternation_gets_its_words_as_needles() -> None:
    assert classify._r(r"^gemv|^gemmk1|^dot_kernel").needles == ("gemv", "gemmk1", "dot_kernel")
    assert classify._r(r"offsets|_helper$").needles == ("offsets", "_helper")
    assert classify._r(r"xmma.*_ffma").needles is None  # not plain words: unguarded unless given
    assert classify._r(r"xmma.*_ffma", "_ffma").needles == ("_ffma",)


def test_ignorecase_needles_guard_ascii_text_only() -> None:
    """``ſ`` and the Kelvin sign fold to ``s`` and ``k`` under re.IGNORECASE: a non-ASCII text skips the guard."""
    tma = GuardedRegex(r"TensorMap|tma_desc", ("tensormap", "tma_desc"), re.IGNORECASE)
    assert tma.search("void f(CUTENSORMAP m)")
    assert tma.search("void f(Tenſormap m)")  # U+017F: no "tensormap" in its lower case, yet a match
    assert tma.search("void f(Tensor m)") is None
    assert GuardedRegex("kernel", ("kernel",), re.IGNORECASE).search("\u212aernel")  # U+212A Kelvin sign
    with pytest.raises(AssertionError):
        GuardedRegex("abc", ("ABC",), re.IGNORECASE)
    with pytest.raises(AssertionError):
        GuardedRegex("abc", ("",))


def _shared_names() -> list[str]:
    out: set[str] = set()
    for path in sorted(NSYS_DIR.glob("*.sqlite")) if NSYS_DIR.is_dir() else []:
        conn = ro_connect(path)
        try:
            out.update(v for (v,) in conn.execute("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                                  "JOIN StringIds s ON s.id = k.demangledName"))
        finally:
            conn.close()
    for path in sorted(KINETO_DIR.glob("*.json*")) if KINETO_DIR.is_dir() else []:
        raw = path.read_bytes()
        doc = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        out.update(e["name"] for e in events if str(e.get("cat", "")).lower() == "kernel")
    return sorted(out)


def _names() -> list[str]:
    """The labelled corpus, the synthetic mixes, the shared data's names when present, and variants of each
    that a guard could get wrong: case shuffled, ``ſ``/Kelvin look-alikes, truncated, spliced, bracket soup."""
    from kbase.synth.names import default_kernel_mix, scaled_kernel_mix

    corpus = (Path(__file__).resolve().parents[1] / "data" / "kernel_names.jsonl").read_text(encoding="utf-8")
    base = sorted({json.loads(line)["name"] for line in corpus.splitlines() if line.strip()} | {k.name for k in default_kernel_mix() + scaled_kernel_mix(400, 4000)}
                  | set(_shared_names()))
    rng = random.Random(11)
    out = list(base)
    for n in base:
        i = rng.randint(0, len(n))
        other = rng.choice(base)
        out += ["".join(c.upper() if rng.random() < 0.5 else c for c in n), n.replace("s", "ſ").replace("k", "\u212a"),
                n[:i], n[:i] + other[rng.randint(0, len(other)):]]
    alphabet = list("ab <>()[]{}:,_09x") + ["gemm", "TensorMap", "cutensor", "permute", "copy_kernel", "nvjet",
                                           "xmma", "_ffma", "hmma", "tensorop", "memcpy", "Kernel2<", "kentry<", "ſ", "é"]
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25))) for _ in range(3000)]
    return out


def test_guarded_search_equals_plain_search() -> None:
    texts = _names()
    texts += [t.lower() for t in texts]
    for p in guarded_patterns():
        plain = re.compile(p.pattern, p.flags)
        for t in texts:
            got, want = p.search(t), plain.search(t)
            assert (got and got.span()) == (want and want.span()), (p.pattern, t)


def _kinds(ns: list[str]) -> list[tuple]:
    classify._SEEN.clear()
    classify._FACTS.clear()
    classify._WRAPPED_FACTS.clear()
    out = [(k.short_name, k.family, k.category, k.tc) for k in classify.kinds_of(ns, {})]
    return [(*k, classify.classify(n).rule.why, classify.classify(n).own) for n, k in zip(ns, out)]


def test_classification_with_guards_equals_plain_rule_by_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    ns = _names()
    guarded = _kinds(ns)
    for p in guarded_patterns():
        monkeypatch.setattr(p, "needles", None)
    plain = _kinds(ns)
    monkeypatch.undo()
    _kinds([])  # no answer of the plain run stays remembered
    assert len(guarded) > 5_000
    assert guarded == plain
