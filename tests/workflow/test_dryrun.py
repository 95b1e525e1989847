"""`snakemake -n` and `--lint` on both shipped configs, through a real subprocess."""

import os
import re
import subprocess
import sys


from kernelsweep.study.matrix import REPO_ROOT

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def run(args, cwd=REPO_ROOT, env_extra=None):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env_extra or {})}
    return subprocess.run(SNAKEMAKE + args, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[-1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def test_demo_dry_run_lists_every_stage(tmp_path):
    proc = run(["-n", "--config", f"results={tmp_path}/results"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    counts = job_counts(proc.stdout)
    tasks = counts["tasks"]
    assert tasks == 2  # L0-001 and L0-003: the demo's 15-minute budget (config/config.yaml)
    # feedback runs between agentic turns; the demo's agentic method has one turn (the paper study has it)
    for rule in ("generate_n1", "generate_n2", "compile_n1", "compile_n2", "evaluate_n1", "evaluate_n2", "final",
                 "report", "baseline", "profile", "analyze", "research"):
        assert counts.get(rule, 0) > 0, (rule, counts)
    # the embedded model is prepared once per checkout: planned only while its checkpoint is absent
    prepared = (REPO_ROOT / "models" / "gemma3-270m" / ".kernelsweep-prepared").exists()
    assert counts.get("prepare_model", 0) == (0 if prepared else 1), counts
    # the model's preparation and its calls go first: they are the run's long pole
    jobs = {m.group(1): m.group(2) for m in re.finditer(r"^rule (\w+):\n((?:    .*\n)+)", proc.stdout, re.M)}
    if not prepared:
        assert "priority: 100" in jobs["prepare_model"]
    assert all("priority: 10" in jobs[rule] for rule in ("generate_n1", "generate_n2", "analyze", "research", "react"))
    assert "priority" not in jobs["evaluate_n1"]
    # two rows (gemma270m and the recorded responses), each: one evaluation job per turn,
    # zero_shot + guided: 1 turn of 1 candidate; iterative: 2 turns of 1; agentic: 1 turn of 2 candidates
    assert counts["evaluate_n1"] == 2 * tasks * (1 + 1 + 2) and counts["evaluate_n2"] == 2 * tasks * 1
    assert counts["generate_n1"] == 2 * tasks * (1 + 1 + 2) and counts["generate_n2"] == 2 * tasks * 1
    assert "feedback" not in counts
    assert counts["final"] == 2 * 4 * tasks  # 2 rows x 4 methods x tasks x 1 sample (react: its own rule)
    assert counts["react"] == 2 * tasks
    assert counts["report"] == 1


def test_paper_dry_run_plans_full_study_without_network(tmp_path):
    proc = run(["-n", "--configfile", "config/paper.yaml", "--config", f"results={tmp_path}/results"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    counts = job_counts(proc.stdout)
    assert counts["tasks"] == 30
    assert counts["final"] == 30 * 11  # 4 methods + 7 ablations
    assert "prepare_model" not in counts  # the demo's model is not inherited
    assert counts["baseline"] == 30 and counts["report"] == 1
    assert counts["feedback"] > 0 and counts["analyze"] > 0 and counts["research"] > 0
    # one evaluation job per turn: turns x candidates of every method, summed, are
    # 1 + 1 + 3 + 3*4*4 (agentic, no_*) + 1*4 + 3*(1+2+8) evaluations per task
    evaluations = sum(n * counts[f"evaluate_n{n}"] for n in (1, 2, 4, 8))
    assert evaluations == 30 * (1 + 1 + 3 + 4 * 12 + 4 + 3 * 11)
    assert counts["evaluate_n4"] == 30 * (4 * 3 + 1) and counts["evaluate_n1"] == 30 * (1 + 1 + 3 + 3)


def test_timing_devices_reach_every_timed_job(tmp_path):
    import yaml

    config = yaml.safe_load((REPO_ROOT / "config/config.yaml").read_text())
    config.update(device="cuda", timing_devices=[1, 2], results=f"{tmp_path}/results")
    path = tmp_path / "cuda.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = run(["-n", "-p", "--configfile", str(path)])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    timed = [line for line in proc.stdout.splitlines()
             if "kernelsweep gpu-slots run" in line or "kernelsweep evaluate-turn" in line]
    counts = job_counts(proc.stdout)
    assert len(timed) == counts["evaluate_n1"] + counts["evaluate_n2"] + counts["profile"] + counts["baseline"]
    # an evaluation job passes them on to `gpu-slots run`, once per candidate (--slots)
    assert all(re.search(r"--gpus auto --devices 1,2'? --", line) for line in timed), timed


def test_invalid_config_stops_before_any_job(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("device: gpu\ntasks: {source: demo, levels: [0]}\nmodels: {m: {backend: replay, path: x}}\n"
                   "methods: {z: {strategy: zero_shot}}\n")
    proc = run(["-n", "--configfile", str(bad)])
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "config key 'device'" in output and "'cpu', 'cuda'" in output
    assert "Traceback" not in output


def test_lint_is_clean():
    proc = run(["--lint"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr
