from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundjudge.cache import Cache
from groundjudge.config import Config
from groundjudge.llm import Ledger, LLMClient, RetryPolicy, get_provider
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import ScriptedLLMServer

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SHARED_MODEL = SHARED / "models" / "gj-nli-minilm-l6"
FIXTURES = ROOT / "fixtures"

# Nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Ray starts its workers (the actors that score) at nice 15: beside two busy test workers they got the CPU only when
# both were idle, and a Ray test took 5x its time. At nice 0 they take their share. Read by the raylet at ray.init.
os.environ.setdefault("RAY_worker_niceness", "0")
# The tests read what a pipe gets: a FORCE_COLOR in the caller's environment (CI services set it) put rich's colour
# codes in every command's output and failed 59 tests of tests/cli alone. A test of colour sets it itself.
os.environ.pop("FORCE_COLOR", None)
# Under pytest-xdist (pyproject's addopts: -n 2) each worker takes its share of the cores for torch, so that two
# workers do not fight over the same ones; the command-line runs a test starts inherit it. Set before torch loads.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault(
        "OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    )

FAST_RETRY = RetryPolicy(max_attempts=4, max_total_seconds=30, initial_wait=0.01, max_wait=0.05, jitter=0.01)


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-openai-0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-SECRET-anthropic-0123456789")
    monkeypatch.setenv("GROUNDJUDGE_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.delenv("GROUNDJUDGE_PRICES", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as s:
        yield s


@pytest.fixture(scope="module")
def module_server() -> Iterator[ScriptedLLMServer]:
    """One scripted server for all the tests of a module (each test sets its ``script``)."""
    with ScriptedLLMServer() as s:
        yield s


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Cache]:
    c = Cache(tmp_path / "cache")
    yield c
    c.close()


MODELS = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}


def base_url_for(server: ScriptedLLMServer, provider: str) -> str:
    return server.anthropic_base_url if provider == "anthropic" else server.openai_base_url


