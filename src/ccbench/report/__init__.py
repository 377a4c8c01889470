"""Figures and the PDF/HTML report from the aggregated tables.

The rule: data reads (tables, time series, each run's summary.json: declared outputs of
aggregate and parse, never raw/); tables and provenance turn what data read into rows;
plots, tsplot and behaviour each draw one family of figures from data frames; figures
and document are the two entry points (the figures rule and the report rule).

- fmt:        the one number formatter (every printed number goes through it)
- style:      variant colours and matplotlib settings shared by all figures
- data:       loading tables, time series and per-scenario conditions
- plots:      summary figures (bars, throughput vs delay, other metrics) and helpers
- tsplot:     the per-variant time-series figure (throughput, cwnd, srtt)
- behaviour:  RTT-under-load CDF (whichever probe tool measured it), Jain's index over time,
              throughput vs loss rate with the Mathis model
- figures:    make_all(): every figure of a results set + figures.json manifest
- tables:     formatted rows of the per-scenario, delta, loss and per-run tables
- checks:     formatted rows of the expectations' verdicts and the published references
- provenance: testbed calibration, host facts, run order, hashes (the appendix)
- document:   build(): one Jinja2 template -> self-contained HTML -> WeasyPrint PDF
"""
