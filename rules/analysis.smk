# Every run's summary -> tidy tables (CSV + Parquet) with CIs and deltas -> figures.


rule matrix:
    output:
        f"{RESULTS}/matrix.json",
    log:
        f"{RESULTS}/logs/matrix.log",
    benchmark:
        f"{RESULTS}/benchmarks/matrix.tsv"
    params:
        # Rewritten when the config changes (params trigger); runs use it ancient().
        cfg=json.dumps(config, sort_keys=True),
    run:
        with open(output[0], "w") as fh:
            json.dump(MATRIX, fh, indent=1, sort_keys=True)


rule aggregate:
    input:
        matrix=f"{RESULTS}/matrix.json",
        summaries=expand(f"{RESULTS}/runs/{{run}}/summary.json", run=RUNS),
        timeseries=expand(f"{RESULTS}/runs/{{run}}/timeseries.parquet", run=RUNS),
    output:
        runs=f"{RESULTS}/tables/runs.csv",
        flows=f"{RESULTS}/tables/flows.csv",
        summary=f"{RESULTS}/tables/summary.csv",
        runs_pq=f"{RESULTS}/tables/runs.parquet",
        flows_pq=f"{RESULTS}/tables/flows.parquet",
        summary_pq=f"{RESULTS}/tables/summary.parquet",
    log:
        f"{RESULTS}/logs/aggregate.log",
    benchmark:
        f"{RESULTS}/benchmarks/aggregate.tsv"
    conda:
        "../envs/ccbench.yaml"
    params:
        tables=lambda wc, output: os.path.dirname(output.runs),
    shell:
        "ccbench aggregate --matrix {input.matrix:q} --out {params.tables:q}"
        " {input.summaries:q} > {log:q} 2>&1"


rule figures:
    input:
        matrix=f"{RESULTS}/matrix.json",
        tables=rules.aggregate.output,
        # per-run data the figures read (time series, probe samples): declared, so a
        # re-parsed run remakes them
        summaries=rules.aggregate.input.summaries,
        timeseries=rules.aggregate.input.timeseries,
    output:
        f"{RESULTS}/figures/figures.json",
    log:
        f"{RESULTS}/logs/figures.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures.tsv"
    conda:
        "../envs/ccbench.yaml"
    # one figure per worker process; Snakemake caps it at --cores
    threads: os.cpu_count() or 1
    params:
        tables=lambda wc, input: os.path.dirname(input.tables[0]),
        runs=lambda wc, input: os.path.join(results_of(input.matrix), "runs"),
        out=lambda wc, output: os.path.dirname(output[0]),
    shell:
        "ccbench figures --matrix {input.matrix:q} --tables {params.tables:q}"
        " --runs {params.runs:q} --out {params.out:q} --workers {threads}"
        " > {log:q} 2>&1"


rule verdicts:
    input:
        matrix=f"{RESULTS}/matrix.json",
        summary=f"{RESULTS}/tables/summary.csv",
        runs=f"{RESULTS}/tables/runs.csv",
    output:
        f"{RESULTS}/tables/verdicts.csv",
    log:
        f"{RESULTS}/logs/verdicts.log",
    benchmark:
        f"{RESULTS}/benchmarks/verdicts.tsv"
    conda:
        "../envs/ccbench.yaml"
    params:
        tables=lambda wc, input: os.path.dirname(input.summary),
    shell:
        "ccbench verdicts --matrix {input.matrix:q} --tables {params.tables:q}"
        " --out {output:q} > {log:q} 2>&1"
