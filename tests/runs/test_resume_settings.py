"""--resume under other settings: refused before any call and before OUT is touched, naming each setting that differs
(the Ray engine's side: tests/runs/test_ray.py). A legit resume (the same command) goes on as before."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.config import Config
from groundjudge.errors import ConfigError
from groundjudge.io.made_with import LATER_KEYS, MadeWith, differences, settings_differ
from groundjudge.runs import score_file
from groundjudge.runs.out import Existing, Pending, classify
from groundjudge.testing import ScriptedLLMServer, route
from tests.conftest import SHARED_MODEL
from tests.pipeline.test_pipeline import HANDLERS
from tests.runs.test_resume import ROWS, flat, reports, score, write_rows


@pytest.fixture(autouse=True)
def tiny_env(monkeypatch: pytest.MonkeyPatch, tiny_nli: Path) -> None:
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(tiny_nli))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(route(HANDLERS)) as s:
        yield s


def started(tmp_path: Path, *settings: str) -> tuple[Path, Path, bytes]:
    """An OUT holding the reports of the first three rows (a run stopped there) and the input of all six."""
    out = tmp_path / "out.jsonl"
    first = score(tmp_path, write_rows(tmp_path / "first.jsonl", ROWS[:3]), out, *settings)
    assert first.exit_code == 0, first.output
    return write_rows(tmp_path / "in.jsonl", ROWS), out, out.read_bytes()


def test_a_resume_under_other_settings_is_refused_before_any_call_and_out_is_left_as_it_was(
    tmp_path: Path, server: ScriptedLLMServer
) -> None:
    # A cascade run stopped by its budget, resumed without --llm (nli mode), under another preset, another NLI model
    # or another judge: each appended reports of another kind of run to OUT, without a word.
    llm = ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--no-qa"]
    data, out, before = started(tmp_path, *llm)
    paid = len(server.requests)
    research = [*llm, "--resume", "--preset", "research"]
    cases = {
        "mode: cascade in OUT, nli in this run": ["--resume"],
        "verdict: min_grounded=0.7 warn=0.85 max_contradicted=0.1 preset=default weights=": research,
        "nli_model: ": [*llm, "--resume", "--nli-model", str(SHARED_MODEL)],
        "llm: openai/gpt-4o-mini in OUT, openai/gpt-4o in this run": [
            *[x if x != "openai/gpt-4o-mini" else "openai/gpt-4o" for x in llm],
            "--resume",
        ],
        "prompt.claims_qa: (none) in OUT": [*llm[:-1], "--resume", "--retry-errors"],  # --qa: other prompts
    }
    for said, flags in cases.items():
        result = score(tmp_path, data, out, *flags)
        text = flat(result.output)
        assert result.exit_code == 2, (flags, result.output)
        assert said in text and "3 of its reports (the first on line 1)" in text, (said, text)
        assert "Rerun with the settings OUT was made with" in text and "write this run to a new OUT" in text
        assert out.read_bytes() == before and len(server.requests) == paid, flags  # no call, OUT untouched
    assert not list(tmp_path.glob("out.jsonl?*"))  # no .damaged, no .spent.json, no temporary file
    # the same command goes on, and the file is one run's
    result = score(tmp_path, data, out, *llm, "--resume")
    assert result.exit_code == 0, result.output
    got = reports(out)
    assert [r["id"] for r in got] == [r["id"] for r in ROWS] and len({json.dumps(r["versions"]) for r in got}) == 1


def test_the_python_run_refuses_the_same_way(tmp_path: Path) -> None:
    data, out, before = started(tmp_path, "--preset", "support-bot")
    cache = str(tmp_path / "c")
    with pytest.raises(ConfigError, match=r"preset=support-bot .* in OUT, .*preset=default .* in this run"):
        score_file(data, out, Config.make(cache_dir=cache), resume=True)
    with pytest.raises(ConfigError, match="preset=support-bot"):
        score_file(data, out, Config.make(cache_dir=cache), resume=True, retry_errors=True)
    assert out.read_bytes() == before
    result = score_file(data, out, Config.make(cache_dir=cache, preset="support-bot"), resume=True)
    assert result.summary.n == 3 and [r["id"] for r in reports(out)] == [r["id"] for r in ROWS]


def test_reports_without_versions_are_compared_on_their_mode_and_retried_ones_not_at_all(tmp_path: Path) -> None:
    # An ERROR report of an answer that failed before it was scored (a bad row) has no versions: its mode is all
    # it says. Kept, it must be of this run's mode; replaced (--retry-errors), it is not compared.
    rows = [ROWS[0], {"id": "bad", "contexts": [], "answer": "x"}]
    out = tmp_path / "out.jsonl"
    assert score(tmp_path, write_rows(tmp_path / "first.jsonl", rows), out).exit_code == 1
    out.write_text(out.read_text().splitlines(keepends=True)[1])  # only the bad row's ERROR report: no versions
    assert reports(out)[0]["versions"] == {} and reports(out)[0]["mode"] == "nli"
    data = write_rows(tmp_path / "in.jsonl", [ROWS[0], {**ROWS[1], "id": "bad"}])
    with ScriptedLLMServer(route(HANDLERS)) as server:
        llm = ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--no-qa"]
        refused = score(tmp_path, data, out, *llm, "--resume")
        assert refused.exit_code == 2 and "mode: nli in OUT, cascade in this run" in flat(refused.output)
        assert server.requests == []
        retried = score(tmp_path, data, out, *llm, "--resume", "--retry-errors")  # the ERROR report is replaced
        assert retried.exit_code == 0, retried.output
    got = reports(out)
    assert [r["id"] for r in got] == ["r0", "bad"] and {r["mode"] for r in got} == {"cascade"}
    # nli mode again: an nli run's ERROR report is kept by a plain resume of the same settings
    assert score(tmp_path, data, tmp_path / "nli.jsonl").exit_code == 0


def test_an_older_file_is_compared_on_what_it_records_and_the_device_is_not_a_setting(tmp_path: Path) -> None:
    data, out, _ = started(tmp_path)
    lines = []
    for report in reports(out):  # as written before versions.evidence and versions.verdict, elsewhere
        report["versions"].pop("verdict"), report["versions"].pop("evidence")
        weights, _, _ = report["versions"]["nli_model"].rpartition("/")
        report["versions"]["nli_model"] = f"{weights}/mps-bfloat16"  # not this machine's, whatever it has
        lines.append(json.dumps(report) + "\n")
    out.write_text("".join(lines))
    result = score(tmp_path, data, out, "--resume")
    text = flat(result.output)
    assert result.exit_code == 0, result.output
    assert ": resumed; not compared: " in text
    assert "versions.verdict (its reports were written before groundjudge recorded it)" in text
    assert "versions.evidence" in text and "device and precision (mps-bfloat16 in OUT, " in text
    assert len(reports(out)) == 6
    # what it records is still compared
    hostile = reports(out)[0]
    hostile["versions"]["thresholds"] = "support>=0.1 \x1b[2J"  # a file anyone may have written: shown escaped
    out.write_text(json.dumps(hostile) + "\n")
    refused = score(tmp_path, data, out, "--resume")
    assert refused.exit_code == 2 and '"support>=0.1 \\u001b[2J" in OUT' in refused.output
    assert "\x1b" not in refused.output


def test_differences_name_each_key_once_with_none_for_a_missing_one() -> None:
    old = MadeWith.of("cascade", {"llm": "openai/a", "prompt.claims": "3", "nli_model": "m@1/nli/cpu-float32"})
    now = MadeWith.of("cascade", {"llm": "openai/b", "nli_model": "m@2/nli/cpu-float32", "verdict": "v"})
    diffs, why = differences(old, now)
    assert diffs == [
        ("llm", "openai/a", "openai/b"),
        ("nli_model", "m@1/nli/cpu-float32", "m@2/nli/cpu-float32"),
        ("prompt.claims", "3", "(none)"),
    ]
    assert why == ["versions.verdict (its reports were written before groundjudge recorded it)"]
    assert differences(MadeWith.of("nli", {}), now) == ([("mode", "nli", "cascade")], [])
    assert differences(MadeWith.of("cascade", {}), now) == ([], [])


def test_a_hostile_key_in_outs_versions_is_shown_escaped_and_odd_values_never_crash() -> None:
    # OUT is a file anyone may have written: a key of its versions this run does not have is named in the refusal
    # (with "(none)" for this run), and was printed as it stood, control characters and all.
    now = MadeWith.of("nli", {"nli_model": "m@1/nli/cpu-float32"})
    odd = {"nli_model": "m@1/nli/cpu-float32", "evil\x1b[2J\nkey": "x", "n": 3, "d": {"a": [1]}, "z": None}
    old = MadeWith.of("nli", odd)  # as classify reads any JSON value: str() of it
    existing = Existing(made_with={"r0": old}, first_line={old: 1})
    pending = Pending(existing=existing, retry=set(), skip={"r0"}, rows=iter(()), resume=True)
    with pytest.raises(ConfigError) as refused:
        pending.check_made_with(lambda: now)
    text = str(refused.value)
    assert '"evil\\u001b[2J\\nkey": x in OUT, (none) in this run' in text
    assert "\x1b" not in text and "evil\x1b" not in text
    assert "n: 3 in OUT" in text and "z: None in OUT" in text
    # a huge key is cut like a value; a thousand keys are not a thousand lines
    many = MadeWith.of("nli", {**odd, "k" * 5000: "v", **{f"junk{i}": "v" for i in range(1000)}})
    pending.existing = Existing(made_with={"r0": many}, first_line={many: 1})
    with pytest.raises(ConfigError) as refused:
        pending.check_made_with(lambda: now)
    text = str(refused.value)
    assert "k" * 301 not in text and len(text.splitlines()) < 30 and "and 995 more" in text, text
    # a report whose versions are no object (a list, a string) is compared on its mode alone
    for versions in ([1, 2], "x" * 10_000, 7):
        line = classify(json.dumps({"id": "r", "verdict": "PASS", "mode": "nli", "versions": versions}).encode())
        assert line.made_with == MadeWith.of("nli", {})


def test_a_dry_run_of_a_resume_under_other_settings_is_refused_as_the_run_would_be(tmp_path: Path) -> None:
    # --dry-run --resume priced the rows left under settings the real resume refuses, and said nothing of it.
    data, out, before = started(tmp_path, "--preset", "support-bot")
    refused = score(tmp_path, data, out, "--resume", "--dry-run")
    assert refused.exit_code == 2, refused.output
    assert "preset=support-bot" in flat(refused.output) and "Nothing was scored" in flat(refused.output)
    assert out.read_bytes() == before
    priced = score(tmp_path, data, out, "--resume", "--dry-run", "--preset", "support-bot", "--json")
    assert priced.exit_code == 0, priced.output
    assert json.loads(priced.stdout.splitlines()[0])["rows"] == 3 and out.read_bytes() == before
    # a dry run without --resume prices every row, whatever OUT holds
    assert score(tmp_path, data, out, "--dry-run").exit_code == 0


def test_a_refusal_over_failed_reports_only_points_to_retry_errors(tmp_path: Path) -> None:
    # OUT holding only failed reports (a judge's model name mistyped: every row ERROR) resumed after the fix without
    # --retry-errors: refused, and the message named only "rerun with OUT's settings" (the typo) or a new OUT.
    old = MadeWith.of("cascade", {"llm": "openai/gpt-4o-mni"})
    now = MadeWith.of("cascade", {"llm": "openai/gpt-4o-mini"})
    existing = Existing(made_with={"r0": old, "r1": old}, first_line={old: 1}, failed={"r0", "r1"})
    pending = Pending(existing=existing, retry=set(), skip={"r0", "r1"}, rows=iter(()), resume=True)
    with pytest.raises(ConfigError, match=r"All 2 of them failed: --retry-errors scores them again"):
        pending.check_made_with(lambda: now)
    pending.existing.failed = {"r0"}  # one kept report that did not fail: no such hint
    with pytest.raises(ConfigError) as refused:
        pending.check_made_with(lambda: now)
    assert "--retry-errors" not in str(refused.value)


def test_a_refused_resume_names_the_options_that_give_outs_settings(tmp_path: Path, server: ScriptedLLMServer) -> None:
    """The refusal named each differing versions key ('reasoning_effort: high in OUT, (none) in this run', 'verdict:
    ... preset=support-bot ...') but not the option that sets it: the user had to know that versions.verdict's
    preset is --preset, that a missing llm is --llm. Each is now said as an option, with OUT's value."""
    llm = ["--llm", "openai/o4-mini", "--base-url", server.openai_base_url, "--no-qa"]
    data, out, before = started(tmp_path, *llm, "--reasoning-effort", "high", "--preset", "support-bot")
    refused = score(tmp_path, data, out, *llm, "--resume", "--citation-style", "numeric")
    text = flat(refused.output)
    assert refused.exit_code == 2, refused.output
    assert "reasoning_effort: high in OUT, (none) in this run" in text, text
    assert "As options of this command: " in text, text
    said = text.split("As options of this command: ", 1)[1]
    for option in ("--preset support-bot", "--citation-style auto", "--reasoning-effort high"):
        assert option in said, (option, said)
    assert "preset=support-bot" in text and "reasoning_effort=high" in text  # the Python caller's: the fields
    # without --llm: the mode and the judge OUT's reports were made with
    refused = score(tmp_path, data, out, "--resume")
    said = flat(refused.output).split("As options of this command: ", 1)[1]
    assert "--mode cascade" in said and "--llm openai/o4-mini" in said, said
    assert out.read_bytes() == before
    # following the advice, the resume goes on
    result = score(tmp_path, data, out, *llm, "--resume", "--reasoning-effort", "high", "--preset", "support-bot")
    assert result.exit_code == 0, result.output


def test_a_resume_against_another_server_is_refused_and_says_which_option_gives_outs(
    tmp_path: Path, server: ScriptedLLMServer
) -> None:
    """The reports named the judge (versions.llm) but not the server that answered as it: OUT scored against one
    server (a local vLLM, a proxy) was resumed against another serving a model of the same name, and the file mixed
    two judges' verdicts without a word; compare and the pytest gate gated such runs. The server is a setting now."""
    llm = ["--llm", "openai/gpt-4o-mini", "--no-qa"]
    data, out, before = started(tmp_path, *llm, "--base-url", server.openai_base_url)
    assert {r["versions"]["llm_server"] for r in reports(out)} == {server.openai_base_url}
    with ScriptedLLMServer(route(HANDLERS)) as other:
        refused = score(tmp_path, data, out, *llm, "--base-url", other.openai_base_url, "--resume")
        text = flat(refused.output)
        assert refused.exit_code == 2, refused.output
        said = f"llm_server: {server.openai_base_url} in OUT, {other.openai_base_url} in this run"
        assert said in text and "--base-url as OUT's run gave it" in text, text
        assert "or else OPENAI_BASE_URL or ANTHROPIC_BASE_URL in the environment" in text, (
            text
        )  # set without --base-url
        assert out.read_bytes() == before and not other.requests
    # the same server goes on (a trailing slash is the same address)
    result = score(tmp_path, data, out, *llm, "--base-url", server.openai_base_url + "/", "--resume")
    assert result.exit_code == 0, result.output


def test_the_server_a_report_names_keeps_no_user_password_query_or_fragment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from groundjudge import Evaluator
    from groundjudge.llm.base import DEFAULT_SERVER, shown_server

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    url = "HTTPS://alice:s3cret@Proxy.Example.com:8443/v1/?api-key=tok3n#frag"
    second = "http://bob:hunter2@[::1]:11434/v1"
    ev = Evaluator(
        Config.make(
            llm="openai/gpt-4o-mini",
            base_url=url,
            second_judge="openai/gpt-4o",
            second_judge_base_url=second,
            cache_dir=str(tmp_path),
        )
    )
    versions = ev.versions()
    assert versions["llm_server"] == "https://proxy.example.com:8443/v1"
    assert versions["second_judge_server"] == "http://[::1]:11434/v1"
    assert not any(secret in json.dumps(versions) for secret in ("s3cret", "alice", "tok3n", "frag", "hunter2", "bob"))
    # the SDK's own address; one that is no http(s) URL is named by a digest, never as written
    plain = Evaluator(Config.make(llm="openai/gpt-4o-mini", cache_dir=str(tmp_path))).versions()
    assert plain["llm_server"] == DEFAULT_SERVER and "second_judge_server" not in plain
    # the SDKs' own address, given (OPENAI_BASE_URL set to it in one run, not in the other), is no other server
    assert shown_server("https://api.openai.com/v1/") == shown_server("HTTPS://API.ANTHROPIC.COM") == DEFAULT_SERVER
    odd_urls = ("http://h:notaport/v1?key=s3cret", "file:///s3cret", "http://[zz]/s3cret", "http:///s3cret")
    for odd in (*odd_urls, "https://u:1234/s3cret@host/v1"):  # (a password holding "/": read as a port and a path)
        assert shown_server(odd).startswith("unreadable address #") and "s3cret" not in shown_server(odd)
    # an older OUT (without the key) is not compared on it; OUT made at the provider's own server gives --base-url
    assert (
        differences(MadeWith.of("cascade", {"llm": "x"}), MadeWith.of("cascade", {"llm": "x", "llm_server": "u"}))[0]
        == []
    )
    from groundjudge.runs.out import settings_behind

    assert settings_behind("llm_server", DEFAULT_SERVER, "http://h/v1") == {"base_url": "(none)"}
    assert settings_behind("second_judge_server", "http://h/v1", DEFAULT_SERVER) == {"second_judge_base_url": None}


def test_a_password_holding_a_question_mark_or_a_hash_is_never_shown() -> None:
    """A password with "?" or "#" (not percent-encoded) ends the address's host part there: the rest, "@" and the
    host included, read as a query or fragment, and the password's first part as a port, so that
    'https://alice:4711?x@proxy/v1' was shown as 'https://alice:4711' (the user and part of the password)."""
    from groundjudge.llm.base import shown_server

    for url in ("https://alice:4711?x@proxy.example.com/v1", "https://alice:4711#x@proxy.example.com/v1"):
        assert shown_server(url).startswith("unreadable address #") and "alice" not in shown_server(url), url


_KEYS = ("llm", "nli_model", "verdict", "scoring", "prompt.judge", "second_judge", "llm_server")
_VALUES = {"nli_model": ("m@1/nli/cpu-float32", "m@1/nli/cuda-float16", "m@2/nli/cpu-float32")}
_versions = st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(("a", "b")), max_size=len(_KEYS)).flatmap(
    lambda d: st.fixed_dictionaries(
        {k: st.sampled_from(_VALUES[k]) if k in _VALUES else st.just(v) for k, v in d.items()}
    )
)
_run = st.lists(st.tuples(st.sampled_from(("cascade", "nli")), _versions), min_size=1, max_size=3)


