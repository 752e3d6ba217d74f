# Utility of every target (ragmi.utility): the benign question set of each dataset, written once (the
# dataset's own QA pairs, or the attacker LLM's; a checkpoint: the number of shards is known once the
# questions exist), answered by every utility target through rule generate (its query set "utility",
# results/responses/<dataset>/<target>/utility/), then scored per target. The tables are in
# ragmi.report.registry; the file lists come from ragmi.utility.plan.
from ragmi.datasets import QA_SOURCES
from ragmi.utility.plan import QUERY_SET, questions_file


def has_qa_pairs(dataset):
    return config["datasets"][dataset]["source"] in QA_SOURCES


def utility_question_inputs(wc):
    files = {
        "members": f"results/split/{wc.dataset}/members.parquet",
        "candidates": f"results/split/{wc.dataset}/candidates.parquet",
    }
    if not has_qa_pairs(wc.dataset):
        files.update(model_input(attacker_cfg()))
    return files


checkpoint utility_questions:
    input:
        unpack(utility_question_inputs),
    output:
        questions="results/utility/{dataset}/questions.parquet",
        queries=f"results/queries/{{dataset}}/{QUERY_SET}.parquet",
        shards=directory(f"results/queries/{{dataset}}/{QUERY_SET}.shards"),
    params:
        name=lambda wc: wc.dataset,
        dataset=lambda wc: config["datasets"][wc.dataset],
        qa_pairs=lambda wc: has_qa_pairs(wc.dataset),
        # only the keys the questions depend on (headline_variant, targets… rerun no question job)
        utility={
            k: config["utility"][k]
            for k in ("n_questions", "max_tokens", "question_max_tokens", "max_answer_words", "min_answer_support", "seed")
        },
        generator=attacker_cfg(),
        temperature=config["attacker"]["temperature"],
        cache_dir=config["generation"]["cache_dir"],
        server_log=server_log(config["attacker"]["generator"]),
        shard_size=config["generation"]["shard_size"],
    priority: 2
    threads: lambda wc: 1 if has_qa_pairs(wc.dataset) else config["generation"]["threads"]
    resources:
        gpu=lambda wc: 0 if has_qa_pairs(wc.dataset) else local_backend(attacker_cfg()),
        mem_mb=8000,
        runtime=240,
    log:
        "logs/utility/questions/{dataset}.log",
    benchmark:
        "results/benchmarks/utility/questions/{dataset}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/utility_questions.py"


def utility_responses(wc):
    ck = checkpoints.utility_questions.get(dataset=wc.dataset)
    shards = glob_wildcards(os.path.join(ck.output.shards, "{shard}.parquet")).shard
    return [f"results/responses/{wc.dataset}/{wc.target}/{QUERY_SET}/{s}.parquet" for s in sorted(shards)]


def utility_score_inputs(wc):
    files = {"questions": questions_file(wc.dataset), "responses": utility_responses(wc)}
    if target_kind(target_cfg(wc)).reads_split(target_cfg(wc)):
        files["members"] = target_files(wc)["members"]  # the database whose texts the target retrieves
    return files


rule utility_score:
    input:
        unpack(utility_score_inputs),
    output:
        scores="results/utility/{dataset}/{target}/scores.csv",
    log:
        "logs/utility/score/{dataset}/{target}.log",
    benchmark:
        "results/benchmarks/utility/score/{dataset}/{target}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/utility_score.py"
