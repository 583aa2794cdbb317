"""Self-support in conversations: a false claim the assistant made earlier must not count as its own evidence.

    python benchmarks/conversations.py                      # Factcheck-GPT, 100 false claims
    python benchmarks/conversations.py --data ../shared/benchmarks/wice-dev.jsonl --limit 30

From the claim rows of ../shared/benchmarks whose label is not SUPPORTED (the claim is false or unsupported by its
context), builds agent traces in both wire formats (OpenAI and Anthropic, alternately): the user asks, the assistant
states the claim, the user asks it to check, the assistant calls a search tool whose result is the row's context,
and the assistant states the claim again. The claim then stands word for word in an earlier assistant turn.

Each conversation is scored, NLI-only and in cascade mode with a scripted correct judge (it supports a claim that a
source states word for word, quoting it, else gives the row's label), beside two other readings of the same row:

- ``evidence only``: the plain row, answer + the tool result as its one context (what the verdict should be);
- ``naive``: every earlier message as a context (how a reader that counts the assistant's own turns sees it).

The echo check (``echoes``): every claim row of the data, supported ones too, as such a conversation, read by
``groundjudge.io.conversations``: the share of rows, and of context characters, that the reader blanks as a repeat
of the assistant's own words (the claim stated before the tool looked). A blanked stretch of a supported row is
genuine evidence lost (a source stating the claim word for word, at least ``ECHO_MIN_CHARS`` characters).

A claim is *caught* when the conversation's verdict names no assistant turn and is the verdict the evidence alone
gets (the earlier turn changed nothing); the target is 100% in every mode. ``naive_self_supported`` is the share
the naive reading accepts (every claim SUPPORTED): what catching prevents. ``not_supported`` is the share of false
claims not accepted at all (the NLI model's own accuracy on the evidence, not a matter of self-support). The last
line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows
from groundjudge.cache import Cache
from groundjudge.checker.nli import NLIModel
from groundjudge.config import Config
from groundjudge.io.conversations import ECHO_MIN_CHARS
from groundjudge.io.rows import parse_sample
from groundjudge.llm import LLMClient, RetryPolicy, get_provider
from groundjudge.models import AnswerReport
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, fenced_block, route

MODEL = "openai/gpt-4o-mini"


def conversation(row: dict[str, Any], wire: str) -> dict[str, Any]:
    """An agent trace whose evidence is the row's context in a tool result and whose false claim also stands in an
    earlier assistant turn."""
    claim, context = row["claim"], "\n\n".join(row["contexts"])
    ask, check = "What can you tell me about this?", "Are you sure? Please check with the search tool."
    if wire == "openai":
        call = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "check"}'}}
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a helpful assistant with a search tool."},
            {"role": "user", "content": ask},
            {"role": "assistant", "content": claim},
            {"role": "user", "content": check},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": context},
            {"role": "assistant", "content": claim},
        ]
    else:
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": context}]}
        messages = [
            {"role": "system", "content": "You are a helpful assistant with a search tool."},
            {"role": "user", "content": ask},
            {"role": "assistant", "content": [{"type": "text", "text": claim}]},
            {"role": "user", "content": check},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"type": "text", "text": claim}]},
        ]
    return {"id": row["id"], "messages": messages}


def readings(row: dict[str, Any], wire: str) -> dict[str, dict[str, Any]]:
    conv = conversation(row, wire)
    naive = [row["claim"], *row["contexts"]]  # the earlier assistant turn and the tool result, both as sources
    return {
        "conversation": conv,
        "evidence_only": {"id": row["id"] + "#plain", "answer": row["claim"], "contexts": list(row["contexts"])},
        "naive": {"id": row["id"] + "#naive", "answer": row["claim"], "contexts": naive},
    }


def correct_judge(labels: dict[str, str]) -> Any:
    """A judge that reads its sources right: SUPPORTED (quoting it) when a source states the claim word for word,
    else the row's own label."""

    def judge(req: RecordedRequest) -> Reply:
        sources = [fenced_block(req, f"SOURCE {i}") for i in range(1, 6)]
        verdicts = []
        for cid, text in claims_in(req).items():
            body = text.strip().rstrip(".")
            hit = next((i for i, s in enumerate(sources, 1) if body and body in s), None)
            if hit is not None:
                quotes = [{"source": hit, "text": body}]
                verdicts.append({"claim_id": cid, "verdict": "SUPPORTED", "reason": "Stated.", "quotes": quotes})
            else:
                label = labels.get(text.strip(), "UNSUPPORTED")
                verdicts.append({"claim_id": cid, "verdict": label, "reason": "Per the sources.", "quotes": []})
        return Reply.json({"verdicts": verdicts})

    return judge