def _differs(key: str, x: tuple[str, dict[str, str]], y: tuple[str, dict[str, str]]) -> bool:
    """The rule written out once more, by hand: another mode; a key both name with other values (the NLI model's
    device and precision aside); a key one names and the other lacks, unless groundjudge wrote it only later; never
    the second judge, which moves no score."""
    if key == "mode":
        return x[0] != y[0]
    if key == "second_judge":
        return False
    a, b = x[1].get(key), y[1].get(key)
    if a == b or ((a is None or b is None) and key in LATER_KEYS):
        return False
    return not (key == "nli_model" and a and b and a.rpartition("/")[0] == b.rpartition("/")[0])


@settings(max_examples=300, deadline=None)
@given(_run, _run, st.booleans())
def test_the_gates_refuse_every_pair_of_runs_whose_settings_differ_and_no_other(
    a: list[tuple[str, dict[str, str]]], b: list[tuple[str, dict[str, str]]], worse: bool
) -> None:
    """compare --fail-if-worse and the pytest baseline gate never gate two runs whose reports were made with other
    settings (settings_differ), and refuse no pair made alike; over generated runs, resumed ones (several settings in
    one file) included, against the rule written out by hand. Then the compare gate exits 2 on a difference, 1 on a
    worse B alone, and passes only runs made alike where B is not worse."""
    import typer

    from groundjudge.cli.review import _gate

    def reports(run: list[tuple[str, dict[str, str]]]) -> list[SimpleNamespace]:
        return [SimpleNamespace(mode=m, versions=v) for m, v in run]

    said = settings_differ(reports(a), reports(b))
    expected = {
        key
        for x in a
        for y in b
        if x[1] and y[1]  # a report without versions (failed before it was scored) is not compared
        for key in ("mode", *_KEYS)
        if _differs(key, x, y)
    }
    assert set(said) == expected
    for key, named in said.items():  # the values named are A's and B's, and differ by the rule

        def value(r: tuple[str, dict[str, str]], key: str = key) -> str:
            return r[0] if key == "mode" else r[1].get(key, "(none)")

        assert any(
            named == {"a": value(x), "b": value(y)} and _differs(key, x, y) for x in a for y in b if x[1] and y[1]
        ), (key, named)
    result = {"settings_differ": said, "b_worse": worse, "metrics": {"combined": {}}}  # pairs were compared
    if said or worse:
        with pytest.raises(typer.Exit) as stop:
            _gate(result, (Path("a.jsonl"), Path("b.jsonl")), allow_other_settings=False)
        assert stop.value.exit_code == (2 if said else 1)
    else:
        _gate(result, (Path("a.jsonl"), Path("b.jsonl")), allow_other_settings=False)


