"""The run's work, from its validated config: every model job kind with its requests and tokens
(:func:`plan`; ``tools/eta.py``).  What an attack sends per candidate is its class's
(``Attack.work``); two targets that send the same requests are counted once
(:func:`ragmi.plan.generation_key`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

# Tokens of a prompt: the chat template's own (role markers, the template's instructions), the query's
# characters at QUERY_CHARS_PER_TOKEN, and each retrieved document's at DOC_CHARS_PER_TOKEN.  Fitted to
# the embedded default's records (Qwen2.5's tokenizer, the dcmi template, the compact synthetic
# conversations: names, numbers and e-mail addresses make 3.2 characters a token): within about 12% of
# every attack's prompt tokens sent, with and without retrieval.
TEMPLATE_TOKENS = 33
QUERY_CHARS_PER_TOKEN = 4.4

# A document's characters when no corpus file is there yet (config/schema.yaml: synthetic lengths).
SYNTHETIC_DOC_CHARS = {"full": 620, "short": 280, "compact": 237}
OTHER_DOC_CHARS = 800  # any other source before its corpus exists: a rough guess, said so


@dataclass
class Doc:
    chars: float  # a typical document of the dataset
    source: str  # where that number comes from


def attack_work(name: str, params: dict, doc: Doc):
    """What attack ``name`` sends per candidate, as its class declares it (``Attack.work``: a
    :class:`ragmi.attacks.work.AttackWork`)."""
    from ragmi.attacks import attack_class

    return attack_class(name).work(params, doc.chars)


def prompt_tokens(query_chars: float, k: int, doc_chars: float) -> float:
    from ragmi.attacks.work import DOC_CHARS_PER_TOKEN  # the attacks' work models use it too

    return TEMPLATE_TOKENS + query_chars / QUERY_CHARS_PER_TOKEN + k * doc_chars / DOC_CHARS_PER_TOKEN


CANARY_QUERY_CHARS = 200  # the canary pools' prompts (fitted: 232 prompt tokens a canary query at k = 2)
UTILITY_QUESTION_CHARS = 60  # the benign questions the targets answer
UTILITY_WRITER_CHARS = 220  # the attacker LLM's instructions around a member document
UTILITY_ANSWER_SHARE = 0.37  # the targets' answers to them: 17.5 of 48 tokens in the default
CANARY_ANSWER_SHARE = 0.8  # 25 of 32
WRITER_ANSWER_SHARE = 0.4  # the question writer: 25 of 64
UTILITY_OVERSAMPLE = 1.5  # ragmi.utility.questions.OVERSAMPLE: documents asked per question wanted


def typical_doc(cfg: dict, dataset: str, root: Path) -> Doc:
    """A dataset's mean document length: from its corpus file once the run has written it, else from
    the config (synthetic lengths), else a rough guess."""
    path = root / "results" / "corpus" / f"{dataset}.parquet"
    if path.is_file():
        try:
            import pyarrow.parquet as pq

            col = pq.read_table(path, columns=["text"]).column("text").to_pylist()
            if col:
                return Doc(sum(len(str(t)) for t in col) / len(col), f"mean of {path.relative_to(root)}")
        except Exception:  # noqa: BLE001 - an unreadable corpus file: the guess below
            pass
    d = cfg["datasets"][dataset]
    source_file = root / d["path"] if d.get("path") else None  # relative to the run's directory
    if source_file is not None and source_file.is_file():  # a local corpus or candidates file
        chars = _mean_chars(source_file, d.get("text_column") or "text")
        if chars:
            cap = d.get("max_chars")
            return Doc(min(chars, cap) if cap else chars, f"mean of {source_file}")
    if d["source"] == "synthetic":
        length = d.get("length") or "full"
        return Doc(SYNTHETIC_DOC_CHARS.get(length, 620), f"synthetic, {length}")
    chars = min(OTHER_DOC_CHARS, d["max_chars"]) if d.get("max_chars") else OTHER_DOC_CHARS
    return Doc(chars, "a guess until its corpus exists")


def _mean_chars(path: Path, column: str) -> float | None:
    """The mean length of a file's text column (parquet, jsonl, json or csv), or None."""
    import pandas as pd

    try:
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            texts = pd.read_parquet(path, columns=[column])[column]
        elif suffix in (".jsonl", ".json"):
            texts = pd.read_json(path, lines=suffix == ".jsonl")[column]
        elif suffix == ".csv":
            texts = pd.read_csv(path, usecols=[column])[column]
        else:
            return None
    except Exception:  # noqa: BLE001 - an unreadable file: the guess instead
        return None
    return float(texts.astype(str).str.len().mean()) if len(texts) else None


