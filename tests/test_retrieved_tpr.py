"""TPR conditional on retrieval (issue 28 item 1): per query whether the candidate's own document was
retrieved (ragmi.costs.query_retrieval), per variant which candidates were retrieved for at least one
of its queries, the TPR at the reference-set threshold over the retrieved evaluation members
(ragmi.metrics.retrieved_tpr) with its Clopper-Pearson interval (as every rate of ragmi.metrics.evaluate),
and the "TPR | retrieved" table cell."""

import math

import numpy as np
import pandas as pd
import pytest
from report_fixtures import md_tables, records

from ragmi.analysis.summary import summary_frame
from ragmi.cells import NOT_AVAILABLE
from ragmi.costs import query_retrieval, retrieved_by_variant
from ragmi.metrics import clopper_pearson, conditional_tpr, evaluate, lowest_resolvable_fpr, retrieved_tpr, wilson
from ragmi.report.summary import summary_markdown
from ragmi.report.tables import markdown_table, retrieved_cell


def test_wilson_known_values():
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = wilson(0, 4)
    assert lo == 0.0 and hi == pytest.approx(0.4899, abs=1e-4)
    assert all(math.isnan(x) for x in wilson(0, 0))


def test_conditional_tpr_counts_only_flagged_members_at_the_threshold():
    c = conditional_tpr([0.9, 0.5, 0.5, 0.1], [True, True, False, True], threshold=0.5)
    assert (c["n"], c["k"]) == (3, 2) and c["tpr"] == pytest.approx(2 / 3)
    assert (c["lo"], c["hi"]) == clopper_pearson(2, 3)
    empty = conditional_tpr([0.9], [False], 0.5)
    assert empty["n"] == 0 and math.isnan(empty["tpr"])
    with pytest.raises(ValueError):
        conditional_tpr([0.9, 0.1], [True], 0.5)


def test_lowest_resolvable_fpr_is_the_summary_level():
    fprs = (0.0, 0.005, 0.01, 0.05)
    assert lowest_resolvable_fpr(fprs, 20) == 0.05
    assert lowest_resolvable_fpr(fprs, 100) == 0.01
    assert lowest_resolvable_fpr(fprs, 8) == 0.0
    assert lowest_resolvable_fpr(fprs, float("nan")) == 0.005
    assert lowest_resolvable_fpr((0.05,), 8) is None


def _scores(n_ref=20, n_eval=10, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for role, n in (("reference", n_ref), ("eval", n_eval)):
        for label in (1, 0):
            for i in range(n):
                rows.append(
                    {
                        "doc_id": f"{role[0]}{label}-{i}",
                        "variant": "a/v",
                        "score": float(rng.normal(1.0 if label else 0.0)),
                        "label": label,
                        "role": role,
                    }
                )
    return pd.DataFrame(rows)


def test_retrieved_tpr_uses_the_reference_threshold_over_retrieved_eval_members():
    df = _scores()
    out = evaluate(df, n_boot=50)
    ev_m = df[(df["role"] == "eval") & (df["label"] == 1)].reset_index(drop=True)
    flags = {d: i % 3 != 0 for i, d in enumerate(ev_m["doc_id"])}  # 6 of 10 retrieved
    flags["r1-0"] = True  # reference members do not count
    res = retrieved_tpr(df, out, {"a/v": flags})
    r = res.iloc[0]
    t = out.loc[0, "threshold_fpr_5"]  # 20 reference non-members resolve 5%
    sel = ev_m[[flags[d] for d in ev_m["doc_id"]]]
    k = int((sel["score"] >= t).sum())
    assert r["tpr_retrieved_fpr"] == 0.05 and r["n_retrieved_members"] == 6
    assert r["tpr_retrieved"] == pytest.approx(k / 6)
    assert (r["tpr_retrieved_lo"], r["tpr_retrieved_hi"]) == pytest.approx(clopper_pearson(k, 6))
    # all retrieved: the same number as the TPR column
    every = retrieved_tpr(df, out, {"a/v": dict.fromkeys(ev_m["doc_id"], True)}).iloc[0]
    assert every["tpr_retrieved"] == pytest.approx(out.loc[0, "tpr_at_fpr_5"])
    # a target that does not say what it retrieved
    assert retrieved_tpr(df, out, {"a/v": None}).iloc[0].isna().all()
    assert retrieved_tpr(df, out, {}).iloc[0].isna().all()


def test_query_retrieval_and_variants():
    queries = pd.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4", "q5"],
            "doc_id": ["a", "a", "b", "c", "d"],
            "ask_order": [0, 1, 0, 0, 0],
        }
    )
    responses = pd.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4", "q5"],
            "retrieved_ids": [["x"], np.array(["a", "y"]), ["b"], None, []],
        }
    )
    f = query_retrieval(queries, responses)
    assert f["candidate_retrieved"].tolist()[:3] == [False, True, True]
    assert f["candidate_retrieved"].isna().tolist() == [False, False, False, True, False]
    scores = pd.DataFrame({"variant": ["m/n=1", "m/n=2"], "doc_id": ["a", "a"]})
    by = retrieved_by_variant(scores, queries, f)
    assert by["m/n=1"] == {"a": False, "b": True, "d": False}  # only the first question of a
    assert by["m/n=2"]["a"] is True and "c" not in by["m/n=2"]
    unknown = query_retrieval(queries, responses.assign(retrieved_ids=None))
    assert retrieved_by_variant(scores, queries, unknown) == {"m/n=1": None, "m/n=2": None}