def test_settings_differ_of_a_hostile_file_of_thousands_of_distinct_settings_is_linear() -> None:
    """A report file anyone may have written can hold a new ``versions`` on every line. settings_differ compared
    every distinct setting of A with every one of B (4 million pairs here, minutes); it now reads each key's values
    once per side: the same answer."""
    a = [SimpleNamespace(mode="cascade", versions={"llm": f"a{i}", "scoring": "x=1"}) for i in range(2000)]
    b = [SimpleNamespace(mode="cascade", versions={"llm": f"b{i}", "scoring": "x=1"}) for i in range(2000)]
    t0 = time.process_time()
    assert settings_differ(a, b) == {"llm": {"a": "a0", "b": "b0"}}
    assert settings_differ(a, a) == {"llm": {"a": "a0", "b": "a1"}}  # a resumed file of many settings, with itself
    assert time.process_time() - t0 < 10  # the pairwise reading took minutes; a linear one takes milliseconds


def test_settings_differ_of_a_hostile_file_whose_every_report_has_keys_of_its_own_is_linear() -> None:
    """Each report of the file a key of its own: settings_differ read every key of every distinct setting
    (keys x reports: 10,000 keys of 5,000 reports a side took half a minute, 16,000 of 8,000 more than one); it now
    reads each report's own items once."""
    n = 5000
    a = [SimpleNamespace(mode="cascade", versions={f"ka{i}": "1", "scoring": "x=1"}) for i in range(n)]
    b = [SimpleNamespace(mode="cascade", versions={f"kb{i}": "1", "scoring": "x=1"}) for i in range(n)]
    t0 = time.process_time()
    said = settings_differ(a, b)
    assert time.process_time() - t0 < 5
    assert len(said) == 2 * n and said["ka0"] == {"a": "1", "b": "(none)"} and said["kb7"] == {"a": "(none)", "b": "1"}
    late = [SimpleNamespace(mode="cascade", versions={"scoring": "x=1"}), *a[:1]]  # the report before lacks ka0
    assert settings_differ(late, a[:1]) == {"ka0": {"a": "(none)", "b": "1"}}  # named in the reports' order
    assert settings_differ([*a[:1], late[0]], a[:1]) == {"ka0": {"a": "(none)", "b": "1"}}  # one after lacks it
    assert settings_differ(a[:1], late) == {"ka0": {"a": "1", "b": "(none)"}}


