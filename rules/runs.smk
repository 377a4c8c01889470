# One job per run; runs on the same dumbbell are serialized by a resource.


rule run:
    input:
        # ancient(): a rebuilt testbed must not make finished runs look stale.
        cal=ancient(
            lambda wc: f"{RESULTS}/testbeds/{testbed_of(wc.run)}/calibration.json"
        ),
        prev=previous_run,
    output:
        f"{RESULTS}/runs/{{run}}/attempts.json",
    log:
        f"{RESULTS}/logs/run/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/run/{{run}}.tsv"
    resources:
        dumbbell_1=lambda wc: int(dumbbell_of(wc.run) == 1),
        dumbbell_2=lambda wc: int(dumbbell_of(wc.run) == 2),
        dumbbell_3=lambda wc: int(dumbbell_of(wc.run) == 3),
        dumbbell_4=lambda wc: int(dumbbell_of(wc.run) == 4),
    params:
        spec=lambda wc: json.dumps(MATRIX["runs"][wc.run]["spec"], sort_keys=True),
        out=lambda wc: f"{RESULTS}/runs/{wc.run}",
    run:
        ccbench(
            [
                "run",
                "--spec-json",
                params.spec,
                "--out",
                params.out,
                "--keep-testbed",
                "--raw-only",
                "--calibration",
                input[0],
            ],
            log[0],
        )


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
    params:
        out=lambda wc: f"{RESULTS}/runs/{wc.run}",
    run:
        # Parsing overlaps the next run; at nice 19 it only gets CPU the run leaves idle.
        ccbench(["parse", "--nice", params.out], log[0])