def _metrics_rows():
    df = _scores()
    out = evaluate(df, n_boot=50)
    ev_m = df[(df["role"] == "eval") & (df["label"] == 1)]
    with_ids = pd.concat([out, retrieved_tpr(df, out, {"a/v": dict.fromkeys(ev_m["doc_id"], True)})], axis=1)
    without = pd.concat([out, retrieved_tpr(df, out, {"a/v": None})], axis=1)
    none_hit = pd.concat([out, retrieved_tpr(df, out, {"a/v": dict.fromkeys(ev_m["doc_id"], False)})], axis=1)
    m = pd.concat(
        [with_ids.assign(target="own"), without.assign(target="remote"), none_hit.assign(target="empty")],
        ignore_index=True,
    )
    m.insert(0, "dataset", "d")
    m.insert(2, "attack", "a")
    return m


def test_markdown_column_cells_and_note():
    m = _metrics_rows()
    md = markdown_table(m, "t")
    tables = md_tables(md)
    rest = tables[-1]  # the column is under "All columns", each row named by its target
    assert rest[0] == "All columns" and "TPR \\| retrieved" in rest[1]
    rows = {r["target"]: r for r in records(rest)}
    own = m[m["target"] == "own"].iloc[0]
    assert rows["own"]["TPR \\| retrieved"] == retrieved_cell(own)
    assert " of 10 retrieved members at the ref. threshold for 5% FPR (eval FPR " in retrieved_cell(own)
    assert retrieved_cell(own).startswith(f"{own['tpr_retrieved']:.2f} [")
    assert rows["remote"]["TPR \\| retrieved"] == NOT_AVAILABLE
    assert rows["empty"]["TPR \\| retrieved"] == "– (0 retrieved members)"
    assert "- TPR \\| retrieved: the TPR of the evaluation members" in md
    # same column count in every row of each table
    for _, header, body in tables:
        assert {len(r) for r in body} == {len(header)}
    # metrics written before the column: no column, no note
    old = markdown_table(m.drop(columns=[c for c in m if "retrieved" in c]), "t")
    assert "retrieved" not in old


def test_retrieved_cell_names_the_threshold_and_the_fpr_it_realised_on_the_eval_nonmembers():
    """The cell is "at x% FPR" only as far as the realised FPR says so: it names the reference threshold and
    the FPR that threshold gave on the evaluation non-members, with its Clopper-Pearson interval and n,
    counted here from the scores themselves."""
    df = _scores(n_ref=20, n_eval=20, seed=3)
    out = evaluate(df, n_boot=20)
    ev = df[df["role"] == "eval"]
    flags = {d: i % 2 == 0 for i, d in enumerate(ev[ev["label"] == 1]["doc_id"])}  # 10 of 20 retrieved
    r = pd.concat([out, retrieved_tpr(df, out, {"a/v": flags})], axis=1).iloc[0]
    t = out.loc[0, "threshold_fpr_5"]
    nonmembers = ev[ev["label"] == 0]["score"]
    fp = int((nonmembers >= t).sum())
    lo, hi = clopper_pearson(fp, len(nonmembers))
    cell = retrieved_cell(r)
    assert cell.startswith(f"{r['tpr_retrieved']:.2f} [{r['tpr_retrieved_lo']:.2f}, {r['tpr_retrieved_hi']:.2f}] ")
    assert cell.endswith(
        f" of 10 retrieved members at the ref. threshold for 5% FPR "
        f"(eval FPR {fp / len(nonmembers):.2f} [{lo:.2f}, {hi:.2f}], n = 20)"
    )
    # a row written without the realised FPR is never read as "at 5% FPR"
    old = r.drop([c for c in r.index if c.startswith("fpr_realized")])
    assert retrieved_cell(old).endswith("(eval FPR not recorded)")


def test_summary_keeps_eight_columns_and_carries_the_numbers_in_its_csv():
    m = _metrics_rows()
    targets = {t: {"control": "none", "defenses": []} for t in ("own", "remote", "empty")}
    s = summary_frame(m, targets)
    own = s[s["target"] == "own"].iloc[0]
    assert own["n_retrieved_members"] == 10
    assert own["tpr_retrieved"] == pytest.approx(own["tpr"])  # every member retrieved: the same TPR
    assert pd.isna(s[s["target"] == "remote"].iloc[0]["n_retrieved_members"])
    header = next(line for line in summary_markdown(s, "t").splitlines() if line.startswith("| target"))
    assert header.count(" | ") + 1 == 8


def test_source_matcher_names_the_members_by_their_store_ids():
    from ragmi.rag.remote import SourceMatcher

    docs = pd.DataFrame({"doc_id": ["a", "b"], "text": ["x", "y"], "title": ["", ""]})
    m = SourceMatcher(docs, "id", aliases={"ragmi-k-a": "a"})
    assert m.retrieved_ids(["ragmi-k-a", "b", "ragmi-k-canary-c", "user-1"]) == [
        "a",
        "b",
        "remote:ragmi-k-canary-c",
        "remote:user-1",
    ]
    assert SourceMatcher(docs, "id").retrieved_ids(["ragmi-k-a"]) == ["remote:ragmi-k-a"]


def test_no_resolvable_level_gives_n_only_and_n_e():
    df = _scores(n_ref=8)
    out = evaluate(df, fprs=(0.05,), n_boot=20)  # 8 reference non-members cannot resolve 5%, no 0 level
    ev_m = df[(df["role"] == "eval") & (df["label"] == 1)]
    res = retrieved_tpr(df, out, {"a/v": dict.fromkeys(ev_m["doc_id"], True)}, fprs=(0.05,))
    r = pd.concat([out, res], axis=1).iloc[0]
    assert r["n_retrieved_members"] == 10 and pd.isna(r["tpr_retrieved"]) and pd.isna(r["tpr_retrieved_fpr"])
    assert retrieved_cell(r) == "n/e"