def test_ray_workers_ask_the_server_the_driver_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers built their judges from the config alone, so a server set in the driver's environment
    (OPENAI_BASE_URL: a proxy) was read from each worker's own environment: on another machine of the cluster, another
    server, and reports naming it. The driver now pins the server it would ask, the one after '@' and an explicit
    base URL keeping their precedence."""
    ray_engine = pytest.importorskip("groundjudge.runs.ray")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.example:8080/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.example/anthropic")
    pinned = ray_engine._resolved(Config.make(llm="openai/gpt-4o-mini", second_judge="anthropic/claude-haiku-4-5"))
    assert pinned.base_url == "http://proxy.example:8080/v1"
    assert pinned.second_judge_base_url == "http://gateway.example/anthropic"
    from groundjudge.llm.registry import get_provider

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the adapters read the same rule: the server the driver pins
    assert get_provider("openai/gpt-4o-mini").base_url == pinned.base_url
    given = ray_engine._resolved(Config.make(llm="openai/gpt-4o-mini", base_url="http://mine.example/v1"))
    assert given.base_url == "http://mine.example/v1"
    at = ray_engine._resolved(Config.make(llm="openai-compatible/qwen@http://local.example:11434/v1"))
    assert at.base_url in (None, "http://local.example:11434/v1")  # the model's own '@URL', as the workers read it
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert ray_engine._resolved(Config.make(llm="openai/gpt-4o-mini")).base_url is None  # the SDK's own
    assert ray_engine._resolved(Config.make()).base_url is None  # nli mode: no judge
