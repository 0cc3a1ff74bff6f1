"""Evaluation metrics for generated MWPs (paper Sec. 4 "Metrics", Table 3 novelty, supplementary Dist-3).

Language quality: BLEU-4, METEOR and ROUGE-L from pycocoevalcap (the package of Chen et al. 2015 the paper cites),
called directly after its PTB tokenizer. COCOEvalCap is deliberately not used: it also builds SPICE, which
downloads Stanford CoreNLP at run time and fails offline.

METEOR runs as one JVM subprocess (~12 s start, ~1.2 GB); :class:`TextScorer` starts it once, reuses it for any
number of batches and always kills it on exit, error or timeout. pycocoevalcap 1.2's ``Meteor`` takes a lock in
``compute_score`` and never releases it when the JVM dies mid-call, and its ``__del__`` acquires that same lock,
so a failed call would deadlock garbage collection; :meth:`TextScorer.close` therefore kills the process and
releases the lock itself.

Text sanitising (``sanitize_text``), and why:
- Line breaks of any kind (``\\n``, ``\\r``, U+0085, U+2028, ...) desynchronise both JVM protocols: the PTB
  tokenizer maps one input line to one output line (pycocoevalcap only replaces ``\\n``; a ``\\r`` silently
  shifts every later sentence onto the wrong id) and METEOR reads one command per line (a stray line makes it
  wait for input that never comes: a hang). All control/separator characters become spaces, format characters
  (zero-width, soft hyphen) are dropped, whitespace is collapsed.
- ``|||`` is METEOR's field separator; it is replaced by a space (in references too, which pycocoevalcap skips).
- Hypotheses are cut to ``MAX_HYPOTHESIS_CHARS`` = 2,000 characters at a token boundary: the longest reference
  problem in the three datasets is 803 characters (Math23K-en), so only degenerate generations are touched, and
  METEOR/ROUGE-L (quadratic LCS in pure Python) stay bounded.
- Empty hypotheses (empty input, or only punctuation, which the PTB step removes) are scored as ``""``. Checked
  against pycocoevalcap 1.2: BLEU counts 0 matches and length 0, METEOR returns 0.0, ROUGE-L returns 0.0 against a
  non-empty reference; none crashes or hangs, so no placeholder token (which could match a reference) is used.
  Empty references are rejected (``ValueError``): the processed data never has them.
- As a last guard, a sentinel sentence is appended to every PTB call and must come back unchanged and last, so
  any misalignment raises instead of mis-scoring.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

from mwpgen.data.equations import canonical_equation, equivalent
from mwpgen.data.masking import split_text
from mwpgen.data.splits import normalise_text  # the same identity as the splits' leakage check

MAX_HYPOTHESIS_CHARS = 2000
DEFAULT_METEOR_TIMEOUT_S = 600.0
_SENTINEL = "alignment sentinel"


def _clean_char(ch: str) -> str:
    cat = unicodedata.category(ch)
    if cat == "Cf":
        return ""
    return " " if cat[0] in "CZ" else ch


def _sanitize(text: str, max_chars: int | None) -> tuple[str, bool]:
    if not (text.isascii() and text.isprintable()):
        text = "".join(_clean_char(ch) for ch in text)
    text = " ".join(text.replace("|||", " ").split())
    if max_chars is None or len(text) <= max_chars:
        return text, False
    cut = text[:max_chars]
    if text[max_chars] != " " and " " in cut:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(), True


def sanitize_text(text: str, max_chars: int | None = MAX_HYPOTHESIS_CHARS) -> str:
    """Make `text` safe for the PTB tokenizer and METEOR's line protocol (see module docstring)."""
    return _sanitize(text, max_chars)[0]