def make_test_client(
    server: ScriptedLLMServer,
    provider: str = "openai",
    *,
    model: str | None = None,
    cache: Cache | None = None,
    ledger: Ledger | None = None,
    timeout: float = 5.0,
    retry: RetryPolicy = FAST_RETRY,
    sleeps: list[float] | None = None,
    **kw: object,
) -> LLMClient:
    """A real client (real SDK, real HTTP) pointed at the scripted server."""
    prov = get_provider(model or MODELS[provider], base_url=base_url_for(server, provider), timeout=timeout)
    sleep = sleeps.append if sleeps is not None else (lambda s: None)
    return LLMClient(prov, cache=cache, ledger=ledger, retry=retry, sleep=sleep, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session", autouse=True)
def one_tls_context_per_process() -> Iterator[None]:
    """Every LLM provider a test builds makes an SDK client, and each client loads the system's CA bundle into a
    new SSL context (httpcore2's ``default_ssl_context``, used by the openai and anthropic SDKs through httpx2):
    50-60 ms of CPU each, a minute of CPU over the suite. The tests speak plain HTTP to 127.0.0.1
    (``ScriptedLLMServer``) and never use one, so the contexts are built once per process and environment and
    shared (an ``SSLContext`` may be shared by connections). Subprocesses and Ray actors build their own."""
    try:
        import httpcore2
    except ImportError:  # an SDK on another HTTP stack: nothing to share
        yield
        return
    build = httpcore2.default_ssl_context
    built: dict[tuple[Any, ...], Any] = {}

    def shared(*, _trust_env: bool = True) -> Any:
        key = (_trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in built:
            built[key] = build(_trust_env=_trust_env)
        return built[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(httpcore2, "default_ssl_context", shared)
        yield


@pytest.fixture(scope="session")
def shared_nli():  # type: ignore[no-untyped-def]
    """The project's shared NLI model, loaded once for the whole session."""
    from groundjudge.checker.nli import NLIModel

    assert SHARED_MODEL.is_dir(), f"the shared NLI model is missing at {SHARED_MODEL} (see ../shared/models/README.md)"
    return NLIModel.shared(str(SHARED_MODEL))


@pytest.fixture(scope="session")
def tiny_nli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a tiny random NLI model (``groundjudge.testing.tiny_nli_model``, seed 0, entailment / neutral /
    contradiction), built once for the whole session. Read only: a test that writes into a model folder (a head, a
    profile) copies it first (``shutil.copytree``)."""
    from groundjudge.testing import tiny_nli_model

    return tiny_nli_model(tmp_path_factory.mktemp("tiny-nli") / "model", SHARED_MODEL)


def _labels(id2label: dict[int, str]) -> dict[str, Any]:
    """A classifier config's label fields for ``id2label``."""
    return {"num_labels": len(id2label), "id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}


def tiny_modernbert_model(path: Path, corpus: list[str], id2label: dict[int, str]) -> Path:
    """A tiny random ModernBERT token classifier with a byte-level BPE tokenizer that, as ModernBERT's, encodes a
    pair as ``[CLS] A [SEP] B [SEP]`` without token types (LettuceDetect's shape, tiny), saved at ``path``; its
    tokenizer is trained on ``corpus`` and the token checker's template. Returns ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import ModernBertConfig, ModernBertForTokenClassification, PreTrainedTokenizerFast

    from groundjudge.checker.nli import TOKEN_TEMPLATE

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator([*corpus, TOKEN_TEMPLATE], trainer=trainer)
    cls, sep = bpe.token_to_id("[CLS]"), bpe.token_to_id("[SEP]")
    bpe.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "attention_mask"],
    )
    torch.manual_seed(0)
    config = ModernBertConfig(  # lettucedect-base-modernbert-en-v1's shape, tiny
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
        layer_types=["full_attention", "sliding_attention", "full_attention"],
        local_attention=16,  # windows shorter than the pairs, so that a padding bug in local attention shows
        max_position_embeddings=1024,
        initializer_range=0.5,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=cls,
        cls_token_id=cls,
        eos_token_id=sep,
        sep_token_id=sep,
        **_labels(id2label),
    )
    ModernBertForTokenClassification(config).eval().save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def tiny_deberta_model(
    path: Path, corpus: list[str], id2label: dict[int, str], *, vocab_size: int = 1200, initializer_range: float = 0.1
) -> Path:
    """Save a tiny random DeBERTa-v2 classifier (the architecture of the default hub NLI model and of
    MiniCheck-DeBERTa) at ``path``, with a SentencePiece tokenizer trained on ``corpus`` (files in ``path.parent``).
    Returns ``path``."""
    import sentencepiece as spm
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, DebertaV2Tokenizer

    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "corpus.txt").write_text("\n".join(corpus))
    spm.SentencePieceTrainer.train(
        input=str(path.parent / "corpus.txt"),
        model_prefix=str(path.parent / "spm"),
        vocab_size=vocab_size,
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        pad_piece="[PAD]",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        unk_piece="[UNK]",
        minloglevel=2,
    )
    # built from the trained pieces: DebertaV2Tokenizer(vocab_file=...) would silently map every word to [UNK]
    sp = spm.SentencePieceProcessor(model_file=str(path.parent / "spm.model"))
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    tokenizer = DebertaV2Tokenizer(vocab=pieces, unk_id=3)
    torch.manual_seed(0)
    config = DebertaV2Config(  # type: ignore[call-arg]  # num_labels etc. go through **kwargs to PretrainedConfig
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        relative_attention=True,
        position_buckets=256,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        type_vocab_size=0,
        initializer_range=initializer_range,
        **_labels(id2label),
    )
    DebertaV2ForSequenceClassification(config).eval().save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def make_nli_evaluator(nli: Any, tmp_path: Path) -> Evaluator:
    """An nli-mode Evaluator on ``nli`` (a loaded NLIModel) with a fresh cache under ``tmp_path``."""
    return Evaluator(Config(mode="nli"), nli=nli, cache=Cache(tmp_path / "nli-cache"))


@pytest.fixture
def nli_evaluator(shared_nli: Any, tmp_path: Path) -> Evaluator:
    """An nli-mode Evaluator on the shared NLI model with a fresh cache."""
    return make_nli_evaluator(shared_nli, tmp_path)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    """Write ``rows`` as JSON lines (a string row is written as it is, to make a damaged line); returns ``path``."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def sentences_are_claims(req: Any) -> Any:
    """A scripted claims step: each sentence of the ANSWER block is a claim (its own source span)."""
    from groundjudge.testing import Reply, fenced_block

    answer = fenced_block(req, "ANSWER")
    parts = [p.strip() + "." for p in answer.split(".") if p.strip()]
    return Reply.json({"claims": [{"text": p, "source": p} for p in parts]})


def judge_word_for_word(req: Any) -> Any:
    """A scripted correct judge: a claim is SUPPORTED, quoting it, when SOURCE 1 holds it word for word (less its
    final full stop), else UNSUPPORTED."""
    from groundjudge.testing import Reply, claims_in, fenced_block

    source = fenced_block(req, "SOURCE 1")
    verdicts = []
    for cid, text in claims_in(req).items():
        body = text.rstrip(".")
        if body in source:
            verdicts.append({"claim_id": cid, "verdict": "SUPPORTED", "reason": "Stated.",
                             "quotes": [{"source": 1, "text": body}]})  # fmt: skip
        else:
            verdicts.append({"claim_id": cid, "verdict": "UNSUPPORTED", "reason": "Not stated.", "quotes": []})
    return Reply.json({"verdicts": verdicts})


# -- pytest-xdist: what runs where ---------------------------------------------------------------------------------


# The modules that start Ray. In a worker they run one after another, as one unit of work (``RAY_UNIT``), in this
# order, on one local Ray (``local_ray``: ``address="local"``, a namespace of its own, so that two workers or two
# test runs never join one cluster), which goes when the last of them is done (``pytest_runtest_teardown``). The
# engines' property test first: its one actor is kept (``runs.ray.KEEP_ACTORS_S``) for the one-actor tests that open
# test_ray.py. A lock per module keeps two test runs on one machine from running the same module's Ray at once.
RAY_MODULES = (
    "tests/test_benchmarks_ray.py",  # a Ray of its own, in the benchmark's process: before the shared one starts
    "tests/test_engines_property.py",
    "tests/runs/test_ray.py",
)
RAY_UNIT = "tests/ray-modules"
# the workers' environment, set when the cluster starts (runtime_env): the keys the tests' own process gets from
# _keys, and no hub
RAY_ENV = {
    "OPENAI_API_KEY": "sk-test-SECRET-openai-0123456789",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The local Ray the modules of ``RAY_MODULES`` share, started by the first that asks for it: the ``ray`` module."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        import logging
        import uuid

        env = {**RAY_ENV, "GROUNDJUDGE_CACHE_DIR": str(tmp_path_factory.mktemp("worker-default-cache"))}
        ray.init(
            address="local",  # a cluster of its own, never one another worker or test run started
            namespace=f"groundjudge-tests-{uuid.uuid4().hex}",
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=300 * 2**20,
            log_to_driver=False,
            runtime_env={"env_vars": env},
            # no idle workers started ahead for tasks: the tests run actors, and those workers cost 2 s of CPU each
            _system_config={"prestart_worker_first_driver": False},
        )
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # its per-operator stats would drown a failure
    yield ray


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Ray goes once the worker leaves the modules that start it."""
    yield
    if _module(item.nodeid) in RAY_MODULES and (nextitem is None or _module(nextitem.nodeid) not in RAY_MODULES):
        import sys

        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that takes ``shared_nli`` slow; refuse a Ray test in a module ``RAY_MODULES`` does not name;
    put the tests of ``RAY_MODULES`` next to each other in its order (where the first of them was), so that one
    process runs them on one Ray."""
    for item in items:
        if "shared_nli" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("ray") is not None and _module(item.nodeid) not in RAY_MODULES:
            raise pytest.UsageError(f"{item.nodeid} starts Ray: add its module to RAY_MODULES in tests/conftest.py")
    on_ray = [i for i in items if _module(i.nodeid) in RAY_MODULES]
    if on_ray:
        at = next(n for n, i in enumerate(items) if _module(i.nodeid) in RAY_MODULES)
        rest = [i for i in items if _module(i.nodeid) not in RAY_MODULES]
        on_ray.sort(key=lambda i: RAY_MODULES.index(_module(i.nodeid)))  # stable: each module keeps its order
        items[:] = rest[:at] + on_ray + rest[at:]


# The modules that take longest, handed out first (longest first keeps the workers' ends close; xdist on its own
# hands out the modules with the most tests first, which put the Ray modules, few tests each and the longest, last).
FIRST = (
    RAY_UNIT,
    "tests/test_benchmarks.py",
    "tests/test_bad_inputs.py",
    "tests/review/test_stats.py",
    "tests/cli/test_cli.py",
)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Each module in one worker (its module fixtures are built once), the longest (:data:`FIRST`) handed out before
    the others. ``_split_scope`` is xdist's documented hook for the unit of work (LoadFileScheduling overrides it
    too); ``_assign_work_unit`` is where a unit is handed out."""
    from xdist.scheduler import LoadScopeScheduling

    class LongestModulesFirst(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = _module(nodeid)
            return RAY_UNIT if module in RAY_MODULES else module

        def _assign_work_unit(self, node: Any) -> None:
            for scope in reversed(FIRST):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return LongestModulesFirst(config, log)


@pytest.fixture(scope="module", autouse=True)
def one_ray_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold a machine-wide lock, one per module, while a module that starts Ray runs, so that two test runs on one
    machine never run the same module's Ray at once. The operating system lets the lock go when its holder dies."""
    if request.node.nodeid not in RAY_MODULES:
        yield
        return
    import fcntl
    import tempfile

    name = request.node.nodeid.replace("/", "-")
    with open(Path(tempfile.gettempdir()) / f"groundjudge-tests-ray-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# -- the headless browser ------------------------------------------------------------------------------------------


def _browser_paths() -> tuple[str, str] | None:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (chrome, driver) if chrome and driver else None


_FIRST_SIZE: dict[str, int] = {}  # the window size Chromium starts with


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One headless Chromium (selenium) for the test process; modules take it through a ``browser`` fixture that
    calls :func:`fresh_browser`. Missing, it skips the test, and fails it under CI (.ci/run installs it)."""
    paths = _browser_paths()
    if paths is None:
        message = "headless Chromium needed: apt-get install chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs it; a missing browser there is a broken CI, not a skip
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=paths[1]), options=options)
    _FIRST_SIZE.update(driver.get_window_size())
    yield driver
    driver.quit()


def fresh_browser(driver: Any, folder: Path) -> Any:
    """``driver`` as a newly started one is: a blank page, its first window size, no localStorage (which every
    file:// page shares); ``folder`` takes the blank page. Returns ``driver``."""
    blank = folder / "blank.html"
    blank.write_text("<!doctype html><title>blank</title>", encoding="utf-8")
    driver.get(blank.as_uri())
    driver.execute_script("window.localStorage.clear(); window.sessionStorage.clear()")
    driver.delete_all_cookies()
    driver.set_window_size(_FIRST_SIZE["width"], _FIRST_SIZE["height"])
    return driver
