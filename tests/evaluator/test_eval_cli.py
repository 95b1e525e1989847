"""The three subcommands through the real `kernelsweep` entry point."""

from __future__ import annotations

import json
import subprocess
import sys

from evaluator_paths import CPU, REFERENCES


def kernelsweep(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "kernelsweep", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_eval_prints_and_writes_the_record(build_dir, tmp_path):
    out = tmp_path / "res" / "eval.json"
    p = kernelsweep("eval", REFERENCES / "add.py", CPU / "wrong_output.py", "--device", "cpu", "--trials", "2",
                    "--timing-trials", "5", "--warmup", "1", "--build-dir", build_dir, "--log-dir", tmp_path / "logs",
                    "--out", out)
    assert p.returncode == 0, p.stderr
    printed = json.loads(p.stdout)
    assert printed == json.loads(out.read_text())
    assert printed["category"] == "wrong_output" and printed["schema"] == "kernelsweep/eval/2"
    assert printed["error"]["log"] == str(tmp_path / "logs" / "candidate.log")


def test_eval_harness_problems_exit_2_with_a_message(build_dir, tmp_path):
    p = kernelsweep("eval", REFERENCES / "add.py", tmp_path / "missing.py", "--device", "cpu")
    assert p.returncode == 2 and "cannot read candidate" in p.stderr and p.stdout == ""
    p = kernelsweep("eval", REFERENCES / "add.py", CPU / "pytorch_only.py", "--device", "cpu", "--trials", "0")
    assert p.returncode == 2 and "must be at least 1" in p.stderr
    p = kernelsweep("eval", REFERENCES / "add.py", CPU / "pytorch_only.py", "--device", "cpu",
                    "--equivalence-margin", "1.5")
    assert p.returncode == 2 and "equivalence margin must be in [0, 1)" in p.stderr
    p = kernelsweep("eval", REFERENCES / "broken.py", CPU / "pytorch_only.py", "--device", "cpu",
                    "--trials", "2", "--timing-trials", "5", "--build-dir", build_dir)
    assert p.returncode == 2 and "reference failed" in p.stderr and "Traceback" not in p.stderr


def test_eval_on_a_machine_without_gpu_says_so(build_dir):
    p = kernelsweep("eval", REFERENCES / "add.py", CPU / "pytorch_only.py", "--device", "cuda",
                    "--trials", "2", "--timing-trials", "5", "--build-dir", build_dir)
    if p.returncode == 0:
        return  # a GPU is present: nothing to check here
    assert p.returncode == 2 and "no CUDA device" in p.stderr


def test_compile_cli(build_dir, tmp_path):
    out = tmp_path / "build.json"
    p = kernelsweep("compile", CPU / "cpp_bad_header.py", "--device", "cpu", "--build-dir", build_dir, "--out", out)
    assert p.returncode == 0, p.stderr
    record = json.loads(out.read_text())
    assert record == json.loads(p.stdout)
    assert record["category"] == "hallucinated_api" and record["schema"] == "kernelsweep/build/1"


def test_baseline_cli_records_failures_and_skips(tmp_path):
    out = tmp_path / "baseline.json"
    # Under torch.compile this reference sleeps a minute per call: that mode must fail at
    # its limit while eager is timed, and reduce-overhead is skipped on the CPU.
    p = kernelsweep("baseline", REFERENCES / "compile_sleeps.py", "--device", "cpu",
                    "--modes", "eager,inductor-default,inductor-reduce-overhead", "--timing-trials", "5",
                    "--warmup", "1", "--timeout", "40", "--task", "L0-999", "--log-dir", tmp_path / "logs",
                    "--out", out)
    assert p.returncode == 0, p.stderr
    record = json.loads(out.read_text())
    modes = record["modes"]
    assert record["task"] == "L0-999" and record["device"] == "cpu" and record["device_name"]
    assert modes["eager"]["status"] == "ok" and modes["eager"]["runtime_ms"]["n"] == 5
    assert len(modes["eager"]["runtime_ms"]["samples"]) == 5 and modes["eager"]["error"] is None
    assert modes["inductor-default"]["status"] == "failed" and "time limit" in modes["inductor-default"]["error"]
    assert modes["inductor-reduce-overhead"]["status"] == "skipped" and modes["inductor-reduce-overhead"]["reason"]


def test_baseline_rejects_unknown_modes():
    p = kernelsweep("baseline", REFERENCES / "add.py", "--device", "cpu", "--modes", "eager,turbo")
    assert p.returncode == 2 and "turbo" in p.stderr
    # a claim's name for a baseline is no mode name (models.corpus.MEASURED_BY maps it)
    p = kernelsweep("baseline", REFERENCES / "add.py", "--device", "cpu", "--modes", "eager,torch.compile-default")
    assert p.returncode == 2 and "torch.compile-default" in p.stderr and "cuda-graph" in p.stderr


def test_baseline_accepts_the_graph_and_cudnn_modes(tmp_path):
    p = kernelsweep("baseline", REFERENCES / "add.py", "--device", "cpu", "--modes", "eager,cuda-graph,cudnn-benchmark",
                    "--timing-trials", "3", "--warmup", "0", "--timeout", "120", "--log-dir", tmp_path / "logs")
    assert p.returncode == 0, p.stderr
    modes = json.loads(p.stdout)["modes"]
    assert [m["status"] for m in modes.values()] == ["ok", "skipped", "skipped"], modes