def ptb_tokenize(texts: Sequence[str]) -> list[str]:
    """pycocoevalcap's PTB tokenizer (lowercases, drops punctuation), one JVM call; inputs must be sanitised."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    captions: dict[int, list[dict[str, str]]] = {i: [{"caption": t}] for i, t in enumerate(texts)}
    captions[len(texts)] = [{"caption": _SENTINEL}]
    out = PTBTokenizer().tokenize(captions)
    if len(out) != len(captions) or out.get(len(texts)) != [_SENTINEL]:
        raise RuntimeError("PTB tokenizer output is misaligned with its input (unsanitised line break?)")
    # Re-sanitise (no truncation): the tokenizer could in principle emit a separator or stray whitespace.
    return [sanitize_text(out[i][0], None) for i in range(len(texts))]


class TextScorer:
    """BLEU-4 / METEOR / ROUGE-L with one METEOR JVM kept alive across batches (e.g. the 5 CV folds).

    Use as a context manager; the JVM is started on entry, so it warms up while the tokenizer and BLEU run.
    """

    def __init__(self, meteor_timeout_s: float = DEFAULT_METEOR_TIMEOUT_S,
                 max_hypothesis_chars: int = MAX_HYPOTHESIS_CHARS) -> None:
        self.meteor_timeout_s = meteor_timeout_s
        self.max_hypothesis_chars = max_hypothesis_chars
        self._meteor: Any = None
        self._ready = False

    def __enter__(self) -> TextScorer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # safety net only; may run during interpreter shutdown
        try:
            self.close()
        except Exception:
            pass

    def start(self) -> None:
        """Launch the METEOR JVM (returns immediately; the JVM loads in the background)."""
        if self._meteor is None:
            from pycocoevalcap.meteor.meteor import Meteor

            self._meteor, self._ready = Meteor(), False

    def close(self) -> str:
        """Kill the METEOR JVM (idempotent); returns the tail of its stderr for error messages."""
        meteor, self._meteor, self._ready = self._meteor, None, False
        if meteor is None:
            return ""
        proc, tail = meteor.meteor_p, ""
        with contextlib.suppress(Exception):
            proc.stdin.close()
        with contextlib.suppress(Exception):
            proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=30)
        if proc.returncode is not None:
            with contextlib.suppress(Exception):
                tail = proc.stderr.read()[-2000:].decode("utf-8", "replace").strip()
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(Exception):
                stream.close()
        if meteor.lock.locked():  # left held by a compute_score that failed; Meteor.__del__ would block on it
            with contextlib.suppress(RuntimeError):
                meteor.lock.release()
        return tail

    def _meteor_score(self, gts: dict[int, list[str]], res: dict[int, list[str]]) -> tuple[float, list[float]]:
        """METEOR compute_score under a watchdog: a stuck JVM is killed, which turns the hang into an error."""
        self.start()
        meteor, fired = self._meteor, threading.Event()

        def _kill() -> None:
            fired.set()
            with contextlib.suppress(Exception):
                meteor.meteor_p.kill()

        timer = threading.Timer(self.meteor_timeout_s, _kill)
        timer.daemon = True
        timer.start()
        try:
            score, scores = meteor.compute_score(gts, res)
        except Exception as e:
            tail = self.close()
            why = f"no answer within {self.meteor_timeout_s:g} s" if fired.is_set() else f"stderr: {tail!r}"
            raise RuntimeError(f"METEOR subprocess failed ({why})") from e
        finally:
            timer.cancel()
        if fired.is_set():  # fired just after the answer arrived: the JVM is gone, start afresh next time
            self.close()
        self._ready = not fired.is_set()
        return float(score), [float(s) for s in scores]

    def wait_ready(self) -> None:
        """Block until the JVM answers (a one-pair probe); lets callers time JVM start-up separately."""
        if not self._ready:
            self._meteor_score({0: ["ready"]}, {0: ["ready"]})

    def score(self, hypotheses: Sequence[str], references: Sequence[str], per_item: bool = False) -> dict[str, Any]:
        """Corpus BLEU-4 (coco 'closest' reflen), METEOR (aggregate), ROUGE-L (mean); one reference per item.

        Returns ``bleu4, meteor, rouge_l, n, n_empty_hypotheses, n_truncated, timings_s`` (seconds per step:
        ``tokenize`` incl. sanitising, ``bleu``, ``rouge_l``, ``meteor_start`` = remaining JVM start-up wait,
        ``meteor``) and, with `per_item`, per-item lists ``bleu4_per_item`` (sentence BLEU-4), ``bleu_stats_per_item``
        (:func:`bleu_stats`), ``meteor_per_item``, ``rouge_l_per_item``.
        """
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.rouge.rouge import Rouge

        if len(hypotheses) != len(references):
            raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
        if not hypotheses:
            raise ValueError("nothing to score")
        self.start()
        timings: dict[str, float] = {}
        t = time.perf_counter()
        cleaned = [_sanitize(h, self.max_hypothesis_chars) for h in hypotheses]
        hyps = [h for h, _ in cleaned]
        n_truncated = sum(cut for _, cut in cleaned)
        refs = [sanitize_text(r, None) for r in references]
        empty = [i for i, r in enumerate(refs) if not r]
        if empty:
            raise ValueError(f"empty reference text at index {empty[:10]}")
        tokens = ptb_tokenize(hyps + refs)
        n = len(hyps)
        res = {i: [tokens[i]] for i in range(n)}
        gts = {i: [tokens[n + i]] for i in range(n)}
        timings["tokenize"] = time.perf_counter() - t

        t = time.perf_counter()
        bleu, bleu_items = Bleu(4).compute_score(gts, res, verbose=0)
        timings["bleu"] = time.perf_counter() - t
        t = time.perf_counter()
        rouge, rouge_items = Rouge().compute_score(gts, res)
        timings["rouge_l"] = time.perf_counter() - t
        t = time.perf_counter()
        self.wait_ready()
        timings["meteor_start"] = time.perf_counter() - t
        t = time.perf_counter()
        meteor, meteor_items = self._meteor_score(gts, res)
        timings["meteor"] = time.perf_counter() - t

        out: dict[str, Any] = {
            "bleu4": float(bleu[3]), "meteor": meteor, "rouge_l": float(rouge), "n": n,
            "n_empty_hypotheses": sum(not res[i][0] for i in range(n)), "n_truncated": int(n_truncated),
            "timings_s": timings,
        }
        if per_item:
            out["bleu4_per_item"] = [float(s) for s in bleu_items[3]]
            out["bleu_stats_per_item"] = [bleu_stats(res[i][0], gts[i]) for i in range(n)]
            out["meteor_per_item"] = meteor_items
            out["rouge_l_per_item"] = [float(s) for s in rouge_items]
        return out


def bleu_stats(hypothesis: str, references: Sequence[str]) -> list[int]:
    """One item's sufficient statistics of pycocoevalcap's corpus BLEU-4, cooked by pycocoevalcap itself (option
    "closest", as `Bleu.compute_score` uses): [clipped n-gram matches for n = 1..4, hypothesis n-grams for n = 1..4,
    hypothesis length, closest reference length]. Summed over any multiset of items they give that corpus's BLEU-4
    (evaluation.report.corpus_bleu), which the paired bootstrap needs. Inputs are PTB-tokenised strings."""
    from pycocoevalcap.bleu.bleu_scorer import cook_refs, cook_test

    cooked = cook_test(hypothesis, cook_refs(references), eff="closest")
    return [*cooked["correct"], *cooked["guess"], cooked["testlen"], cooked["reflen"]]


def equation_symbols(equation: str) -> tuple[str, ...]:
    """Symbol sequence of an equation in the canonical form (data.equations.canonical_equation): whitespace and
    redundant parentheses around the whole right-hand side are not significant."""
    return tuple(canonical_equation(equation).split())


def equation_matches(predicted_equations: Sequence[str], reference_equations: Sequence[str],
                     equivalent_too: bool = False) -> list[bool]:
    """Per item: the prediction equals the reference in the canonical form (the paper's exact ACC-eq), or, with
    `equivalent_too`, is symbolically the same equation (data.equations.equivalent)."""
    if len(predicted_equations) != len(reference_equations):
        raise ValueError(f"{len(predicted_equations)} predictions but {len(reference_equations)} references")
    same = equivalent if equivalent_too else (lambda p, r: equation_symbols(p) == equation_symbols(r))
    return [same(p, r) for p, r in zip(predicted_equations, reference_equations)]


def acc_eq(predicted_equations: Sequence[str], reference_equations: Sequence[str],
           equivalent_too: bool = False) -> float:
    """ACC-eq: fraction of mwp2eq predictions that equal the input equation in the canonical form (with
    `equivalent_too`: that are symbolically the input equation). NaN for empty input (undefined, not 0)."""
    hits = equation_matches(predicted_equations, reference_equations, equivalent_too)
    return sum(hits) / len(hits) if hits else math.nan


def most_frequent_equation(records: Sequence[dict]) -> str:
    """The chance baseline of ACC-eq: the training fold's most frequent equation in the canonical form (ties: the
    first in sorted order, so the choice is reproducible)."""
    counts = Counter(canonical_equation(r["equation"]) for r in records)
    best = max(counts.values())
    return min(e for e, n in counts.items() if n == best)


def acc_eq_subset(predicted_equations: Sequence[str], reference_equations: Sequence[str],
                  mask: Sequence[bool]) -> float:
    """ACC-eq over the items where `mask` is true, e.g. novel problems only (paper Sec. 4.1); NaN if none."""
    if not len(predicted_equations) == len(reference_equations) == len(mask):
        raise ValueError("predictions, references and mask differ in length")
    keep = [i for i, m in enumerate(mask) if m]
    return acc_eq([predicted_equations[i] for i in keep], [reference_equations[i] for i in keep])


def novelty(generated_texts: Sequence[str], training_texts: Sequence[str]) -> tuple[float, list[bool]]:
    """Table 3: fraction of generated problems whose normalised text is not in the training fold, and the mask.

    Generated and training texts must be tokenised alike (e.g. both whitespace-tokenised as in the processed
    data): only case and whitespace are normalised. The fraction is NaN for no generated texts.
    """
    seen = {normalise_text(t) for t in training_texts}
    mask = [normalise_text(g) not in seen for g in generated_texts]
    return (sum(mask) / len(mask) if mask else math.nan), mask


def distinct_n(texts: Sequence[str], n: int = 3) -> float:
    """Dist-n (Li et al. 2016): distinct n-grams / total n-grams, pooled over all texts.

    Tokens are lowercased whitespace tokens; n-grams never span two texts. A text shorter than n contributes
    nothing; if there are no n-grams at all the result is 0.0.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    distinct: set[tuple[str, ...]] = set()
    total = 0
    for text in texts:
        toks = text.lower().split()
        for i in range(len(toks) - n + 1):
            distinct.add(tuple(toks[i:i + n]))
            total += 1
    return len(distinct) / total if total else 0.0


