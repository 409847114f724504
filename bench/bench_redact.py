"""Measure secret redaction on the test fixtures.

Run from the repository root: python bench/bench_redact.py [--quick]

Prints canary recall, the false-positive rate on ordinary text, throughput next to a trivial
regex pass over the same text (the peer: ``re.compile("x").sub``), and the entropy figures
behind ``ENTROPY_THRESHOLD``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable

from benchlib import ROOT
from benchlib.harness import Bench
from mplp_lsp.sanitize import redact as redaction

FIXTURES = ROOT / "tests" / "fixtures" / "redaction"
_ESCAPES = {"n": "\n", "\\": "\\"}


def load_canaries() -> list[tuple[str, str, str]]:
    canaries = []
    for line in (FIXTURES / "canaries.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            kind, secret, text = line.split("\t")
            text = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)
            canaries.append((kind, secret, text))
    return canaries


def load_ordinary() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted((FIXTURES / "ordinary").iterdir())]


def throughput(run: Callable[[], object], size: int, rounds: int, seconds: float) -> float:
    """Best of ``rounds``, each repeating ``run`` for at least ``seconds``; MB/s."""
    best = float("inf")
    for _ in range(rounds):
        calls = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            run()
            calls += 1
        best = min(best, elapsed / calls)
    return size / best / 1e6


def recall(canaries: list[tuple[str, str, str]]) -> None:
    removed = sum(secret not in redaction.redact(text) for _, secret, text in canaries)
    labelled = sum(f"[REDACTED:{kind}]" in redaction.redact(text) for kind, _, text in canaries)
    kinds = len({kind for kind, _, _ in canaries})
    print(f"canary recall:        {removed}/{len(canaries)} removed ({kinds} kinds)")
    print(f"canary kind correct:  {labelled}/{len(canaries)}")


def false_positives(files: list[str]) -> None:
    total = changed = 0
    for text in files:
        before, after = text.splitlines(), redaction.redact(text).splitlines()
        total += len(before)
        changed += sum(a != b for a, b in zip(before, after, strict=False))
        changed += abs(len(before) - len(after))
    print(f"false positives:      {changed}/{total} lines changed in ordinary text")


def speed(bench: Bench, files: list[str], args: argparse.Namespace) -> None:
    size = sum(len(text.encode("utf-8")) for text in files)
    lines = [line for text in files for line in text.splitlines()]
    peer = re.compile(r"x")
    timing = (size, args.rounds, args.seconds)
    ours = throughput(lambda: [redaction.redact(text) for text in files], *timing)
    base = throughput(lambda: [peer.sub("", text) for text in files], *timing)
    per_line = throughput(lambda: [redaction.redact(line) for line in lines], *timing)
    print(f"ordinary set:         {size / 1e3:.1f} kB in {len(files)} files, {len(lines)} lines")
    bench.figure("redact, per file", ours, "MB/s", peer=('re.compile("x").sub, same text', base))
    bench.figure("redact, per line (one call per line: fixed cost per call)", per_line, "MB/s")


def entropy_figures(canaries: list[tuple[str, str, str]], files: list[str]) -> None:
    ordinary = [
        value
        for text in files
        for pattern in redaction._ASSIGNMENTS
        for match in pattern.finditer(text.lower())
        for value in [
            text[match.start(g) : match.end(g)]
            for g in redaction._VALUE_GROUPS
            if match.group(g) is not None
        ]
    ]
    passing = [v for v in ordinary if not redaction._looks_like_words(v)]
    planted = [
        redaction._entropy(secret)
        for kind, secret, _ in canaries
        if kind in ("keyword_secret", "aws_secret_key")
    ]
    scores = [redaction._entropy(v) for v in ordinary]
    print(
        f"keyword values in ordinary text: {len(ordinary)}, entropy "
        f"{min(scores):.2f}..{max(scores):.2f} (median {statistics.median(scores):.2f}); "
        f"{len(passing)} not word-like: {passing}"
    )
    print(
        f"planted keyword/aws secrets: {len(planted)}, entropy {min(planted):.2f}..{max(planted):.2f};"
        f" threshold {redaction.ENTROPY_THRESHOLD}"
    )


def main() -> int:
    bench = Bench(__doc__)
    bench.size("--rounds", full=5, quick=1, help="timed rounds (the best is shown)")
    bench.size("--seconds", full=1.0, quick=0.01, help="least seconds of each round")
    with bench.run() as args:
        canaries, files = load_canaries(), load_ordinary()
        print(f"python {sys.version.split()[0]}")
        recall(canaries)
        false_positives(files)
        speed(bench, files, args)
        entropy_figures(canaries, files)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
