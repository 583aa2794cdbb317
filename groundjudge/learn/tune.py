"""Fine-tuning the local NLI checker on labelled claims (``groundjudge tune``): the local checker learns from the judge.

Training claims come from three kinds of JSONL file, told apart row by row:

- gold claim rows ``{"id", "contexts", "claim", "label"}`` (label SUPPORTED / UNSUPPORTED / CONTRADICTED);
- ``groundjudge score`` output (AnswerReport lines): claims the judge decided, with every quote verified for
  SUPPORTED / CONTRADICTED; the premise is the passage the quote came from, else the NLI stage's best passage;
- human review decisions ``{"id": answer id, "claim_id", "label", "note"?}``, joined to a score output file given
  in the same call; a review overrides the judge's verdict on its claim.

Premises are what the pipeline will show the model: a short context whole, else the top-k BM25 passages (for
SUPPORTED / CONTRADICTED the one the base model finds most entailing / contradicting, for UNSUPPORTED all of them).
A slice disjoint by claim text is held out: the thresholds are calibrated on it (``fit_thresholds``) and the
before/after numbers measured on it. Forgetting is held back by distillation towards the base model's predictions
on the training pairs (and optionally L2-SP towards the base weights). Training checkpoints into ``OUT/.tune`` and
resumes when rerun with the same arguments; the training pairs and each model's held-out scores are kept there too,
so that a rerun builds and scores nothing again and fits on the same numbers. It trains NLI cross-encoders and
two-label checkers read as text pairs, and token checkers (LettuceDetect) on the claim's P(supported) as scoring
reads it (:mod:`~groundjudge.learn.objective`); seq2seq and templated checkers are refused before any work.

A verdict head (:mod:`~groundjudge.checker.head`) is fitted on the tuned model's scores of the held-out slice, never on
the training rows (the tuned model is overconfident on what it was trained on), and stored beside the weights with
its own thresholds, so that the pipeline applies it with no flags. A slice too small to fit one leaves none (the
result says why); ``head=False`` (``--no-head``) stores none. The head changes no weight: it is not part of the run
key, and a rerun that resumes a finished run fits (or removes) it again.

A tuned model that measures worse on the held-out slice than the base (NLI-only balanced accuracy) is not kept: the
base model's weights are written to OUT instead, with thresholds and head fitted on its held-out scores, and the
result (``kept``: ``"base"``, ``kept_reason``) and the log say so.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from groundjudge.atomic import atomic_write_text, atomic_writer
from groundjudge.checker import evidence
from groundjudge.checker.evidence import BM25
from groundjudge.checker.head import MIN_CLAIMS, MIN_CLASS, VerdictHead, claim_key
from groundjudge.checker.nli import (
    CONTRADICTION,
    NEUTRAL,
    NLIModel,
    NLIScorer,
    pick_device,
    read_checker_profile,
)
from groundjudge.checker.profile import write_checker_declaration, write_model_fit
from groundjudge.chunking import chunk_document, chunk_documents
from groundjudge.errors import ConfigError, InputError, NLIError
from groundjudge.io.jsonl import read_jsonl
from groundjudge.io.labels import claim_label
from groundjudge.io.reports import (
    is_parquet_file,
    is_report_row,
    is_review_row,
    last_reports,
    out_of_range,
    read_reports,
)
from groundjudge.io.rows import parse_sample
from groundjudge.learn.calibrate import CutoffRule, build_head, crossfit_measure_scores, fit_profile
from groundjudge.learn.labels import judge_left_out, left_out_said, reviewed_claims
from groundjudge.learn.objective import LABEL_OUTPUT, autocast, base_answers, make_objective
from groundjudge.learn.tune_out import STATE_DIR, inside_folder, interrupts_keep, prepare_out, save_tokenizer
from groundjudge.models import AnswerReport, ClaimNLI, ClaimVerdict
from groundjudge.review.metrics import Review, review_from_row


@dataclass
class TuneExample:
    """One labelled claim; ``premises`` are fixed evidence passages (judge quotes), else chosen from ``contexts``."""

    id: str
    claim: str
    contexts: list[str]
    label: str
    source: str  # gold, judge or review
    premises: list[str] = field(default_factory=list)


@dataclass
class TuneSettings:
    """Hyperparameters of a tuning run. ``epochs`` was chosen by 2-fold claim-disjoint cross-validation over the dev
    train halves (``benchmarks/tune.py --cv 2``, README: 4 epochs beat 2, no distillation and lr 6e-5 on the honest
    measures); the rest are common fine-tuning settings sized for 2 CPU cores."""

    epochs: int = 4
    lr: float = 3e-5
    batch_size: int | None = None  # 16 on CPU, 32 on a GPU
    max_length: int = 256
    warmup: float = 0.1
    weight_decay: float = 0.01
    distill: float = 0.5  # weight of KL(base || tuned) on the training pairs
    l2sp: float = 0.0  # weight of the squared distance to the base weights
    balance: bool = True  # inverse-frequency class weights
    k: int | None = 2  # BM25 passages per claim (the pipeline's evidence_k; None: every passage)
    passage_tokens: int = 128
    passage_overlap: int = 32
    holdout: float = 0.2
    target: float = 0.9
    contradiction_target: float = 0.7
    seed: int = 0
    head: bool = True  # fit a verdict head (checker.head) on the tuned model's held-out scores; no weight changes

    @property
    def cutoffs(self) -> CutoffRule:
        """How the stored raw thresholds are fitted (the head's are fitted by expected precision)."""
        return CutoffRule(self.target, self.contradiction_target)


# settings that change nothing the training writes: left out of the run key, so a rerun that changes them resumes
_NOT_IN_RUN_KEY = ("head",)


@dataclass
class TrainPair:
    premise: str
    claim: str
    label: str
    base: list[float] = field(default_factory=list)  # base model probabilities, in the model's own output order


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every row of a JSONL file, read by the one strict reader; a bad line stops with an InputError naming it."""
    if not path.is_file():
        raise InputError(f"no file {path}")
    rows = []
    for n, row in read_jsonl(path):
        if isinstance(row, InputError):
            raise InputError(row.reason, row=f"{path.name}:{n}")
        if not isinstance(row, dict):
            raise InputError("a row must be a JSON object", row=f"{path.name}:{n}")
        rows.append(row)
    return rows


def _quote_passage(
    report: AnswerReport, verdict: ClaimVerdict, tokenizer: Any, passage_tokens: int, overlap: int
) -> list[str]:
    """The pipeline-sized passages the verified quotes came from (widened from quote.start..end)."""
    out: list[str] = []
    for q in verdict.quotes:
        if not q.verified or q.doc is None or q.start is None or q.end is None or q.doc >= len(report.contexts):
            continue
        passages = chunk_document(report.contexts[q.doc], q.doc, tokenizer, passage_tokens, overlap)
        best = max(passages, key=lambda p: min(p.end, q.end or 0) - max(p.start, q.start or 0), default=None)
        if best is not None and best.text not in out:
            out.append(best.text)
    return out


def _from_report(
    report: AnswerReport, verdict: ClaimVerdict, label: str, source: str, tokenizer: Any, settings: TuneSettings
) -> TuneExample | None:
    premises: list[str] = []
    if label in ("SUPPORTED", "CONTRADICTED") and verdict.label == label:
        premises = _quote_passage(report, verdict, tokenizer, settings.passage_tokens, settings.passage_overlap)
    nli = verdict.nli
    if not premises and nli is not None:
        passage = nli.contradiction_passage if label == "CONTRADICTED" else nli.entailment_passage
        if passage is not None:
            premises = [passage.text]
    if not premises and not report.contexts:
        return None
    return TuneExample(
        id=f"{report.id}/{verdict.claim.id}",
        claim=verdict.claim.text,
        contexts=list(report.contexts),
        label=label,
        source=source,
        premises=premises,
    )


def load_examples(
    paths: Sequence[str | Path],
    tokenizer: Any,
    settings: TuneSettings | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> list[TuneExample]:
    """Training claims from gold claim rows, score output files (judge verdicts) and review decisions (one label
    per claim, :func:`~groundjudge.review.metrics.review_labels`: a claim reviewers disagree on with no adjudication
    teaches nothing, the judge's verdict on it neither; ``log`` says how many). A judge verdict teaches by
    :func:`~groundjudge.learn.labels.judge_usable`: not one the second judge disagreed with, unless a reviewer decided
    the claim (``log`` says how many were left out).

    Raises:
        InputError: a row of none of the three kinds, a bad label, or a review whose claim is in no score file.
    """
    settings = settings or TuneSettings()
    gold: list[TuneExample] = []
    # by answer id, claim id and claim text: two runs of the same rows (v1 and v2) reuse ids for other claims
    reports: dict[tuple[str, str, str], tuple[AnswerReport, ClaimVerdict]] = {}
    reviews: list[tuple[str, Review]] = []
    runs: list[list[AnswerReport]] = []  # each score file's reports
    for path in map(Path, paths):
        parquet = is_parquet_file(path)  # a Parquet OUT: its reports, by the one reader (a table holds nothing else)
        in_file: list[AnswerReport] = _parquet_out(path) if parquet else []
        for n, row in enumerate([] if parquet else _read_jsonl(path), start=1):
            where = f"{path.name}:{n}"
            if is_report_row(row):
                in_file.append(_report(row, where))
            elif is_review_row(row):
                reviews.append((where, _review(row, n, where)))  # a null label: cleared, no label (reviewed_claims)
            elif "claim" in row and ("contexts" in row or "context" in row):  # read as score reads its rows
                if not isinstance(row["claim"], str):
                    raise InputError("must be the claim's text", row=where, field="claim")
                try:
                    sample = parse_sample(row, n)
                except InputError as exc:
                    raise InputError(exc.reason, row=where, field=exc.field) from exc
                truth = claim_label(sample.label, where)  # read by the one label rule (parse_sample): a claim's
                gold.append(TuneExample(sample.id, row["claim"], sample.contexts, truth, "gold"))
            else:
                raise InputError(
                    "neither a claim row {id, contexts, claim, label}, a groundjudge score report, nor a review "
                    "decision {id, claim_id, label}",
                    row=where,
                )
        runs.append(last_reports(in_file)[0])  # an id's last report counts, as every reader of reports keeps it
        for report in runs[-1]:
            for v in report.claims:
                reports[(report.id, v.claim.id, v.claim.text)] = (report, v)
    reviewed = reviewed_claims(reviews, runs, log)
    out = gold
    left_out: Counter[str] = Counter()  # why a judge verdict did not teach, as calibrate counts it
    for key, (report, v) in reports.items():
        if key in reviewed:  # None: reviewers disagree, and the judge's verdict is no tiebreak
            label = reviewed[key]
            ex = None if label is None else _from_report(report, v, label, "review", tokenizer, settings)
        elif (why := judge_left_out(v)) is None:
            ex = _from_report(report, v, v.label, "judge", tokenizer, settings)
        else:  # e.g. a label two judges disagree on is noise; a review of the claim teaches it
            left_out[why] += 1
            continue
        if ex is not None:
            out.append(ex)
    if left_out:
        log(f"judge verdicts left out: {left_out_said(left_out)}")
    return out


def _parquet_out(path: Path) -> list[AnswerReport]:
    """The reports of a Parquet OUT (``score --out X.parquet``), read by :func:`~groundjudge.io.reports.read_reports`;
    a Parquet table that holds none is refused naming the file."""
    try:
        return list(read_reports(path))
    except ValueError as exc:
        raise InputError(f"a Parquet file that is no 'groundjudge score' output: {exc}", row=path.name) from exc


def _report(row: dict[str, Any], where: str) -> AnswerReport:
    """A report line of a score output, by the report readers' rules (:func:`~groundjudge.io.reports.out_of_range`:
    no score a run does not write), named by file and line."""
    try:
        report = AnswerReport.model_validate(row)
    except ValueError as exc:
        raise InputError(f"not a groundjudge report: {exc}", row=where) from exc
    if wrong := out_of_range(report):
        raise InputError(f"{'; '.join(wrong)}: no score groundjudge writes", row=where)
    return report


def _review(row: dict[str, Any], n: int, where: str) -> Review:
    """A review line by the review readers' one rule (:func:`~groundjudge.review.metrics.review_from_row`), named by
    file and line (a line without a verdict is ``cleared``: no label)."""
    try:
        return review_from_row(row, n)
    except InputError as exc:
        raise InputError(exc.reason, row=where, field=exc.field) from exc


def split_by_claim(
    examples: Sequence[TuneExample], holdout: float, seed: int
) -> tuple[list[TuneExample], list[TuneExample]]:
    """(train, held out), disjoint by claim text, stratified by each claim's first label, seeded."""
    groups: dict[str, list[str]] = {}
    first_label: dict[str, str] = {}
    for ex in examples:
        k = claim_key(ex.claim)
        if k not in first_label:
            first_label[k] = ex.label
            groups.setdefault(ex.label, []).append(k)
    rng = random.Random(seed)
    held: set[str] = set()
    for label in sorted(groups):
        keys = sorted(groups[label])
        rng.shuffle(keys)
        held.update(keys[: round(holdout * len(keys))])
    train = [ex for ex in examples if claim_key(ex.claim) not in held]
    test = [ex for ex in examples if claim_key(ex.claim) in held]
    return train, test


# -- premises ----------------------------------------------------------------------------------------------------


def build_pairs(
    examples: Sequence[TuneExample], base: NLIModel, scorer: NLIScorer, settings: TuneSettings
) -> list[TrainPair]:
    """(premise, claim, label) training pairs, as the pipeline would show them to the model."""
    tok = base.tokenizer
    claim_tokens = base.count_tokens([ex.claim for ex in examples])
    room = min(settings.max_length, base.max_length) - base.special_tokens
    pairs: list[TrainPair] = []
    pick: list[tuple[TuneExample, list[str]]] = []  # SUPPORTED/CONTRADICTED among top-k: the base model chooses
    for ex, n_claim in zip(examples, claim_tokens, strict=True):
        if ex.premises:
            pairs.extend(TrainPair(p, ex.claim, ex.label) for p in ex.premises)
            continue
        whole = "\n\n".join(ex.contexts)
        if sum(base.count_tokens([whole])) + n_claim <= room:
            pairs.append(TrainPair(whole, ex.claim, ex.label))
            continue
        passages = chunk_documents(ex.contexts, tok, settings.passage_tokens, settings.passage_overlap)
        if not passages:
            continue
        ranked = BM25([p.text for p in passages]).rank(ex.claim)[: settings.k]
        texts = [
            passages[i].text for i in ranked if passages[i].n_tokens + n_claim + base.special_tokens <= base.max_length
        ]
        if not texts:
            continue
        if ex.label == "UNSUPPORTED":
            pairs.extend(TrainPair(t, ex.claim, ex.label) for t in texts)
        else:
            pick.append((ex, texts))
    if pick:
        probs = scorer.score([(t, ex.claim) for ex, texts in pick for t in texts])
        i = 0
        for ex, texts in pick:
            which = LABEL_OUTPUT[ex.label]
            if which == CONTRADICTION and not base.has_contradiction:
                which = NEUTRAL  # a checker without a contradiction output: its "not supported" one
            block = probs[i : i + len(texts)]
            i += len(texts)
            best = int(block[:, which].argmax())
            pairs.append(TrainPair(texts[best], ex.claim, ex.label))
    return pairs


# -- training ----------------------------------------------------------------------------------------------------


def attach_base_probabilities(pairs: Sequence[TrainPair], base: NLIModel, settings: TuneSettings) -> None:
    """Set each pair's ``base``: the base model's answers on it as training reads them (``learn.objective``: its
    softmax, or a token checker's claim P(supported) and P(not supported)), the distillation target."""
    objective = make_objective(base, settings.max_length)
    encoded = objective.encode([(p.premise, p.claim) for p in pairs])
    for p, answer in zip(pairs, base_answers(objective, base.model, encoded, base.device, 32), strict=True):
        p.base = answer


def _batches(lengths: Sequence[int], batch: int, seed: int) -> list[list[int]]:
    """One epoch's batches: shuffled, then sorted by length within pools of 20 batches (less padding)."""
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    out: list[list[int]] = []
    pool = batch * 20
    for s in range(0, len(order), pool):
        chunk = sorted(order[s : s + pool], key=lambda i: lengths[i])
        out.extend(chunk[j : j + batch] for j in range(0, len(chunk), batch))
    rng.shuffle(out)
    return out


def _optimizer(model: Any, settings: TuneSettings, total: int) -> tuple[Any, Any]:
    """AdamW (no weight decay on biases and layer norms) and a linear warm-up then linear decay over ``total``."""
    import torch

    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    params = [
        {
            "params": [p for n, p in model.named_parameters() if not any(x in n for x in no_decay)],
            "weight_decay": settings.weight_decay,
        },
        {"params": [p for n, p in model.named_parameters() if any(x in n for x in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(params, lr=settings.lr)
    warm = max(1, int(settings.warmup * total))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: s / warm if s < warm else max(0.0, (total - s) / max(1, total - warm))
    )
    return optimizer, scheduler


ProgressFn = Callable[[int, int, float], None]


def train(
    base: str,
    pairs: Sequence[TrainPair],
    out: Path,
    settings: TuneSettings,
    *,
    device: str | None = None,
    run_key: str = "",
    checkpoint_every: int = 50,
    progress: ProgressFn | None = None,
    reader: NLIModel | None = None,
) -> dict[str, Any]:
    """Fine-tune ``base`` on the pairs and save the model (weights, tokenizer, config) to ``out``.

    ``reader``: ``base`` as groundjudge reads it (its kind, labels and template; ``tune`` hands in its base model),
    default loaded from ``base``. What the model is trained towards depends on its kind
    (:func:`~groundjudge.learn.objective.make_objective`); the loop, checkpoints and progress are the same.

    A checkpoint in ``out/.tune`` is written every ``checkpoint_every`` steps, at each epoch's end and on an
    interrupt; a later call with the same ``run_key`` resumes from it.

    Raises:
        NLIError: no pair can be trained on (a token checker's pairs all longer than ``max_length``, or a sequence
            classifier's claims all leaving no room for a passage token).
    """
    import torch
    import torch.nn.functional as F

    device = pick_device(device)
    state_dir = out / STATE_DIR
    state_dir.mkdir(parents=True, exist_ok=True)
    reader = reader if reader is not None else NLIModel(base, device="cpu")
    objective = make_objective(reader, settings.max_length)  # refuses a kind it cannot train
    model = objective.load(base)
    encoded = objective.encode([(p.premise, p.claim) for p in pairs])
    lengths = objective.lengths(encoded)
    keep = objective.usable(encoded)
    if not keep:
        why = (
            "a token checker's pairs are never cut"
            if reader.kind == "token"
            else "no claim leaves room for a passage token (the passage is cut to fit, never the claim)"
        )
        raise NLIError(
            f"none of the {len(pairs)} training pairs fits in {objective.max_length} tokens (--max-length), and {why}"
        )
    labels = [objective.targets[p.label] for p in pairs]
    counts = Counter(labels[i] for i in keep)
    weights = torch.ones(objective.outputs)
    if settings.balance:
        for c, n in counts.items():
            weights[c] = len(keep) / (len(counts) * n)
    model.to(device)
    batch = settings.batch_size or (32 if device != "cpu" else 16)
    steps_per_epoch = math.ceil(len(keep) / batch)
    total = steps_per_epoch * settings.epochs
    optimizer, scheduler = _optimizer(model, settings, total)
    anchor = [p.detach().clone() for p in model.parameters()] if settings.l2sp > 0 else []
    cast, scaler = autocast(device)

    ckpt = state_dir / "checkpoint.pt"
    epoch, step_in_epoch, step, losses = 0, 0, 0, []
    if ckpt.is_file():
        # read onto the CPU: the CPU random state must stay there (torch.set_rng_state refuses it on a GPU), and
        # the model's and optimizer's load_state_dict copy the rest onto the device of the tensors they fill
        saved = torch.load(ckpt, map_location="cpu", weights_only=False)
        if saved.get("run_key") == run_key:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            scheduler.load_state_dict(saved["scheduler"])
            torch.set_rng_state(saved["rng"])
            epoch, step_in_epoch, step, losses = saved["epoch"], saved["step_in_epoch"], saved["step"], saved["losses"]

    def save() -> None:
        checkpoint = {
            "run_key": run_key,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": torch.get_rng_state(),
            "epoch": epoch,
            "step_in_epoch": step_in_epoch,
            "step": step,
            "losses": losses,
        }
        with atomic_writer(ckpt, binary=True) as f:
            torch.save(checkpoint, f)

    start = time.perf_counter()
    model.train()
    try:
        while epoch < settings.epochs:
            plan = _batches([lengths[i] for i in keep], batch, settings.seed * 1000 + epoch)
            while step_in_epoch < len(plan):
                idx = [keep[j] for j in plan[step_in_epoch]]
                inputs = objective.batch(encoded, idx, device)
                y = torch.tensor([labels[i] for i in idx], device=device)
                with cast():
                    log_probs = objective.log_probs(model, inputs).float()
                loss = F.nll_loss(log_probs, y, weight=weights.to(device))  # cross-entropy of the label's output
                if settings.distill > 0:
                    teacher = torch.tensor([pairs[i].base for i in idx], device=device)
                    loss = loss + settings.distill * F.kl_div(log_probs, teacher.clamp_min(1e-8), reduction="batchmean")
                if anchor:
                    loss = loss + settings.l2sp * sum(
                        ((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor, strict=True)
                    )
                optimizer.zero_grad(set_to_none=True)
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                scheduler.step()
                step_in_epoch += 1
                step += 1
                losses.append(round(float(loss.detach()), 5))
                if progress is not None:
                    progress(step, total, sum(losses[-20:]) / len(losses[-20:]))
                if checkpoint_every and step % checkpoint_every == 0:
                    save()
            epoch, step_in_epoch = epoch + 1, 0
            save()
    except KeyboardInterrupt:
        save()
        raise
    model.eval()
    model.save_pretrained(str(out))
    save_tokenizer(reader.tokenizer, out)
    return {
        "steps": step,
        "pairs": len(pairs),
        "pairs_left_out": len(pairs) - len(keep),
        "seconds": round(time.perf_counter() - start, 1),
        "final_loss": sum(losses[-20:]) / max(1, len(losses[-20:])),
        "device": device,
        "batch_size": batch,
    }


# -- held-out measurement ----------------------------------------------------------------------------------------


def score_claims(
    model: NLIModel, examples: Sequence[TuneExample], settings: TuneSettings, cache: Any = None
) -> list[ClaimNLI]:
    """Each example's NLI result as the pipeline computes it (:func:`groundjudge.checker.evidence.score_claims`)."""
    return evidence.score_claims(
        model,
        [ex.claim for ex in examples],
        [ex.contexts for ex in examples],
        k=settings.k,
        passage_tokens=settings.passage_tokens,
        passage_overlap=settings.passage_overlap,
        cache=cache,
    )


def held_out_scores(
    model: NLIModel, held: Sequence[TuneExample], settings: TuneSettings, cache: Any, store: Path
) -> list[ClaimNLI]:
    """``model``'s scores of the held-out claims (:func:`score_claims`), kept in ``store`` (OUT's state folder) under
    the model's fingerprint (its weights, kind and numerics). A rerun of the run (same data, base and settings, so
    the same held-out claims), say with ``--no-head``, reads them back instead of scoring again: its thresholds and
    head are fitted on the very numbers the first run fitted on, not on a rescoring whose float sums may differ in
    the last digits (torch's kernels depend on the threads and the batch). A store that cannot be read is scored
    again."""
    try:
        saved = json.loads(store.read_text(encoding="utf-8")) if store.is_file() else {}
        kept = saved.get(model.fingerprint)
        if isinstance(kept, list) and len(kept) == len(held):
            return [ClaimNLI.model_validate(x) for x in kept]
    except (ValueError, AttributeError):  # torn or hand-edited: score again and write it whole
        saved = {}
    scores = score_claims(model, held, settings, cache)
    saved[model.fingerprint] = [s.model_dump(mode="json") for s in scores]
    atomic_write_text(store, json.dumps(saved))
    return scores


def crossfit_measure(
    nli: Sequence[ClaimNLI], examples: Sequence[TuneExample], settings: TuneSettings
) -> dict[str, Any]:
    """:func:`~groundjudge.learn.calibrate.crossfit_measure_scores` on examples: the numbers to expect of the stored
    thresholds on new rows (fitted on one half of the held-out slice by claim text, measured on the other, pooled),
    cut the same way as the head's out-of-fold numbers, so the two compare."""
    groups = [claim_key(ex.claim) for ex in examples]
    return crossfit_measure_scores(nli, [ex.label for ex in examples], groups, settings.cutoffs, settings.seed)


def examples_head(
    examples: Sequence[TuneExample],
    nli: Sequence[ClaimNLI],
    identity: str,
    settings: TuneSettings,
    meta: dict[str, Any],
) -> VerdictHead:
    """``build_head`` on examples and their scores, with the settings' targets and seed.

    Raises:
        ValueError: too few claims (or of either kind) for a head.
    """
    return build_head(
        [ex.claim for ex in examples],
        [ex.contexts for ex in examples],
        nli,
        [ex.label for ex in examples],
        identity,
        target=settings.target,
        contradiction_target=settings.contradiction_target,
        seed=settings.seed,
        meta=meta,
    )


def too_few_for_thresholds(nli: Sequence[ClaimNLI], labels: Sequence[str]) -> str | None:
    """Why the held-out slice is too small to store thresholds from, or None: the verdict head's minimum
    (:data:`~groundjudge.checker.head.MIN_CLAIMS` scored claims, :data:`~groundjudge.checker.head.MIN_CLASS`
    SUPPORTED and as many not), so that tune stores thresholds exactly when it could store a head."""
    scored = [label for x, label in zip(nli, labels, strict=True) if x.error is None]
    supported = sum(label == "SUPPORTED" for label in scored)
    if len(scored) < MIN_CLAIMS or min(supported, len(scored) - supported) < MIN_CLASS:
        return (
            f"the held-out slice has {len(scored)} scored claims, {supported} SUPPORTED; thresholds need at least "
            f"{MIN_CLAIMS} with {MIN_CLASS} SUPPORTED and {MIN_CLASS} not"
        )
    return None


def fit_held_out_head(
    model: NLIModel, held: Sequence[TuneExample], nli: Sequence[ClaimNLI], settings: TuneSettings
) -> tuple[VerdictHead | None, dict[str, Any]]:
    """A verdict head fitted on ``model``'s scores ``nli`` of the held-out claims, with a summary for the result.

    Returns (None, summary with the reason) when ``settings.head`` is off or the slice is too small for a head.
    """
    if not settings.head:
        return None, {"fitted": False, "reason": "not asked for (--no-head)"}
    try:
        head = examples_head(
            held, nli, model.identity, settings, {"tool": "groundjudge tune", "fitted_on": "held-out slice"}
        )
    except ValueError as exc:
        return None, {"fitted": False, "reason": f"held-out slice too small: {exc}"}
    return head, {"fitted": True, **head.summary()}


# -- the whole run ------------------------------------------------------------------------------------------------


def _head_oof(
    model: NLIModel, held: Sequence[TuneExample], nli: Sequence[ClaimNLI], settings: TuneSettings
) -> dict[str, Any] | None:
    """The out-of-fold numbers of a head fitted on ``model``'s held-out scores (None: no head asked for, or too
    few claims for one)."""
    head, info = fit_held_out_head(model, held, nli, settings)
    return info.get("out_of_fold") if head is not None else None


def compare_models(
    before: dict[str, Any],
    after: dict[str, Any],
    before_head: dict[str, Any] | None = None,
    after_head: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Whether the tuned model is worse than its base on the held-out slice, as it will be used: with a verdict head
    on both (out-of-fold balanced accuracy of each model's own head), else on the NLI scores alone (balanced
    accuracy with cross-fitted thresholds)."""
    if before_head is not None and after_head is not None:
        measure, b, a = "balanced accuracy with a verdict head", before_head, after_head
    else:
        measure, b, a = "NLI-only balanced accuracy", before, after
    x, y = float(b["nli_balanced_accuracy"]), float(a["nli_balanced_accuracy"])
    return {"measure": measure, "before": x, "after": y, "worse": y < x}


def _save_base(base_model: NLIModel, out: Path) -> None:
    """Write the base model's weights, config and tokenizer over the tuned ones in ``out`` (full precision)."""
    base_model.model.float().save_pretrained(str(out))
    save_tokenizer(base_model.tokenizer, out)


def _keep_or_swap(
    base_model: NLIModel,
    out: Path,
    state: dict[str, Any],
    state_file: Path,
    scoring: tuple[Sequence[TuneExample], TuneSettings, Any, Path],
    base_scores: tuple[dict[str, Any], Sequence[ClaimNLI]],
    device: str | None,
) -> tuple[NLIModel, list[ClaimNLI], dict[str, Any], dict[str, Any]]:
    """Which model OUT keeps, the tuned one or the base (a tuned model worse on its own held-out slice is not worth
    its weights), decided once per run: ``(the model OUT holds, its held-out scores, the tuned model's numbers, the
    comparison)``. The decision and the numbers it was made on go to ``state`` before OUT's weights are replaced, so a
    rerun reports them as they were (not the base's numbers as the tuned model's) and finishes a replacement a stop
    cut short (it never reads the base's weights in OUT as a tuned model no worse than its base)."""
    held, settings, cache, scores_file = scoring
    before, before_nli = base_scores
    decided = "kept" in state and "compared" in state and "after" in state
    if decided and state["kept"] == "base":
        _save_base(base_model, out)  # the same bytes again, or the end of a replacement a stop cut short
    tuned = NLIModel(str(out), device=device)
    after_nli = held_out_scores(tuned, held, settings, cache, scores_file)
    if decided:
        return tuned, after_nli, state["after"], state["compared"]
    after = crossfit_measure(after_nli, held, settings)  # out of sample for the thresholds, as new rows will be
    compared = compare_models(
        before, after, *(_head_oof(m, held, r, settings) for m, r in ((base_model, before_nli), (tuned, after_nli)))
    )
    # a run of an earlier version recorded only which model it kept: that decision stands
    kept = state.get("kept") or ("base" if compared["worse"] else "tuned")
    state.update(kept=kept, after=after, compared=compared)
    atomic_write_text(state_file, json.dumps(state) + "\n")
    if kept == "base":
        _save_base(base_model, out)
        tuned = NLIModel(str(out), device=device)
        after_nli = held_out_scores(tuned, held, settings, cache, scores_file)
    return tuned, after_nli, after, compared


# how build_pairs chooses premises: part of the run key, so that a checkpoint trained on pairs chosen another way is
# never resumed by a later version (change it with the rule). Premises from the plan's pieces (sentence windows and
# passages) were tried on 2026-11-28 and not kept: docs/benchmarks/tuning.md
PAIRS_RULE = "short context whole, else BM25 top-k passages; base-chosen"


def _run_key(
    paths: Sequence[Path],
    base: str,
    settings: TuneSettings,
    identity: str = "",
    examples: Sequence[TuneExample] = (),
) -> str:
    """What makes a rerun the same run: the data files' names and bytes, the labelled claims read from them (so a
    reading rule that changed what they teach, such as a disputed review left out, is another run, as is another
    version of that rule on the same files), the base model (its path and ``identity``, ``NLIModel.identity``: its
    weights and how they are read, so new weights at the same path are another run), the settings that change the
    weights and how the pairs are chosen."""
    weights = {k: v for k, v in asdict(settings).items() if k not in _NOT_IN_RUN_KEY}
    h = hashlib.sha256(json.dumps([base, identity, weights, PAIRS_RULE], sort_keys=True).encode())
    for p in paths:
        h.update(p.name.encode())
        h.update(hashlib.sha256(p.read_bytes()).digest())
    taught = json.dumps([asdict(ex) for ex in examples], ensure_ascii=False, sort_keys=True)
    h.update(hashlib.sha256(taught.encode("utf-8", "surrogatepass")).digest())
    return h.hexdigest()[:20]


def tune(
    data: Sequence[str | Path],
    base: str,
    out: str | Path,
    settings: TuneSettings | None = None,
    *,
    device: str | None = None,
    cache: Any = None,
    overwrite: bool = False,
    checkpoint_every: int = 50,
    progress: ProgressFn | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Fine-tune ``base`` on the labelled claims in ``data``, calibrate on a claim-disjoint held-out slice, and write
    ``out`` as a loadable model with its thresholds. Returns the before/after numbers and what was written."""
    settings = settings or TuneSettings()
    paths = [Path(p) for p in data]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise InputError(f"no file {', '.join(missing)}")
    # OUT is written, and with overwrite emptied: a base model or data in it would go before they were read
    read = [("the base model", Path(base))] if Path(base).is_dir() else []
    inside = [f"{what} {p}" for what, p in [*read, *(("the data", p) for p in paths)] if inside_folder(p, out)]
    if inside:
        raise ConfigError(f"--out {out} holds {', '.join(inside)}; write the tuned model to another folder")
    base_model = NLIModel(base, device=device)
    make_objective(base_model, settings.max_length)  # refuses a kind it cannot train before OUT is touched
    start = time.perf_counter()
    # the data is read before OUT is touched: a bad row leaves no OUT behind that the corrected data's run (another
    # run key) would refuse as "not empty"
    examples = load_examples(paths, base_model.tokenizer, settings, log)
    if not examples:
        raise InputError("no usable labelled claims in the data files")
    train_ex, held = split_by_claim(examples, settings.holdout, settings.seed)
    if not train_ex or not held:
        raise InputError(f"{len(examples)} claims are too few to hold out a slice and still train")
    out = Path(out)
    key = _run_key(paths, base, settings, base_model.identity, examples)
    prepare_out(out, key, overwrite)
    with interrupts_keep(out / STATE_DIR):  # from here a rerun resumes this run's state
        write_checker_declaration(out, read_checker_profile(base))  # the tuned model runs as its base does
        state_file = out / STATE_DIR / "run.json"
        state = json.loads(state_file.read_text())
        log(
            f"{len(examples)} claims ({dict(Counter(ex.source for ex in examples))}); "
            f"train {len(train_ex)}, held out {len(held)} (disjoint by claim text)"
        )
        pairs_file = out / STATE_DIR / "pairs.json"
        if pairs_file.is_file():
            pairs = [TrainPair(**p) for p in json.loads(pairs_file.read_text())]
        else:
            pairs = build_pairs(train_ex, base_model, NLIScorer(base_model, cache), settings)
            if settings.distill > 0:
                attach_base_probabilities(pairs, base_model, settings)
            atomic_write_text(pairs_file, json.dumps([asdict(p) for p in pairs]))
        log(f"{len(pairs)} training pairs ({dict(Counter(p.label for p in pairs))})")
        held_labels = [ex.label for ex in held]
        scores_file = out / STATE_DIR / "held_out_scores.json"
        before_nli = held_out_scores(base_model, held, settings, cache, scores_file)
        before_profile = fit_profile(before_nli, held_labels, settings.cutoffs)
        before = crossfit_measure(before_nli, held, settings)

        if state.get("trained"):
            training = state["training"]
        else:
            training = train(
                base,
                pairs,
                out,
                settings,
                device=device,
                run_key=key,
                checkpoint_every=checkpoint_every,
                progress=progress,
                reader=base_model,
            )
            state.update(trained=True, training=training)
            atomic_write_text(state_file, json.dumps(state) + "\n")
            (out / STATE_DIR / "checkpoint.pt").unlink(missing_ok=True)
        tuned, after_nli, after, compared = _keep_or_swap(
            base_model, out, state, state_file, (held, settings, cache, scores_file), (before, before_nli), device
        )
        kept = state["kept"]
        kept_reason = None
        if kept == "base":
            kept_reason = (
                f"the tuned model was worse on the held-out slice ({compared['measure']} {compared['before']:.1f} "
                f"before, {compared['after']:.1f} after): {out} holds the base model {base} instead, with thresholds "
                "and head fitted on its own held-out scores"
            )
            log(f"warning: {kept_reason}")
        profile = fit_profile(after_nli, held_labels, settings.cutoffs)
        too_few = too_few_for_thresholds(after_nli, held_labels)
        if too_few:  # cut-offs fitted on a handful of claims are noise that every later run would trust
            log(
                f"no thresholds stored: {too_few}; the pipeline uses the generic cut-offs until you calibrate the model"
            )
        # the head learns from the held-out scores only: on its training rows the tuned model is overconfident
        head, head_info = fit_held_out_head(tuned, held, after_nli, settings)
        if head is not None:  # when none is stored the command says why, once
            log(f"verdict head fitted on {head_info['claims']} held-out claims")
        meta = {
            "tool": "groundjudge tune",
            "base_model": base,
            "data": [str(p) for p in paths],
            "n_claims": len(examples),
            "n_train_claims": len(train_ex),
            "n_train_pairs": len(pairs),
            "n_held_out": len(held),
            "target": settings.target,
            "contradiction_target": settings.contradiction_target,
            "seed": settings.seed,
            "settings": asdict(settings),
            "held_out_before": before,
            "held_out_after": after,
            "kept": kept,
            "head": {k: v for k, v in head_info.items() if k != "thresholds"},
        }
        meta["thresholds"] = {"stored": not too_few, "reason": too_few or None}
        # one write (None: an earlier head goes), with the identity of OUT's weights (a run on others refuses them)
        write_model_fit(out, {} if too_few else profile, meta, head, model=tuned.identity)
        return {
            "out": str(out),
            "before": before,
            "after": after,  # the tuned model's, kept or not
            "kept": kept,
            "kept_reason": kept_reason,
            "compared": compared,
            "before_thresholds": {m: t.model_dump() for m, t in before_profile.items()},
            "thresholds": {} if too_few else {m: t.model_dump() for m, t in profile.items()},
            "thresholds_reason": too_few or None,
            "training": training,
            "head": head_info,
            "n_claims": len(examples),
            "n_held_out": len(held),
            "n_train_pairs": len(pairs),
            "seconds": round(time.perf_counter() - start, 1),
        }
