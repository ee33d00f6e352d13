#!/usr/bin/env python3
"""Turns Docs/*.md and Docs/Decisions/*.md into DocC articles, for `make docs`.

Usage: scripts/docc-articles.py DOCS_DIR OUT_DIR

The Markdown files in Docs/ stay the one copy in git; `make docs` writes DocC versions of them
into the Darkroom catalog (Sources/Darkroom/Darkroom.docc/Docs/, ignored by git) just before
DocC runs, and removes them afterwards. Each article keeps its file name (Docs/Caching.md is
<doc:Caching>, Docs/Decisions/0006-blocking-pool.md is <doc:0006-blocking-pool>). Links between
the files become DocC links: `[text](Caching.md#live-images)` becomes
`[text](doc:Caching#Live-images)`, since DocC names a section by its heading where GitHub uses a
lower-case slug. Links to anything else are kept as they are. A page <doc:ProjectDocs> lists the
articles (the guides in the order of the README's Documentation list, then the decisions).
"""

import pathlib
import re
import sys

LINK = re.compile(r"\]\(([^)\s]*)\)")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def docc_fragment(heading: str) -> str:
    """The fragment DocC gives a heading: its words joined by hyphens, without punctuation."""
    words = re.sub(r"[`*]", "", heading).split()
    return re.sub(r"[^\w\-.]", "", "-".join(words))


def headings(text: str) -> dict[str, str]:
    """GitHub slug -> DocC fragment for every heading outside code blocks."""
    found: dict[str, str] = {}
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{2,6}\s+(.*)", line)):
            title = match.group(1).strip()
            slug = github_slug(title)
            base, n = slug, 1
            while slug in found:  # GitHub numbers repeated headings
                slug = f"{base}-{n}"
                n += 1
            found[slug] = docc_fragment(title)
    return found


def convert(path: pathlib.Path, anchors: dict[str, dict[str, str]]) -> str:
    text = path.read_text(encoding="utf-8")

    def relink(match: re.Match) -> str:
        target = match.group(1)
        if "://" in target or target.startswith("mailto:"):
            return match.group(0)
        file, _, anchor = target.partition("#")
        name = pathlib.PurePosixPath(file).stem if file else path.stem
        if file and not file.endswith(".md"):
            return match.group(0)
        if name not in anchors:
            return match.group(0)
        link = f"doc:{name}"
        if anchor:
            link += "#" + anchors[name].get(anchor, anchor)
        return f"]({link})"

    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            out.append(line)
        else:
            out.append(line if fenced else LINK.sub(relink, line))
    return "\n".join(out) + "\n"


def index_page(files: list[pathlib.Path], readme: pathlib.Path) -> str:
    """The page that lists the articles: the guides in the README's order, then the decisions."""
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    order = re.findall(r"\]\(Docs/(\w+)\.md\)", text.partition("\n## Documentation")[2])
    guides = sorted(
        (f.stem for f in files if f.parent.name != "Decisions"),
        key=lambda name: (order.index(name) if name in order else len(order), name),
    )
    decisions = [f.stem for f in files if f.parent.name == "Decisions"]
    lines = [
        "# Guides and reference",
        "",
        "The articles of the repository's Docs folder: how Darkroom works, the pipeline file format,",
        "every error code, and the decisions behind the design.",
        "",
        "## Topics",
        "",
        "### Guides",
        "",
        *[f"- <doc:{name}>" for name in guides],
        "",
        "### Decisions",
        "",
        *[f"- <doc:{name}>" for name in decisions],
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 64
    docs, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    files = sorted(docs.glob("*.md")) + sorted(docs.glob("Decisions/*.md"))
    anchors = {f.stem: headings(f.read_text(encoding="utf-8")) for f in files}
    out.mkdir(parents=True, exist_ok=True)
    for file in files:
        (out / file.name).write_text(convert(file, anchors), encoding="utf-8")
    (out / "ProjectDocs.md").write_text(index_page(files, docs.parent / "README.md"), encoding="utf-8")
    print(f"{len(files)} articles from {docs} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
