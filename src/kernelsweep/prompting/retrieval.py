"""BM25 search over a folder of documentation, for the agentic researcher.

    corpus = Corpus.from_dir(default_corpus_dir())   # or a user's folder
    for p in corpus.search("warp reduction sum", k=4):
        print(p.tag, p.score)                         # e.g. warp_reductions.md#2

Markdown (.md), text (.txt) and HTML (.html/.htm, tags stripped) files are
split into passages: one per heading section, cut at paragraph boundaries
when a section is long, code blocks kept whole. Each passage carries a
citation tag `<file>#<n>` (n counts from 1 within the file). Ranking is BM25
(bm25s) over lower-cased words with a light suffix stemmer; identifiers such
as `__shfl_down_sync` are indexed whole and by their parts. Results are
deterministic: equal scores keep corpus order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html"}
MAX_PASSAGE_CHARS = 1500   # soft bound: paragraphs are packed up to this
MIN_PASSAGE_CHARS = 400    # shorter pieces join a neighbour, up to the hard bound
HARD_PASSAGE_CHARS = 4000  # a single code block longer than this is cut at line ends

_STOPWORDS = frozenset(STOPWORDS_EN)
_WORD = re.compile(r"[a-z0-9_]+")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


class CorpusError(ValueError):
    """The corpus folder is missing, not a folder, or holds no usable text."""


@dataclass(frozen=True)
class Passage:
    tag: str
    text: str
    score: float = 0.0


def default_corpus_dir() -> Path:
    """The CUDA optimization notes shipped with kernelsweep."""
    return Path(__file__).parent / "corpus"


# --- tokens ---------------------------------------------------------------

def _stem(word: str) -> str:
    """Fold common English endings so 'reductions'/'reduction', 'tiled'/'tiling'
    and 'coalesced'/'coalescing' meet. Deliberately simple and predictable."""
    if len(word) <= 4 or not word.isalpha():
        return word
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("e", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                continue
            return word[: -len(suffix)] + repl
    return word


def tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    for raw in _WORD.findall(text.lower()):
        word = raw.strip("_")
        if not word:
            continue
        parts = [p for p in word.split("_") if p]
        if len(parts) > 1:
            tokens.append(word)  # the identifier itself, e.g. shfl_down_sync
        tokens.extend(_stem(p) for p in parts if p not in _STOPWORDS and len(p) > 1)
    return tokens


# --- documents -> sections -> passages -------------------------------------

class _HTMLToMarkdown(HTMLParser):
    """Keeps text, turns h1-h6 into '#' headings and <pre> into fenced code,
    drops script/style/head."""

    _BLOCKS = {"p", "div", "li", "ul", "ol", "table", "tr", "section", "article", "blockquote", "br", "hr", "dd", "dt"}
    _SKIP = {"script", "style", "head", "noscript", "template"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.pre = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self.skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "pre":
            self.pre += 1
            self.out.append("\n\n```\n")
        elif tag in self._BLOCKS:
            self.out.append("\n\n")

    def handle_endtag(self, tag):
        if tag in self._SKIP:
            self.skip = max(0, self.skip - 1)
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n")
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            self.out.append("\n```\n\n")
        elif tag in self._BLOCKS:
            self.out.append("\n\n")

    def handle_data(self, data):
        if self.skip:
            return
        if not self.pre:
            data = re.sub(r"\s+", " ", data)
            if self.out and self.out[-1].endswith("# "):  # heading text stays on its line
                data = data.lstrip()
        self.out.append(data)


def html_to_markdown(html: str) -> str:
    parser = _HTMLToMarkdown()
    parser.feed(html)
    parser.close()
    text = "".join(parser.out)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _blocks(lines: list[str]) -> list[str]:
    """Paragraphs and whole fenced code blocks."""
    blocks, current, fenced = [], [], False
    for line in lines:
        if _FENCE.match(line):
            if not fenced and current:
                blocks.append("\n".join(current))
                current = []
            current.append(line)
            fenced = not fenced
            if not fenced:
                blocks.append("\n".join(current))
                current = []
        elif not fenced and not line.strip():
            if current:
                blocks.append("\n".join(current))
                current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return [b for b in blocks if b.strip()]


def _sections(text: str, headings: bool) -> list[tuple[str, list[str]]]:
    """(context, lines) pairs, where context is 'Title > Section' from the
    nearest level-1 heading and the section's own heading."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    title, fenced = "", False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        m = _HEADING.match(line) if headings and not fenced else None
        if not m:
            sections[-1][1].append(line)
            continue
        heading = m.group(2).strip()
        if len(m.group(1)) == 1:
            title = heading
            sections.append((heading, []))
        else:
            sections.append((f"{title} > {heading}" if title else heading, []))
    return sections