@dataclass
class Work:
    """One model job kind of the run: ``jobs`` jobs sending ``requests`` requests in all."""

    kind: str  # attack, canaries, utility answers, utility questions, prepare, defender
    dataset: str
    target: str
    attack: str
    model: str  # the generator's cache identity (ragmi.rag.generators.generator_model_id)
    jobs: int
    requests: float  # requests sent to the model (none when reused or done)
    asked: float  # requests asked (before reuse)
    prompt_tokens: float  # of the requests sent
    answer_tokens: float  # mean answer length of a request
    reused_from: str | None = None  # another target sends the same requests ("done": it did already)
    done: bool = False
    local: bool = True  # a local model (vllm, transformers) whose speed this machine decides
    rough: bool = False
    own: float = 0.0  # distinct requests of its own, done or not (none when another target sends them)
    key: tuple | None = None  # what decides its requests (_gen_key); None: never shared


def _gen_key(cfg: dict, dataset: str, target: str, what: str) -> tuple | None:
    """What decides a target's requests to its model on ``dataset`` for ``what`` (an attack, the utility
    questions, the canaries): two targets with the same key send the same requests
    (:func:`ragmi.plan.generation_key`, which the workflow orders their jobs by).  None: never shared."""
    from ragmi.plan import generation_key

    key = generation_key(cfg, target)
    return None if key is None else (dataset, what, key)


def _shards_done(root: Path, dataset: str, target: str, query_set: str) -> bool:
    shards_dir = root / "results" / "queries" / dataset / f"{query_set}.shards"
    shards = sorted(p.stem for p in shards_dir.glob("*.parquet")) if shards_dir.is_dir() else []
    out = root / "results" / "responses" / dataset / target / query_set
    return bool(shards) and all((out / f"{s}.parquet").is_file() for s in shards)


def _model(cfg: dict, gen_name: str) -> tuple[str, bool]:
    from ragmi.rag.generators import generator_model_id

    g = cfg["generators"][gen_name]
    return generator_model_id(g), g["backend"] in ("vllm", "transformers")


def plan(cfg: dict, root: Path) -> list[Work]:
    """Every model job kind of the run, with its requests and tokens (``tools/eta.py``'s docstring); ``root``: the
    run's folder (its results, logs and response cache count as done)."""
    n_ref, n_eval = int(cfg["split"]["n_reference"]), int(cfg["split"]["n_eval"])
    n_candidates = 2 * n_ref + 2 * n_eval
    shard_size = int(cfg["generation"]["shard_size"])
    docs = {d: typical_doc(cfg, d, root) for d in cfg["datasets"]}
    attacker_model, attacker_local = _model(cfg, cfg["attacker"]["generator"])
    p = _Plan(cfg, root, shard_size, docs, attacker_model, attacker_local)
    _attack_works(p, n_candidates, n_eval)
    _prepare_works(p, n_candidates)
    _canary_works(p)
    _utility_works(p)
    _campaign_works(p)
    # what one target of a key has answered is in the response cache for the others
    done_keys = {w.key for w in p.works if w.done and w.key is not None}
    for w in p.works:
        if not w.done and w.key in done_keys:
            w.requests, w.prompt_tokens, w.reused_from = 0.0, 0.0, "done"
    return p.works


@dataclass
class _Plan:
    """The works of :func:`plan` as they are added, and what adding one reads."""

    cfg: dict
    root: Path
    shard_size: int
    docs: dict[str, Doc]
    attacker_model: str
    attacker_local: bool
    works: list[Work] = field(default_factory=list)
    seen: dict[tuple, str] = field(default_factory=dict)  # generation key -> the target that sends those requests

    def target_work(
        self, kind, dataset, target, what, n_all, n_sent, query_chars, answer, unique=1.0, rough=False, done=False
    ) -> None:
        """A job kind of a target (its requests counted once per generation key)."""
        from ragmi.targets import own_pipeline

        t = self.cfg["targets"][target]
        model, local = _model(self.cfg, t["generator"])
        key = _gen_key(self.cfg, dataset, target, what)
        reused = self.seen.get(key) if key is not None else None
        if key is not None and reused is None:
            self.seen[key] = target
        own = 0.0 if reused else n_sent * unique
        k = 0 if t.get("control") == "no_retrieval" else int(t.get("k") or 0)
        per = prompt_tokens(query_chars, k, self.docs[dataset].chars)
        jobs = max(1, math.ceil(n_all / self.shard_size))
        sent = 0.0 if done else own
        more = dict(reused_from=reused, done=done, local=local and not own_pipeline(t), rough=rough, own=own, key=key)
        self.works.append(Work(kind, dataset, target, what, model, jobs, sent, n_sent, sent * per, answer, **more))

    def attacker_work(self, kind, dataset, what, n, per_prompt, answer, done, rough=False) -> None:
        """A job kind of the attacker LLM."""
        sent = 0.0 if done else n
        more = dict(done=done, local=self.attacker_local, rough=rough, own=n)
        self.works.append(
            Work(
                kind, dataset, "attacker LLM", what, self.attacker_model, 1, sent, n, sent * per_prompt, answer, **more
            )
        )


