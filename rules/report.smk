# Tables + figures -> one PDF and the same content as HTML.


rule report:
    input:
        matrix=f"{RESULTS}/matrix.json",
        tables=rules.aggregate.output,
        figures=f"{RESULTS}/figures/figures.json",
        verdicts=f"{RESULTS}/tables/verdicts.csv",
    output:
        pdf=REPORT_PDF,
        html=REPORT_HTML,
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    run:
        ccbench(
            [
                "report",
                "--matrix",
                input.matrix,
                "--tables",
                f"{RESULTS}/tables",
                "--figures",
                f"{RESULTS}/figures",
                "--runs",
                f"{RESULTS}/runs",
                "--pdf",
                output.pdf,
                "--html",
                output.html,
            ],
            log[0],
        )


rule gate:
    # After the report exists: a failed gated expectation makes snakemake exit non-zero.
    input:
        report=REPORT_PDF,
        verdicts=f"{RESULTS}/tables/verdicts.csv",
    output:
        f"{RESULTS}/gate.ok",
    log:
        f"{RESULTS}/logs/gate.log",
    benchmark:
        f"{RESULTS}/benchmarks/gate.tsv"
    run:
        ccbench(["gate", "--verdicts", input.verdicts, "--ok", output[0]], log[0])
