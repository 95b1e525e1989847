"""BM25 retrieval over documentation folders, and the bundled CUDA notes:
their load_inline usage, and (slow) that every code snippet compiles with the
real compilers and the CPU example runs."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension
from torch.utils.cpp_extension import load_inline

from kernelsweep.prompting.retrieval import Corpus, CorpusError, Passage, default_corpus_dir, split_passages

NOTES = sorted(default_corpus_dir().glob("*.md"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.from_dir(default_corpus_dir())


# --- retrieval ---------------------------------------------------------------

@pytest.mark.parametrize("query, note, within", [
    ("warp reduction sum", "warp_reductions.md", 1),
    ("load_inline signature", "load_inline.md", 1),
    ("fuse bias relu after matmul", "fusion.md", 2),
    ("coalesced global memory access", "coalescing.md", 2),
    ("shared memory tile bank conflicts", "shared_memory_tiling.md", 1),
    ("float4 vectorized load alignment", "vectorized_loads.md", 1),
    ("at::parallel_for CPU loop", "cpu_cpp_kernels.md", 1),
    ("TORCH_CHECK packed accessor", "tensor_checks_accessors.md", 2),
    ("block size occupancy launch", "occupancy_launch.md", 1),
    ("tolerance gelu erf tanh", "numerics.md", 1),
])
def test_typical_queries_find_the_expected_note(corpus, query, note, within):
    hits = corpus.search(query, k=5)
    assert hits, query
    assert note in [h.tag.split("#")[0] for h in hits[:within]], [h.tag for h in hits]


def test_results_are_ranked_tagged_and_deterministic(corpus):
    first = corpus.search("shared memory reduction across a block", k=6)
    assert len(first) == 6
    assert [h.score for h in first] == sorted((h.score for h in first), reverse=True)
    assert all(re.fullmatch(r"[\w./-]+\.md#\d+", h.tag) and h.score > 0 for h in first)
    again = Corpus.from_dir(default_corpus_dir()).search("shared memory reduction across a block", k=6)
    assert first == again


def test_query_without_known_words_returns_nothing(corpus):
    assert corpus.search("zzzqqq xylophone", k=3) == []
    assert corpus.search("", k=3) == []
    with pytest.raises(ValueError, match="k must be at least 1"):
        corpus.search("warp", k=0)


def test_passages_are_bounded_and_keep_code_whole(corpus):
    for p in corpus.passages:
        assert len(p.text) <= 4200, p.tag
        assert p.text.count("```") % 2 == 0, f"{p.tag} cuts a code block"


def test_html_and_text_ingestion(tmp_path):
    (tmp_path / "guide.html").write_text("""
        <html><head><title>ignored title</title><style>p { color: red }</style>
        <script>var coalescing = 1;</script></head>
        <body><h1>Pinned memory</h1><p>Use <b>pinned</b> host buffers for asynchronous copies.</p>
        <h2>Streams</h2><p>Overlap transfers with compute using streams &amp; events.</p>
        <pre>cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);</pre>
        </body></html>""")
    (tmp_path / "notes.txt").write_text("Texture caches help\nspatially local reads.\n\n"
                                        "# not a heading in plain text\nsecond paragraph about atomics.\n")
    sub = tmp_path / "more"
    sub.mkdir()
    (sub / "graphs.md").write_text("# CUDA graphs\n\nCapture a sequence of launches once and replay it.\n")
    (tmp_path / ".hidden.md").write_text("# secret\n\npinned pinned pinned\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")

    corpus = Corpus.from_dir(tmp_path)
    tags = {p.tag for p in corpus.passages}
    assert tags == {"guide.html#1", "guide.html#2", "notes.txt#1", "more/graphs.md#1"}
    streams = corpus.search("overlap transfers streams", k=1)[0]
    assert streams.tag == "guide.html#2"
    assert "Pinned memory > Streams" in streams.text          # heading context
    assert "cudaMemcpyAsync(dst, src" in streams.text        # <pre> kept
    assert "<p>" not in streams.text and "&amp;" not in streams.text
    assert corpus.search("coalescing color red", k=3) == []  # script/style dropped
    assert corpus.search("texture caches", k=1)[0].tag == "notes.txt#1"
    assert corpus.search("replay graphs", k=1)[0].tag == "more/graphs.md#1"
    assert "secret" not in " ".join(p.text for p in corpus.passages)


def test_long_sections_split_at_paragraphs():
    paragraphs = [f"Paragraph {i} about occupancy. " + "word " * 80 for i in range(12)]
    text = "# Title\n\n## Long\n\n" + "\n\n".join(paragraphs)
    passages = split_passages(text)
    assert len(passages) > 2
    assert all(p.startswith("Title > Long\n") for p in passages)
    assert all(len(p) <= 1600 for p in passages)
    body = "\n\n".join(p.split("\n", 1)[1] for p in passages)
    assert body == "\n\n".join(paragraphs)  # nothing lost, nothing repeated


def test_empty_missing_and_non_folder_errors(tmp_path):
    with pytest.raises(CorpusError, match="not found"):
        Corpus.from_dir(tmp_path / "nowhere")
    (tmp_path / "file.md").write_text("x")
    with pytest.raises(CorpusError, match="not a folder"):
        Corpus.from_dir(tmp_path / "file.md")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.md").write_text("\n\n   \n")
    (empty / "data.csv").write_text("a,b\n1,2\n")
    with pytest.raises(CorpusError, match="has no text"):
        Corpus.from_dir(empty)


def test_passage_is_a_plain_value():
    assert Passage("a.md#1", "text", 1.5) == Passage("a.md#1", "text", 1.5)


def test_command_line_search_and_error():
    ok = subprocess.run([sys.executable, "-m", "kernelsweep.prompting.retrieval", "warp shuffle", "-k", "1"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "[warp_reductions.md#" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "kernelsweep.prompting.retrieval", "x", "--corpus", "/nonexistent/corpus"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "corpus folder not found" in bad.stderr and "Traceback" not in bad.stderr


# --- the bundled notes --------------------------------------------------------

def code_blocks(lang: str) -> list[tuple[str, str]]:
    found = []
    for note in NOTES:
        for block_lang, code in FENCE.findall(note.read_text()):
            if block_lang == lang:
                found.append((note.name, code))
    return found


def python_sources(name: str) -> list[tuple[str, str]]:
    """String constants assigned to `name` in the notes' python blocks."""
    found = []
    for note, code in code_blocks("python"):
        for node in ast.walk(ast.parse(code)):
            if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets)
                    and isinstance(node.value, ast.Constant)):
                found.append((note, node.value.value))
    return found


