# One job per run, chained in the seeded order of its testbed (rules/common.smk).


rule run:
    input:
        matrix=run_matrix,
        cal=run_cal,
        prev=previous_run,
    output:
        f"{RESULTS}/runs/{{run}}/attempts.json",
    log:
        f"{RESULTS}/logs/run/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/run/{{run}}.tsv"
    conda:
        "../envs/ccbench.yaml"
    resources:
        **RUN_RESOURCES,
    params:
        out=lambda wc, output: os.path.dirname(output[0]),
        kernel_check=kernel_check,
    shell:
        "ccbench run --matrix {input.matrix:q} --run-id {wildcards.run:q}"
        " --out {params.out:q} --calibration {input.cal:q} --keep-testbed --raw-only"
        " > {log:q} 2>&1"


rule parse:
    input:
        f"{RESULTS}/runs/{{run}}/attempts.json",
    output:
        summary=f"{RESULTS}/runs/{{run}}/summary.json",
        timeseries=f"{RESULTS}/runs/{{run}}/timeseries.parquet",
    log:
        f"{RESULTS}/logs/parse/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/parse/{{run}}.tsv"
    conda:
        "../envs/ccbench.yaml"
    resources:
        **PARSE_RESOURCES,
    params:
        out=lambda wc, input: os.path.dirname(input[0]),
    shell:
        "ccbench parse --nice {params.out:q} > {log:q} 2>&1"
