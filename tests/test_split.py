import pandas as pd
import pytest

from ragmi.errors import DataError
from ragmi.split import split_corpus


def corpus(n):
    return pd.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(n)],
            "text": [f"text number {i}" for i in range(n)],
            "title": [""] * n,
            "human_turn": [""] * n,
        }
    )


def test_sizes_roles_and_disjointness():
    members, nonmembers, candidates, info = split_corpus(corpus(200), 0.8, 10, 15, seed=1)
    assert len(members) == 160 and len(nonmembers) == 40
    assert not set(members["doc_id"]) & set(nonmembers["doc_id"])
    counts = candidates.groupby(["label", "role"]).size().to_dict()
    assert counts == {(0, "eval"): 15, (0, "reference"): 10, (1, "eval"): 15, (1, "reference"): 10}
    assert set(candidates.loc[candidates.label == 1, "doc_id"]) <= set(members["doc_id"])
    assert set(candidates.loc[candidates.label == 0, "doc_id"]) <= set(nonmembers["doc_id"])
    assert not candidates["doc_id"].duplicated().any()  # reference and evaluation are disjoint
    assert info["member_nonmember_text_overlap"] == 0 and not info["capped"]


def test_deterministic_and_seed_dependent():
    a = split_corpus(corpus(100), 0.8, 5, 5, seed=3)[2]
    b = split_corpus(corpus(100), 0.8, 5, 5, seed=3)[2]
    c = split_corpus(corpus(100), 0.8, 5, 5, seed=4)[2]
    pd.testing.assert_frame_equal(a, b)
    assert a["doc_id"].tolist() != c["doc_id"].tolist()


def test_too_few_documents_is_an_error_stating_requested_and_available():
    with pytest.raises(DataError) as e:
        split_corpus(corpus(50), 0.8, 100, 100, seed=0, name="mine")
    msg = str(e.value)
    assert msg.startswith(
        "dataset mine: split.n_reference + split.n_eval ask for 100 + 100 = 200 candidates per class, but the 50 "
        "documents left after cleaning give 40 members and 10 non-members (split.member_fraction 0.8)"
    )
    assert "split.allow_shrink: true" in msg
    # exactly enough is fine
    _, _, candidates, info = split_corpus(corpus(50), 0.8, 4, 6, seed=0)
    assert not info["capped"] and len(candidates) == 20


def test_allow_shrink_caps_by_what_exists():
    _, _, candidates, info = split_corpus(corpus(50), 0.8, 100, 100, seed=0, allow_shrink=True)
    assert info["capped"] and info["n_reference_per_class"] == 5 and info["n_eval_per_class"] == 5
    assert (info["requested_reference_per_class"], info["requested_eval_per_class"]) == (100, 100)
    assert len(candidates) == 20


@pytest.mark.parametrize("n_ref, n_eval, expected", [(6, 10, (2, 2)), (100, 2, (2, 2)), (2, 100, (2, 2))])
def test_shrinking_never_goes_below_two_per_set(n_ref, n_eval, expected):
    # 20 documents, 0.8: 16 members and 4 non-members; the proportional share would give 1 + 3 or 3 + 1
    _, _, candidates, info = split_corpus(corpus(20), 0.8, n_ref, n_eval, seed=0, allow_shrink=True)
    assert (info["n_reference_per_class"], info["n_eval_per_class"]) == expected
    assert candidates.groupby(["label", "role"]).size().tolist() == [2, 2, 2, 2]


def test_shrinking_below_the_minimum_is_an_error():
    # 12 documents, 0.75: 9 members, 3 non-members: 2 + 2 per class is impossible
    with pytest.raises(DataError, match="3 non-members .*even with split.allow_shrink at least 4 per class"):
        split_corpus(corpus(12), 0.75, 2, 2, seed=0, allow_shrink=True)


def test_same_text_in_both_sets_is_an_error():
    df = corpus(40)
    df.loc[:, "text"] = "same"
    with pytest.raises(DataError, match="both member and non-member"):
        split_corpus(df, 0.5, 2, 2, seed=0)


