# ccbench: config -> run matrix -> testbeds -> runs -> tables -> figures -> report.
# Main job: `sudo snakemake --cores 4 all` (optionally --configfile config/<yours>.yaml).


# The default config only when no --configfile is given: a user's file must replace it,
# not be merged into it (a merge would mix the default's scenarios into the user's), and
# an empty one is an error, not the default comparison.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/testbed.smk"
include: "rules/runs.smk"
include: "rules/analysis.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        REPORT_PDF,
        REPORT_HTML,
        f"{RESULTS}/gate.ok",