def test_notes_exist_and_python_blocks_parse():
    assert 8 <= len(NOTES) <= 12
    blocks = code_blocks("python")
    assert blocks
    for note, code in blocks:
        ast.parse(code, filename=note)


def test_load_inline_calls_in_notes_match_the_real_signature():
    params = inspect.signature(load_inline).parameters
    assert "sources" not in params and "functions" in params and "cuda_sources" in params
    calls = 0
    for note, code in code_blocks("python"):
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "load_inline":
                calls += 1
                assert {kw.arg for kw in node.keywords} <= set(params), note
                assert "functions" in {kw.arg for kw in node.keywords}, note
    assert calls >= 3


def test_no_note_writes_its_own_pybind_module():
    for lang in ("cuda", "cpp", "python"):
        for note, code in code_blocks(lang):
            assert "PYBIND11_MODULE" not in code, note


# --- slow: compile every snippet with the real compilers ---------------------

TORCH_INCLUDE = Path(torch.__file__).parent / "include"
NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
              "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
              "--expt-relaxed-constexpr"]  # what torch.utils.cpp_extension passes to nvcc


def translation_unit(header: list[str], snippets: list[tuple[str, str]]) -> str:
    """All snippets in one file, each in its own namespace; includes hoisted."""
    includes, bodies = list(header), []
    for i, (note, code) in enumerate(snippets):
        lines = code.splitlines()
        includes += [l for l in lines if l.startswith("#include")]
        body = "\n".join(l for l in lines if not l.startswith("#include"))
        bodies.append(f"// from {note}\nnamespace snippet_{i} {{\n{body}\n}}  // namespace snippet_{i}\n")
    return "\n".join(dict.fromkeys(includes)) + "\n\n" + "\n".join(bodies)


def include_flags(tmp_path: Path) -> list[str]:
    flags = [f"-I{TORCH_INCLUDE}", f"-I{TORCH_INCLUDE / 'torch/csrc/api/include'}",
             f"-I{sysconfig.get_paths()['include']}"]
    # CPU-only torch wheels ship the c10/cuda headers but not this generated one.
    if not (TORCH_INCLUDE / "c10/cuda/impl/cuda_cmake_macros.h").exists():
        shim = tmp_path / "shim/c10/cuda/impl"
        shim.mkdir(parents=True)
        (shim / "cuda_cmake_macros.h").write_text("#pragma once\n")
        flags.append(f"-I{tmp_path / 'shim'}")
    return flags


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_cuda_snippets_compile_with_nvcc(tmp_path):
    snippets = code_blocks("cuda") + python_sources("cuda_source")
    assert len(snippets) >= 10
    source = tmp_path / "notes.cu"
    source.write_text(translation_unit(["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"],
                                       snippets))
    proc = subprocess.run(["nvcc", "-c", "-std=c++20", "-arch=sm_90", *NVCC_FLAGS, *include_flags(tmp_path),
                           str(source), "-o", str(tmp_path / "notes.o")],
                          capture_output=True, text=True, timeout=1200)
    errors = [l for l in proc.stderr.splitlines() if "error" in l]
    assert proc.returncode == 0, "\n".join(errors[:30]) or proc.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_cpu_note_example_builds_with_every_cpp_snippet_and_matches_pytorch(tmp_path, monkeypatch):
    """The CPU note's example, run as written, builds its extension with the real
    compiler and matches PyTorch. Every other C++ snippet of the notes goes into
    that same build, each in its own namespace: compiled and linked for real, in
    one pass over torch's headers (each pass costs tens of CPU seconds)."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    note = default_corpus_dir() / "cpu_cpp_kernels.md"
    (code,) = [c for lang, c in FENCE.findall(note.read_text()) if lang == "python"]
    others = [(n, c) for n, c in code_blocks("cpp") + python_sources("cpp_source") if c not in code]
    assert len(others) >= 5
    real, built = cpp_extension.load_inline, []

    def with_the_snippets(*args, cpp_sources, **kwargs):
        own = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources)
        built.append(kwargs["name"])
        return real(*args, cpp_sources=[*own, translation_unit([], others)], **kwargs)

    monkeypatch.setattr(cpp_extension, "load_inline", with_the_snippets)
    namespace: dict = {}
    exec(compile(code, str(note), "exec"), namespace)  # builds the extension with the real compiler
    assert built == ["scale_add_relu_cpu"]
    torch.manual_seed(0)
    model = namespace["ModelNew"](512, 1.7)
    x, residual = torch.randn(64, 512), torch.randn(64, 512)
    expected = torch.relu(x * 1.7 + residual + model.offset)
    with torch.no_grad():
        got = model(x, residual)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
    with pytest.raises(RuntimeError, match="same shape"):
        model(x, residual[:10])
