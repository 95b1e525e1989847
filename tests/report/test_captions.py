"""Captions of the Snakemake HTML report: one per table and figure, valid
reStructuredText, and accepted by `snakemake --report` next to the real outputs."""

import json
import subprocess
import sys
from pathlib import Path

import docutils.core
import docutils.utils

from kernelsweep.report.figures import FIGURES

REPO = Path(__file__).resolve().parents[2]
CAPTIONS = REPO / "workflow" / "report"
TABLES = ("headline", "levels", "ablation", "best_of_n", "taxonomy", "per_task")
# output file (under the report folder) -> its caption: what the report rule flags with report()
PAIRS = ({f"tables/{t}.html": f"table_{t}.rst" for t in TABLES}
         | {f"figures/{f}.svg": f"figure_{f}.rst" for f in FIGURES} | {"REPORT.md": "report_document.rst"})


def test_every_table_and_figure_has_a_caption_that_parses():
    for caption in PAIRS.values():
        text = (CAPTIONS / caption).read_text()
        warning = docutils.utils.Reporter.WARNING_LEVEL
        settings = {"report_level": warning, "halt_level": warning}
        docutils.core.publish_doctree(text, settings_overrides=settings)  # raises on any warning
        assert len(text.split()) > 15, caption


SNAKEFILE = """
PAIRS = {pairs!r}
rule all:
    input: [f"out/{{p}}" for p in PAIRS]

rule report:
    output: [report(f"out/{{p}}", caption=f"{captions}/{{c}}", category="Results") for p, c in PAIRS.items()]
    shell: "{python} -m kernelsweep report --results {results} --study {study} --out out"
"""


def test_snakemake_html_report_with_the_captions(small_study, tmp_path):
    results, study, _ = small_study
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(pairs=PAIRS, captions=CAPTIONS, python=sys.executable,
                                                         results=results, study=study))
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(tmp_path)]
    run = subprocess.run(snakemake, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    html = subprocess.run(snakemake + ["--report", "report.html"], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert html.returncode == 0, html.stderr[-3000:]
    page = (tmp_path / "report.html").read_text()
    assert "fast_p" in page and "Best-of-n scaling" in page
    assert json.dumps("headline.html")[1:-1] in page