def whole_answer(req: RecordedRequest) -> Reply:
    """The claims call: the answer is one claim (the benchmark's claims are atomic already)."""
    answer = fenced_block(req, "ANSWER").strip()
    return Reply.json({"claims": [{"text": answer, "source": answer}]})


def accepted(report: AnswerReport) -> bool:
    return report.verdict != "ERROR" and bool(report.claims) and all(c.label == "SUPPORTED" for c in report.claims)


def cites_an_assistant_turn(report: AnswerReport) -> bool:
    """Whether any verdict or quote names a message that is an assistant turn (never expected)."""
    turns = report.conversation or []
    refs = [c.source for c in report.claims] + [q.source for c in report.claims for q in c.quotes]
    return any(r is not None and r.message is not None and turns[r.message].role == "assistant" for r in refs)


def measure(ev: Evaluator, rows: list[dict[str, Any]]) -> dict[str, Any]:
    built = [readings(r, "openai" if i % 2 == 0 else "anthropic") for i, r in enumerate(rows)]
    reports = {
        kind: list(ev.evaluate_many([b[kind] for b in built])) for kind in ("conversation", "evidence_only", "naive")
    }
    caught = not_supported = naive = errors = 0
    for conv, plain, loose in zip(reports["conversation"], reports["evidence_only"], reports["naive"], strict=True):
        errors += conv.verdict == "ERROR"
        same = [c.label for c in conv.claims] == [c.label for c in plain.claims]
        caught += conv.verdict != "ERROR" and same and not cites_an_assistant_turn(conv)
        not_supported += not accepted(conv)
        naive += accepted(loose)
    n = len(rows)
    return {
        "rows": n,
        "self_supported_caught": caught / n if n else None,
        "not_supported": not_supported / n if n else None,
        "naive_self_supported": naive / n if n else None,
        "errors": errors,
    }


def echoes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """By label: how many rows, the share whose tool result the reader blanks in part as an echo of the assistant's
    earlier turn, and the share of context characters blanked."""
    by_label: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        sample = parse_sample(conversation(row, "openai" if i % 2 == 0 else "anthropic"), i + 1)
        context = "\n\n".join(row["contexts"])
        notes = [s.note or "" for s in sample.sources or []]
        blanked = sum(int(m.group(1)) for note in notes if (m := re.search(r"(\d+) characters repeating", note)))
        n = by_label.setdefault(str(row.get("label")), [0, 0, 0, 0])
        n[0], n[1], n[2], n[3] = n[0] + 1, n[1] + (blanked > 0), n[2] + blanked, n[3] + len(context)
    return {
        "min_chars": ECHO_MIN_CHARS,
        **{
            k: {"rows": v[0], "rows_blanked": v[1] / v[0], "chars_blanked": v[2] / max(v[3], 1)}
            for k, v in by_label.items()
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SHARED / "benchmarks" / "factcheckgpt-stance.jsonl"))
    ap.add_argument("--limit", type=int, default=100, help="false claims to use")
    ap.add_argument("--nli-model", default=None)
    args = ap.parse_args()

    claims = [r for r in read_rows(args.data) if "claim" in r]
    rows = [r for r in claims if r.get("label") != "SUPPORTED"][: args.limit]
    labels = {r["claim"].strip(): r["label"] for r in rows}
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")  # the scripted server takes any key
    model = NLIModel.shared(args.nli_model or default_nli_model())
    out: dict[str, Any] = {"data": Path(args.data).name}
    with tempfile.TemporaryDirectory() as tmp:
        nli = Evaluator(Config(mode="nli", qa=False), nli=model, cache=Cache(Path(tmp) / "nli"))
        out["nli"] = measure(nli, rows)
        with ScriptedLLMServer(route({"claims": whole_answer, "judge": correct_judge(labels)})) as server:
            cache = Cache(Path(tmp) / "cascade")
            provider = get_provider(MODEL, base_url=server.openai_base_url, timeout=60)
            client = LLMClient(provider, cache=cache, retry=RetryPolicy(max_attempts=3, initial_wait=0.01, jitter=0.01))
            config = Config(mode="cascade", llm=MODEL, qa=False)
            out["cascade"] = measure(Evaluator(config, nli=model, client=client, cache=cache), rows)
    print_table(
        ["mode", "rows", "self-supported caught", "not supported", "naive: self-supported", "errors"],
        [
            [m, r["rows"], r["self_supported_caught"], r["not_supported"], r["naive_self_supported"], r["errors"]]
            for m, r in (("nli", out["nli"]), ("cascade", out["cascade"]))
        ],
    )
    out["echoes"] = echoes(claims)
    print(f"echoes blanked ({ECHO_MIN_CHARS}+ characters): " + json.dumps(out["echoes"]))
    out["target_met"] = all(out[m]["self_supported_caught"] == 1.0 for m in ("nli", "cascade"))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