def test_candidates_frame_is_pinned():
    """The split of a fixed corpus and seed never changes (results on disk stay valid)."""
    members, _, candidates, _ = split_corpus(corpus(20), 0.5, 2, 2, seed=7)
    assert list(candidates.columns) == ["doc_id", "text", "title", "human_turn", "label", "role"]
    assert candidates[["doc_id", "label", "role"]].values.tolist() == [
        ["d2", 0, "reference"],
        ["d14", 1, "eval"],
        ["d0", 0, "eval"],
        ["d16", 1, "reference"],
        ["d18", 0, "eval"],
        ["d3", 1, "reference"],
        ["d6", 1, "eval"],
        ["d4", 0, "reference"],
    ]
    assert members["doc_id"].tolist() == ["d3", "d8", "d12", "d13", "d14", "d16", "d10", "d15", "d1", "d6"]


def test_candidates_are_shuffled_not_sorted_by_label():
    """Shards and batches of queries follow the candidates' order: members must not all come first."""
    _, _, candidates, _ = split_corpus(corpus(400), 0.5, 20, 20, seed=11)
    labels = candidates["label"].tolist()
    half = len(labels) // 2
    assert 0 < sum(labels[:half]) < half  # both classes in the first half
    assert 0 < sum(labels[half:]) < half
    # roles are mixed too, and the order is the seed's: same seed, same order; the class sizes hold
    assert set(candidates["role"].iloc[:half]) == {"reference", "eval"}
    again = split_corpus(corpus(400), 0.5, 20, 20, seed=11)[2]
    pd.testing.assert_frame_equal(candidates, again)
    assert candidates.groupby(["label", "role"]).size().tolist() == [20, 20, 20, 20]


def test_candidates_carry_the_human_turn():
    df = corpus(40).assign(human_turn=[f"patient {i}" for i in range(40)])
    members, nonmembers, candidates, _ = split_corpus(df, 0.5, 3, 3, seed=2)
    assert list(candidates.columns) == ["doc_id", "text", "title", "human_turn", "label", "role"]
    assert (candidates["human_turn"] == "patient " + candidates["doc_id"].str[1:]).all()
    assert "human_turn" in members and "human_turn" in nonmembers


def test_a_corpus_without_the_corpus_columns_is_refused():
    with pytest.raises(DataError, match="human_turn"):
        split_corpus(corpus(40).drop(columns="human_turn"), 0.5, 3, 3, seed=2, name="old")


def test_attacks_see_the_candidates_without_labels_and_with_the_human_turn():
    from ragmi.attacks.base import attack_candidates

    df = corpus(40).assign(human_turn="turn")
    candidates = split_corpus(df, 0.5, 3, 3, seed=2)[2]
    seen = attack_candidates(candidates)
    assert list(seen.columns) == ["doc_id", "text", "title", "human_turn"]
    assert (seen["human_turn"] == "turn").all()
    with pytest.raises(ValueError, match="human_turn"):
        attack_candidates(candidates.drop(columns="human_turn"))


def test_shrinking_keeps_as_many_reference_documents_as_the_cv_folds():
    # 50 documents, 0.8: 40 members, 10 non-members; proportional would give 5 + 5
    _, _, candidates, info = split_corpus(
        corpus(50), 0.8, 100, 100, seed=0, allow_shrink=True, floor=(6, "attacks.x.cv_folds")
    )
    assert (info["n_reference_per_class"], info["n_eval_per_class"]) == (6, 4)
    # 20 documents: 4 non-members cannot hold 4 reference + 2 evaluation
    with pytest.raises(DataError, match=r"at least 6 per class .*\(4 reference \(attacks.rag_mia.cv_folds is 4\) \+ 2"):
        split_corpus(
            corpus(20),
            0.8,
            6,
            10,
            seed=0,
            allow_shrink=True,
            floor=(4, "attacks.rag_mia.cv_folds"),
        )


def test_candidates_file_roles_need_as_many_reference_documents_as_the_cv_folds():
    from ragmi.split import split_labelled

    df = corpus(16).assign(label=[1] * 8 + [0] * 8, role=(["reference"] * 3 + ["eval"] * 5) * 2)
    _, _, candidates, info = split_labelled(df, 4, 4, seed=0, floor=(3, "attacks.a.cv_folds"))
    assert info["n_reference_per_class"] == 3
    with pytest.raises(DataError, match=r"has 3 reference members, but attacks.a.cv_folds is 4"):
        split_labelled(df, 4, 4, seed=0, floor=(4, "attacks.a.cv_folds"))
