# One testbed (dumbbell) per bottleneck configuration, built and calibrated once.


rule testbed_up:
    output:
        f"{RESULTS}/testbeds/{{tb}}/calibration.json",
    log:
        f"{RESULTS}/logs/testbed_up/{{tb}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/testbed_up/{{tb}}.tsv"
    resources:
        # The rate probe sends traffic: never alongside a run on the same dumbbell.
        dumbbell_1=lambda wc: int(MATRIX["testbeds"][wc.tb]["dumbbell"] == 1),
        dumbbell_2=lambda wc: int(MATRIX["testbeds"][wc.tb]["dumbbell"] == 2),
        dumbbell_3=lambda wc: int(MATRIX["testbeds"][wc.tb]["dumbbell"] == 3),
        dumbbell_4=lambda wc: int(MATRIX["testbeds"][wc.tb]["dumbbell"] == 4),
    params:
        spec=lambda wc: json.dumps(MATRIX["testbeds"][wc.tb], sort_keys=True),
    run:
        ccbench(
            [
                "testbed",
                "up",
                "--replace",
                "--skip-unavailable",
                "--spec-json",
                params.spec,
                "--calibration-out",
                output[0],
            ],
            log[0],
        )
