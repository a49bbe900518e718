"""Aggregation of result cells, summary tables, figures and the HTML report.

This is the only package that uses pandas, seaborn and matplotlib; each module imports them
itself, so importing `schemashift.report` stays light. The modules:

- `load`: finding and reading validated result files (pyarrow), pandas frames for the report
- `aggregate`: merging cell files into the result tables and writing the manifest (pyarrow only)
- `stats`: every interval and test (what each estimates is stated there and in docs/report.md)
- `analysis`: every number the report shows, shared by tables and figures
- `tables` (a package: format, benchmark, training, seed_document), `figures`, `html`: the three
  report parts, each run by its own `schemashift report` command
"""


class ReportError(ValueError):
    """Inputs that cannot be aggregated or reported; the message names the file and the problem."""
