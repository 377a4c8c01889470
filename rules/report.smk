# Tables + figures -> one PDF and the same content as HTML.


rule report:
    input:
        matrix=f"{RESULTS}/matrix.json",
        tables=rules.aggregate.output,
        figures=f"{RESULTS}/figures/figures.json",
    output:
        pdf=REPORT_PDF,
        html=REPORT_HTML,
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    run:
        ccbench(
            ["report", "--matrix", input.matrix, "--tables", f"{RESULTS}/tables",
             "--figures", f"{RESULTS}/figures", "--runs", f"{RESULTS}/runs",
             "--pdf", output.pdf, "--html", output.html],
            log[0],
        )
