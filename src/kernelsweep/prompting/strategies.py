"""The strategies as one code path. A method is a set of flags (kernelsweep.study.matrix:
profile, competence_rule, turns, n, analyzer, researcher, feedback); this module
turns a role, the method's flags and the files a turn may read into the exact
messages sent to the model. zero_shot, guided, iterative and agentic differ only
in which sections are present."""

from __future__ import annotations

import re
from typing import Any, Mapping

from kernelsweep.study import layout
from kernelsweep.prompting.distill import distill
from kernelsweep.core.fileio import dumps, read_json, sha256_text
from kernelsweep.study.matrix import ROLES
from kernelsweep.prompting.templates import device_note, example_candidate, render

KERNEL_LANGUAGE = {"cuda": "CUDA kernels", "cpu": "C++ kernels"}
QUERY_LINE = re.compile(r"^\s*(?:[-*\d.)\s]*)QUERY:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def _response_text(path: str | None) -> str | None:
    """The raw text of a role's response, or None when the call failed or stopped."""
    if not path:
        return None
    record = read_json(path)
    if record.get("status") != "ok":
        return None
    text = (record.get("raw_text") or "").strip()
    return text or None


def _candidate_code(eval_path: str) -> str:
    path = layout.cand_file(eval_path, layout.CANDIDATE)
    return path.read_text(encoding="utf-8").strip() if path.exists() else ""


def attempt_section(selection: Mapping[str, Any]) -> str:
    """The best attempt so far with its distilled evaluation, or the last failure."""
    best = selection.get("best")
    if best and best.get("eval_path"):
        code = _candidate_code(best["eval_path"])
        if code:
            return render("previous_best.md", best_turn=str(best["turn"]), best_code=code,
                          report=distill(selection["best_eval"]))
    last = selection.get("last_eval") or selection.get("best_eval") or {"category": "no_code"}
    return render("previous_none.md", report=distill(last))


def retrieval_queries(analysis: str | None, reference: str) -> list[str]:
    """The analyzer's QUERY: lines; without an analyzer, the operators the reference uses."""
    if analysis:
        queries = [q for q in QUERY_LINE.findall(analysis) if q]
        if queries:
            return queries[:5]
    ops = re.findall(r"\b(?:nn|F|torch)\.([A-Za-z_][A-Za-z0-9_]*)\s*\(", reference)
    ops = [o for o in dict.fromkeys(ops) if o not in ("Module", "Parameter", "randn", "rand", "zeros", "ones")]
    return [f"custom kernel for {op}" for op in ops[:4]] + ["load_inline cpp_sources functions"]


def _researcher_passages(spec: Mapping[str, Any], queries: list[str]) -> list[dict[str, Any]]:
    from kernelsweep.prompting.retrieval import Corpus, default_corpus_dir

    corpus = Corpus.from_dir(spec.get("corpus") or default_corpus_dir())
    k = int(spec["method"].get("retrieval_k") or 6)
    found: dict[str, dict[str, Any]] = {}
    for query in queries:
        for passage in corpus.search(query, k):
            if passage.tag not in found or found[passage.tag]["score"] < passage.score:
                found[passage.tag] = {"tag": passage.tag, "text": passage.text, "score": float(passage.score), "query": query}
    return sorted(found.values(), key=lambda p: -p["score"])[:k]


def sampling_params(spec: Mapping[str, Any], role: str) -> dict[str, Any]:
    method, model = spec["method"], spec["model"]
    temperature = model.get("temperature", 0.0)
    if role == "generator" and method.get("temperature") is not None:
        temperature = method["temperature"]
    max_tokens = method.get("max_tokens") or model.get("max_tokens") or 4096
    if role != "generator" and method.get("role_max_tokens"):
        max_tokens = method["role_max_tokens"]  # the agentic roles answer in prose, not a kernel
    return {
        "n": int(method["n"]) if role == "generator" else 1,
        "temperature": float(temperature),
        "top_p": float(model.get("top_p", 1.0)),
        "max_tokens": int(max_tokens),
    }


def build_prompt(spec: Mapping[str, Any], inputs: Mapping[str, str]) -> dict[str, Any]:
    """The prompt record (docs/results.md) of one role call."""
    role, device = spec["role"], spec["device"]
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {ROLES}")
    method = spec["method"]
    task = read_json(inputs["task"])
    common = {"kernel_language": KERNEL_LANGUAGE[device], "reference": task["code"].strip()}
    record: dict[str, Any] = {
        "schema": "kernelsweep/prompt/1",
        "role": role,
        "key": spec["key"],
        "method": method,
        "params": sampling_params(spec, role),
        "stopped": False,
        "stop_reason": None,
        "inputs": dict(inputs),
        "task_sha256": task["sha256"],
    }

    if role == "generator":
        previous = read_json(inputs["previous"]) if inputs.get("previous") else None
        if previous and previous.get("stop"):
            record.update(stopped=True, stop_reason=previous.get("stop_reason"), messages=[])
            return _finish(record)
        sections = [render("task.md", device_note=device_note(device, spec.get("precision", "fp32")),
                           example=example_candidate(device), **common)]
        if method.get("competence_rule"):
            sections.append(render("competence.md"))
        if inputs.get("profile"):
            from kernelsweep.profiling import render_for_prompt

            profile = read_json(inputs["profile"])
            sections.append(render("profile.md", device_name=str(profile.get("device_name", device)),
                                   profile=render_for_prompt(profile)))
        analysis = _response_text(inputs.get("analysis"))
        if analysis:
            sections.append(render("analysis_section.md", analysis=analysis))
        brief = _response_text(inputs.get("brief"))
        if brief:
            sections.append(render("brief_section.md", brief=brief))
        if previous:
            sections.append(attempt_section(previous))
            feedback = _response_text(inputs.get("feedback"))
            if feedback:
                sections.append(render("feedback_section.md", feedback=feedback))
            sections.append(render("retry.md"))
        system = render("generator_system.md")
    elif role == "analyzer":
        system, sections = render("analyzer_system.md"), [render("analyzer.md", **common)]
    elif role == "researcher":
        analysis = _response_text(inputs.get("analysis"))
        queries = retrieval_queries(analysis, task["code"])
        passages = _researcher_passages(spec, queries)
        record["retrieval"] = {"queries": queries, "passages": [{k: p[k] for k in ("tag", "score", "query")} for p in passages]}
        summary = analysis or f"```python\n{common['reference']}\n```"
        text = "\n\n".join(f"[{p['tag']}]\n{p['text'].strip()}" for p in passages) or "(no excerpt matched)"
        system = render("researcher_system.md")
        sections = [render("researcher.md", kernel_language=common["kernel_language"], task_summary=summary, passages=text)]
    else:  # feedback analyzer: reads this turn's selection
        selection = read_json(inputs["selection"])
        system = render("feedback_system.md")
        sections = [render("feedback.md", attempt=attempt_section(selection), **common)]

    record["messages"] = [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(sections)}]
    return _finish(record)


def _finish(record: dict[str, Any]) -> dict[str, Any]:
    record["sha256"] = sha256_text(dumps({k: record[k] for k in ("role", "messages", "params", "stopped")}))
    return record
