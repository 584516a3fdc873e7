"""MkDocs hook: adds the reference pages generated from the code (porting_cli/cli/reference_pages.py),
so the command, rule and status pages are made from what they describe at every build."""

from __future__ import annotations

from mkdocs.structure.files import File, Files


def on_files(files: Files, config) -> Files:
    from porting_cli.cli.reference_pages import reference_pages

    for path, markdown in reference_pages().items():
        files.append(File.generated(config, path, content=markdown))
    return files
