"""Rule hook_inventory: the active-path audit's hook inventory of one defended target — fire rates of
every declared hook on its trigger probes and on the attack queries — and the run stops when a
declared hook never fires."""

import pandas as pd

from ragmi.audit.inventory import check_inventory, inventory
from ragmi.io import atomic_write_text, write_json
from ragmi.rag.factory import rag_system
from ragmi.workflow import run_step, target_spec


def main(smk, log):
    members = pd.read_parquet(smk.input.members)
    files = list(smk.input.responses)
    responses = (
        pd.concat([pd.read_parquet(f, columns=["hook_trace"]) for f in files], ignore_index=True) if files else None
    )
    spec = target_spec(smk)
    with rag_system(spec, members, log) as rag:
        # a defense calibrated to the attack it faces (CA-DP: the largest T) sees every attack's queries
        calibrated = [d for d in rag.defenses if d.reads_attack_queries]
        frames = {f"probes, as {f}": pd.read_parquet(f, columns=["doc_id"]) for f in getattr(smk.input, "queries", [])}
        for d in calibrated:
            d.see_attack_queries(frames)
        rows, statuses = inventory(spec.name, rag, responses)
    df = pd.DataFrame([r.__dict__ for r in rows])
    df.insert(0, "dataset", smk.wildcards.dataset)
    df["defense_status"] = df["defense"].map(statuses)
    df["logprobs"] = df["defense"].map({d.name: d.logprobs for d in rag.defenses})
    for r in rows:
        log(
            f"{r.defense} ({r.kind}) {r.hook}: {r.status}; probes {r.probe_fire_rate:.2f}, attack queries "
            f"{r.attack_fire_rate:.2f} of {r.attack_n}"
        )
    if smk.params.fail_on_inactive:
        check_inventory(rows, statuses)
    atomic_write_text(df.to_csv(index=False, lineterminator="\n"), smk.output.hooks)
    # What each defense is and did here: its parameters (those a paper leaves untold included, with
    # the value chosen), its vocabulary and its counters over the probes.
    write_json([d.record() for d in rag.defenses], smk.output.defenses)


run_step(snakemake, main)  # noqa: F821
