"""Every figure renders to PNG and SVG, for real data, for a single cell and for
no data at all (then it says so)."""

from matplotlib.image import imread
from synthetic import AGENTIC, MODEL, ResultsWriter, constant

from kernelsweep.report.collect import collect
from kernelsweep.report.figures import FIGURES, build_figures, save_figure
from kernelsweep.report.spec import parse_study
from kernelsweep.report.tables import build_tables


def render_all(results, spec, out):
    c = collect(results, spec)
    data = {t.name: t.data for t in build_tables(c.cells, c.candidates, spec)}
    svgs = {}
    for name, draw in build_figures(data, c.cells, c.candidates, spec).items():
        png, svg = save_figure(draw(), out, name)
        image = imread(png)
        assert image.shape[0] > 100 and image.shape[1] > 100, name
        svgs[name] = svg.read_text()
    assert set(svgs) == set(FIGURES)
    return svgs


def test_figures_of_the_small_study(small_study, tmp_path):
    results, _, spec = small_study
    svgs = render_all(results, spec, tmp_path / "figures")
    for name, svg in svgs.items():
        assert "no data" not in svg, name
    assert "agentic_n1 (n=2)" in svgs["speedup_cdf"]  # two correct custom kernels
    assert "zero_shot (n=2)" in svgs["success_vs_attempts"]  # two cells with a result
    assert "no result" in svgs["level_heatmap"]  # zero_shot has no level-2 result (missing cell)
    assert "candidates per turn (n)" in svgs["best_of_n"]


def test_figures_without_any_result_say_no_data(small_study, tmp_path):
    _, _, spec = small_study
    (tmp_path / "empty").mkdir()
    svgs = render_all(tmp_path / "empty", spec, tmp_path / "figures")
    for name, svg in svgs.items():
        assert "no data" in svg, name


def test_figures_of_a_single_cell(tmp_path):
    spec = parse_study({"device": "cpu", "models": {MODEL: {"backend": "openai"}}, "methods": {"agentic": AGENTIC},
                        "tasks": [{"id": "L1-001", "level": 1}], "ablation_base": "agentic"})
    w = ResultsWriter(tmp_path / "results")
    w.task("L1-001", 1, "one")
    record = w.candidate(MODEL, "agentic", "L1-001", 0, 0, 0, "correct_faster", constant(2.0), constant(1.0))
    w.final(MODEL, "agentic", "L1-001", 1, 0, best=(0, 0), result=record, candidates_evaluated=1, llm_calls=1)
    svgs = render_all(tmp_path / "results", spec, tmp_path / "figures")
    assert "no data" in svgs["best_of_n"]  # one method: no sweep
    for name in ("speedup_cdf", "success_vs_attempts", "success_vs_tokens", "level_heatmap"):
        assert "no data" not in svgs[name], name


def test_figures_are_byte_identical_when_redrawn(small_study, tmp_path):
    results, _, spec = small_study
    render_all(results, spec, tmp_path / "a")
    render_all(results, spec, tmp_path / "b")
    for name in FIGURES:
        for fmt in ("png", "svg"):
            assert (tmp_path / "a" / f"{name}.{fmt}").read_bytes() == (tmp_path / "b" / f"{name}.{fmt}").read_bytes()
