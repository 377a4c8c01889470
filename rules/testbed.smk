# One testbed (dumbbell) per bottleneck configuration, built and calibrated once.
#
# A testbed whose calibration failed every try writes calibration.json all the same,
# holding the tries, "skipped" (the reason) and "retry": true; its runs are then
# reported as not run and the other testbeds' runs go on. Rerunning the workflow tries
# such a testbed again, and only its runs: see calibration_failures() and run_cal()
# (rules/common.smk).


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
    threads: testbed_threads
    resources:
        # The rate probe sends traffic: never alongside a run on the same dumbbell.
        **TESTBED_RESOURCES,
    params:
        # Grows by one with every failed calibration: the testbed is due again.
        failures=lambda wc: calibration_failures(wc.tb),
    shell:
        # --skip-unavailable: what this kernel lacks, or a calibration that failed
        # every try, is recorded in the output and the workflow goes on.
        "ccbench testbed up --replace --skip-unavailable --matrix {input.matrix:q}"
        " --testbed {wildcards.tb:q} --calibration-out {output:q} > {log:q} 2>&1"
