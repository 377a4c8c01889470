# One testbed (dumbbell) per bottleneck configuration, built and calibrated once.


rule testbed_up:
    input:
        # ancient(): a rewritten matrix must not rebuild what is already measured.
        matrix=ancient(f"{RESULTS}/matrix.json"),
    output:
        f"{RESULTS}/testbeds/{{tb}}/calibration.json",
    log:
        f"{RESULTS}/logs/testbed_up/{{tb}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/testbed_up/{{tb}}.tsv"
    conda:
        "../envs/ccbench.yaml"
    resources:
        # The rate probe sends traffic: never alongside a run on the same dumbbell.
        dumbbell_1=lambda wc: int(MATRIX["testbeds"][wc.tb]["dumbbell"] == 1),
        dumbbell_2=lambda wc: int(MATRIX["testbeds"][wc.tb]["dumbbell"] == 2),
        dumbbell_3=lambda wc: int(MATRIX["testbeds"][wc.tb]["dumbbell"] == 3),
        dumbbell_4=lambda wc: int(MATRIX["testbeds"][wc.tb]["dumbbell"] == 4),
    shell:
        "ccbench testbed up --replace --skip-unavailable --matrix {input.matrix:q}"
        " --testbed {wildcards.tb:q} --calibration-out {output:q} > {log:q} 2>&1"