def _cut_long(block: str) -> list[str]:
    if len(block) <= HARD_PASSAGE_CHARS:
        return [block]
    pieces, current = [], ""
    for line in block.splitlines(keepends=True):
        if current and len(current) + len(line) > HARD_PASSAGE_CHARS:
            pieces.append(current.rstrip("\n"))
            current = ""
        current += line
    return pieces + ([current.rstrip("\n")] if current.strip() else [])


def split_passages(text: str, headings: bool = True) -> list[str]:
    passages: list[str] = []
    for context, lines in _sections(text, headings):
        prefix = f"{context}\n" if context else ""
        chunk = ""
        for block in (piece for b in _blocks(lines) for piece in _cut_long(b)):
            size = len(chunk) + len(block) + 2
            # A short lead-in ("For example:") stays with the code it introduces,
            # and a short remark with the code it follows.
            small = min(len(chunk), len(block)) < MIN_PASSAGE_CHARS
            if chunk and size > MAX_PASSAGE_CHARS and not (small and size <= HARD_PASSAGE_CHARS):
                passages.append(prefix + chunk)
                chunk = ""
            chunk = f"{chunk}\n\n{block}" if chunk else block
        if chunk:  # a heading with no body of its own adds no passage
            passages.append(prefix + chunk)
    return passages


def read_document(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    return html_to_markdown(text) if SUFFIXES[path.suffix.lower()] == "html" else text


# --- the corpus -------------------------------------------------------------

class Corpus:
    def __init__(self, passages: list[Passage]):
        if not passages:
            raise CorpusError("a corpus needs at least one passage")
        self.passages = passages
        self._bm25 = bm25s.BM25()
        # An empty token list would break indexing; such passages just never match.
        self._bm25.index([tokenize(p.text) or [""] for p in passages], show_progress=False)

    @classmethod
    def from_dir(cls, folder: str | Path) -> "Corpus":
        folder = Path(folder)
        if not folder.exists():
            raise CorpusError(f"corpus folder not found: {folder}")
        if not folder.is_dir():
            raise CorpusError(f"corpus path is not a folder: {folder}")
        files = sorted(p for p in folder.rglob("*")
                       if p.is_file() and p.suffix.lower() in SUFFIXES
                       and not any(part.startswith(".") for part in p.relative_to(folder).parts))
        passages = []
        for path in files:
            rel = path.relative_to(folder).as_posix()
            kind = SUFFIXES[path.suffix.lower()]
            for n, text in enumerate(split_passages(read_document(path), headings=kind != "text"), start=1):
                passages.append(Passage(tag=f"{rel}#{n}", text=text))
        if not passages:
            kinds = ", ".join(sorted(SUFFIXES))
            raise CorpusError(f"corpus folder {folder} has no text in files ending {kinds}")
        return cls(passages)

    def __len__(self) -> int:
        return len(self.passages)

    def search(self, query: str, k: int) -> list[Passage]:
        """The k best passages for query, best first; only passages sharing at
        least one word with the query are returned."""
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        vocab = self._bm25.vocab_dict
        tokens = [t for t in dict.fromkeys(tokenize(query)) if t in vocab]
        if not tokens:
            return []
        scores = np.asarray(self._bm25.get_scores(tokens), dtype=float)
        order = np.lexsort((np.arange(len(scores)), -scores))  # score desc, then corpus order
        return [Passage(self.passages[i].tag, self.passages[i].text, float(scores[i]))
                for i in order[:k] if scores[i] > 0]


def main(argv: list[str] | None = None) -> int:
    """python -m kernelsweep.prompting.retrieval "QUERY" [-k N] [--corpus DIR]"""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m kernelsweep.prompting.retrieval", description="search the CUDA notes")
    parser.add_argument("query")
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--corpus", default=str(default_corpus_dir()))
    args = parser.parse_args(argv)
    try:
        hits = Corpus.from_dir(args.corpus).search(args.query, args.k)
    except (CorpusError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in hits:
        print(f"[{p.tag}] score {p.score:.3f}\n{p.text}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
