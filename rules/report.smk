# Tables + figures -> one PDF and the same content as HTML.


rule report:
    input:
        matrix=f"{RESULTS}/matrix.json",
        tables=rules.aggregate.output,
        figures=f"{RESULTS}/figures/figures.json",
        verdicts=f"{RESULTS}/tables/verdicts.csv",
        # per-run provenance (calibration, facts, qdisc) comes from summary.json
        # `recorded`, written by parse: declared here, not read behind Snakemake's back
        summaries=rules.aggregate.input.summaries,
    output:
        pdf=REPORT_PDF,
        html=REPORT_HTML,
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    conda:
        "../envs/ccbench.yaml"
    params:
        tables=lambda wc, input: os.path.dirname(input.tables[0]),
        figures=lambda wc, input: os.path.dirname(input.figures),
        runs=lambda wc, input: os.path.join(results_of(input.matrix), "runs"),
    shell:
        "ccbench report --matrix {input.matrix:q} --tables {params.tables:q}"
        " --figures {params.figures:q} --runs {params.runs:q}"
        " --pdf {output.pdf:q} --html {output.html:q} > {log:q} 2>&1"


rule gate:
    # After the report exists: a failed gated expectation, or no run that could run
    # at all (every testbed failed or lacks what was asked), makes snakemake exit
    # non-zero. Runs reported as not run alone do not.
    input:
        report=REPORT_PDF,
        verdicts=f"{RESULTS}/tables/verdicts.csv",
        runs=f"{RESULTS}/tables/runs.csv",
    output:
        f"{RESULTS}/gate.ok",
    log:
        f"{RESULTS}/logs/gate.log",
    benchmark:
        f"{RESULTS}/benchmarks/gate.tsv"
    conda:
        "../envs/ccbench.yaml"
    shell:
        "ccbench gate --verdicts {input.verdicts:q} --runs {input.runs:q} --ok {output:q}"
        " > {log:q} 2>&1"