def _attack_works(p: _Plan, n_candidates: int, n_eval: int) -> None:
    """Every attack's requests on every target (a negative control: the evaluation candidates only)."""
    from ragmi.plan import control_base, runs

    cfg = p.cfg
    for d, t, a in runs(cfg):
        w = attack_work(a, cfg["attacks"][a], p.docs[d])
        n_all = n_candidates * w.queries
        n_sent = 2 * n_eval * w.queries if control_base(cfg, t) else n_all
        done = _shards_done(p.root, d, t, a)
        p.target_work("attack", d, t, a, n_all, n_sent, w.query_chars, w.answer_tokens, w.unique, w.rough, done)


def _prepare_works(p: _Plan, n_candidates: int) -> None:
    """The attacker LLM's preparation (DCMI's LLM perturber, IA's and MEntA's questions and summaries)."""
    from ragmi.plan import runs

    cfg = p.cfg
    for d, a in sorted({(d, a) for d, _, a in runs(cfg)}):
        w = attack_work(a, cfg["attacks"][a], p.docs[d])
        if w.prepare:
            calls, chars, answer = w.prepare
            done = (p.root / "results" / "materials" / d / f"{a}.parquet").is_file()
            per = TEMPLATE_TOKENS + chars / QUERY_CHARS_PER_TOKEN
            p.attacker_work("prepare", d, a, n_candidates * calls, per, answer, done, rough=True)


def _canary_works(p: _Plan) -> None:
    """The canaries: a 50-query pool per seed and canary target, through the target."""
    from ragmi.audit.plan import audited, canary_dataset, canary_seeds, canary_targets

    cfg = p.cfg
    if not audited(cfg):
        return
    try:
        from ragmi.audit.canaries import N_DOCS as n_canaries
    except ImportError:  # pragma: no cover - the module moved
        n_canaries = 50
    cd = canary_dataset(cfg)
    answer = CANARY_ANSWER_SHARE * int(cfg["audit"]["canary_max_tokens"])
    for t in canary_targets(cfg):
        for s in canary_seeds(cfg, t):
            done = (p.root / "results" / "audit" / "canaries" / t / f"{s}.json").is_file()
            p.target_work(
                "canaries", cd, t, f"canaries/{s}", n_canaries, n_canaries, CANARY_QUERY_CHARS, answer, done=done
            )


def _utility_works(p: _Plan) -> None:
    """Utility: the attacker LLM writes the questions (OVERSAMPLE x as many documents asked), the targets answer."""
    from ragmi.attacks.work import DOC_CHARS_PER_TOKEN
    from ragmi.utility.plan import utility_runs

    cfg, root = p.cfg, p.root
    u_runs = utility_runs(cfg)
    n_q = int(cfg["utility"]["n_questions"]) if u_runs else 0
    for d in sorted({d for d, _ in u_runs}):
        done = (root / "results" / "utility" / d / "questions.parquet").is_file()
        per = TEMPLATE_TOKENS + UTILITY_WRITER_CHARS / QUERY_CHARS_PER_TOKEN + p.docs[d].chars / DOC_CHARS_PER_TOKEN
        answer = WRITER_ANSWER_SHARE * int(cfg["utility"]["question_max_tokens"])
        p.attacker_work("utility questions", d, "utility", math.ceil(UTILITY_OVERSAMPLE * n_q), per, answer, done)
    for d, t in u_runs:
        answer = UTILITY_ANSWER_SHARE * int(cfg["utility"]["max_tokens"])
        done = _shards_done(root, d, t, "utility")
        p.target_work("utility answers", d, t, "utility", n_q, n_q, UTILITY_QUESTION_CHARS, answer, done=done)


CAMPAIGN_ANSWER_SHARE = 0.5  # repeat-the-context answers: 0.22 to 0.53 of max_tokens in the default's DGEA rounds


def _campaign_works(p: _Plan) -> None:
    """The adaptive extraction campaigns: ``budget`` queries each, asked in rounds of ``batch``; a round
    waits for its longest answer, so a campaign counts as one job per round. What a query looks like and
    what writing it costs the attacker LLM are the attack's (``AdaptiveAttack.work``)."""
    from ragmi.attacks.adaptive import adaptive_class
    from ragmi.plan import campaign_runs

    cfg = p.cfg
    c = cfg.get("campaigns") or {}
    for d, t, a, s in campaign_runs(cfg):
        query_chars, llm_calls, llm_chars, llm_answer = adaptive_class(a).work(c["attacks"][a])
        done = (p.root / "results" / "campaigns" / d / t / a / f"seed{s}.parquet").is_file()
        n = int(c["budget"])
        rounds = math.ceil(n / int(c["batch"]))
        p.target_work(
            "campaign", d, t, f"{a}/seed{s}", n, n, query_chars, CAMPAIGN_ANSWER_SHARE * c["max_tokens"], done=done
        )
        p.works[-1].jobs = rounds
        if llm_calls:
            per = TEMPLATE_TOKENS + llm_chars / QUERY_CHARS_PER_TOKEN
            p.attacker_work("campaign writer", d, f"{a}/seed{s}", n * llm_calls, per, llm_answer, done, rough=True)