def evaluate_generations(hypotheses: Sequence[str], references: Sequence[str], *,
                         training_texts: Sequence[str] | None = None,
                         predicted_equations: Sequence[str] | None = None,
                         reference_equations: Sequence[str] | None = None,
                         dist_n: int = 3, per_item: bool = False,
                         meteor_timeout_s: float = DEFAULT_METEOR_TIMEOUT_S,
                         scorer: TextScorer | None = None) -> dict[str, Any]:
    """All metrics for one set of generations, with one METEOR JVM started and killed here, unless an open
    `scorer` is passed (e.g. one per cross-validation run): then its JVM is reused and left running.

    Always: ``bleu4, meteor, rouge_l`` and ``dist{dist_n}`` (on the raw hypotheses). With both equation lists:
    ``acc_eq`` (canonical form) and ``acc_eq_equivalent`` (symbolically the input equation). With `training_texts`:
    ``novelty``, ``n_novel`` and, with equations too, ``acc_eq_novel``. ``timings_s`` has the :meth:`TextScorer.score`
    steps plus ``meteor_close``, ``acc_eq``, ``novelty``, ``dist_n`` and ``total`` (wall time of this call).
    """
    t0 = time.perf_counter()
    if (predicted_equations is None) != (reference_equations is None):
        raise ValueError("give both predicted_equations and reference_equations, or neither")
    own = scorer is None
    active = TextScorer(meteor_timeout_s=meteor_timeout_s) if scorer is None else scorer
    try:
        active.start()
        out = active.score(hypotheses, references, per_item=per_item)
    finally:
        t = time.perf_counter()
        if own:
            active.close()
        close_s = time.perf_counter() - t
    timings = out["timings_s"]
    timings["meteor_close"] = close_s
    if predicted_equations is not None and reference_equations is not None:
        t = time.perf_counter()
        exact = equation_matches(predicted_equations, reference_equations)
        same = equation_matches(predicted_equations, reference_equations, equivalent_too=True)
        out["acc_eq"] = sum(exact) / len(exact)
        out["acc_eq_equivalent"] = sum(same) / len(same)
        if per_item:
            out["acc_eq_per_item"], out["acc_eq_equivalent_per_item"] = exact, same
        timings["acc_eq"] = time.perf_counter() - t
    if training_texts is not None:
        t = time.perf_counter()
        out["novelty"], mask = novelty(hypotheses, training_texts)
        out["n_novel"] = sum(mask)
        if per_item:
            out["novel_per_item"] = mask
        if predicted_equations is not None and reference_equations is not None:
            out["acc_eq_novel"] = acc_eq_subset(predicted_equations, reference_equations, mask)
        timings["novelty"] = time.perf_counter() - t
    t = time.perf_counter()
    out[f"dist{dist_n}"] = distinct_n(hypotheses, dist_n)
    timings["dist_n"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    return out


def score_generations(rows: Sequence[dict], parsed: Sequence[str], training_texts: Sequence[str],
                      scorer: TextScorer) -> tuple[dict[str, Any], list[dict]]:
    """Score a generations table (rows with id, equation, reference, generated) as the `evaluate` stage does:
    the generated text in the processed texts' tokenisation against the reference, ACC-eq from the evaluator's
    `parsed` equations, novelty against `training_texts`. Returns (scores, one prediction record per row); a
    record's ``bleu_stats`` (:func:`bleu_stats`) let the report recompute corpus BLEU-4 on bootstrap resamples."""
    generated = [r["generated"] for r in rows]
    tokenised = [" ".join(split_text(g)) for g in generated]
    scores = evaluate_generations(tokenised, [r["reference"] for r in rows], training_texts=training_texts,
                                  predicted_equations=parsed, reference_equations=[r["equation"] for r in rows],
                                  per_item=True, scorer=scorer)
    keys = ("acc_eq", "acc_eq_equivalent", "novel", "bleu4", "bleu_stats", "meteor", "rouge_l")
    items = {k: scores.pop(f"{k}_per_item") for k in keys}
    predictions = [{"id": r["id"], "equation": r["equation"], "generated": r["generated"], "parsed": p,
                    **dict(zip(keys, values))}
                   for r, p, *values in zip(rows, parsed, *(items[k] for k in keys), strict=True)]
    return scores, predictions
