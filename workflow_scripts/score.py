"""Rule score: the attack turns the target's responses into membership scores.

The attack receives only what a real adversary sees: its own queries, the response text and
log-probabilities, and the labels of its *reference* candidates. Retrieved ids and evaluation labels
are withheld.
"""

import pandas as pd

from ragmi.attacker_tools import WorkflowAttackerTools
from ragmi.attacks import get_attack
from ragmi.attacks.base import attack_responses, check_scores, with_skipped
from ragmi.io import atomic_write_parquet
from ragmi.workflow import control_responses, read_responses, run_step


def main(smk, log):
    queries = pd.read_parquet(smk.input.queries)
    candidates = pd.read_parquet(smk.input.candidates)
    responses = read_responses(smk.input.responses)
    if "fit_responses" in smk.input.keys():  # a negative control: the base target's fitted attack, applied
        responses = control_responses(read_responses(smk.input.fit_responses), responses, queries, candidates)
        log("negative control: reference candidates read from the base target's answers (the fitted attack)")
    responses = attack_responses(responses)
    ref = candidates[candidates["role"] == "reference"]
    reference_labels = dict(zip(ref["doc_id"], ref["label"].astype(int)))
    attack = get_attack(
        smk.wildcards.attack, smk.params.attack, seed=smk.params.seed, logprobs=smk.params.logprobs, validated=True
    )
    materials = pd.read_parquet(smk.input.materials) if "materials" in smk.input.keys() else None
    tools = WorkflowAttackerTools(None, None, None, int(smk.params.seed), log)  # local models only
    scores = check_scores(attack.score(queries, responses, reference_labels, materials, tools))
    if attack.skipped_variants:
        log(
            f"NOTE: {len(attack.skipped_variants)} gray-box variant(s) skipped, the target returns no "
            f"log-probabilities: {', '.join(attack.skipped_variants)}"
        )
        scores = with_skipped(scores, attack.skipped_variants)
    atomic_write_parquet(scores, smk.output.scores)
    log(f"{len(scores)} scores over {scores['variant'].nunique()} variant(s)")


run_step(snakemake, main)  # noqa: F821
