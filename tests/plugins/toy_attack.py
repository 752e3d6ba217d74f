"""TEST-ONLY: a toy membership attack, added to a copy of the workflow the way docs/architecture.md
says an attack is added (this module, one line in ``ragmi.attacks.REGISTRY`` and one schema entry
``attacks.toy``: tests/plugin_tree.py).  It asks whether the candidate's opening words are in the
context and scores "yes" as member.  Its class facts are set so that a test can see each one read:
``out_of_fold`` (the split's fold check), ``model_references`` (the model check) and
``audit_mi_rank`` (the audit's choice of membership attack) and ``work`` (what it sends per candidate,
read by the run's time estimate, tools/eta.py)."""

from __future__ import annotations

import pandas as pd

from .base import Attack, check_queries, merge_responses
from .work import AttackWork


class ToyAttack(Attack):
    name = "toy"
    out_of_fold = True  # reads params["cv_folds"]: ragmi.plan.fold_requirements
    audit_mi_rank = -1  # before every production attack: ragmi.audit.plan.mi_attack

    @classmethod
    def model_references(cls, params):
        return [("proxy", "model")] if params.get("proxy") else []

    @classmethod
    def work(cls, p, doc_chars):
        # one question per candidate quoting its first n_words words (about 6 characters each), "Yes"/"No"
        return AttackWork(1, 52 + 6 * p["n_words"], 2, 4)

    def build_queries(self, candidates, materials=None):
        rows = [
            {
                "query_id": f"{d}::toy",
                "doc_id": d,
                "user_prompt": f"Is this in the context: {' '.join(str(t).split()[: self.params['n_words']])}? "
                "Answer with Yes or No.",
                "max_tokens": 4,
                "top_logprobs": 0,
            }
            for d, t in zip(candidates["doc_id"], candidates["text"])
        ]
        return check_queries(pd.DataFrame(rows))

    def score(self, queries, responses, reference_labels, materials=None, tools=None):
        df = merge_responses(queries, responses)
        yes = df["response_text"].str.strip().str.lower().str.startswith("yes").astype(int)
        return pd.DataFrame({"doc_id": df["doc_id"], "variant": "toy", "score": yes.astype(float), "decision": yes})
