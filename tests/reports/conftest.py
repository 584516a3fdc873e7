"""Fixtures for the report tests: sample runs written straight into a store, hostile text."""

import dataclasses

import pytest

from op_db.sample import result, sample_results, write_sample_run
from op_db.store import Store

HOSTILE = "<script>document.title='pwned'</script> & \"quoted\" | pipe"


@pytest.fixture
def hostile():
    return HOSTILE


@pytest.fixture
def hostile_results():
    """The sample set plus an item whose text tries to inject markup."""
    return [*sample_results(), result("index_put", "float32", "ERROR", message=HOSTILE,
                                      first_failure=HOSTILE, failing_op="aten.index_put.default")]


@pytest.fixture
def sample_db(tmp_path, hostile_results):
    path = tmp_path / "results.db"
    with Store.open(path) as store:
        write_sample_run(store, hostile_results)
    return path


@dataclasses.dataclass(frozen=True)
class HostileText:
    """What a backend's exception, an op name or a script line may carry: an OSC 8 hyperlink,
    CSI sequences (clear screen, colour), markup, a NUL byte, a lone surrogate, a one-byte C1
    CSI, a bidi override, a table pipe and a newline; and the test that output holds none raw."""

    osc_link: str = "\x1b]8;;http://evil.example\x07click me\x1b]8;;\x07"
    raw: tuple[str, ...] = ("\x1b", "\x00", "\x07", "\x9b", "\u202e", "\ud800")
    plain_text_formats: tuple[str, ...] = ("table",)  # a terminal shows `<script>` as the characters it is

    @property
    def text(self) -> str:
        return (f"boom {self.osc_link} \x1b[2J\x1b[31mred <script>alert(1)</script> nul\x00 lone\ud800 "
                "c1\x9b6n bidi\u202eevil | pipe\nsecond line\r\n")

    @property
    def stored(self) -> str:
        """The text as UTF-8 can hold it: the lone surrogate replaced, everything else raw."""
        return self.text.replace("\ud800", "\ufffd")

    def inert(self, text: str, markup: bool = True) -> bool:
        """No raw control character or lone surrogate; with `markup`, no raw <script> either."""
        return not any(raw in text for raw in self.raw) and not (markup and "<script>alert" in text)


@pytest.fixture(scope="session")
def hostile_text() -> HostileText:
    return HostileText()


@pytest.fixture(scope="session")
def markdown_html():
    """Markdown to HTML as a PR comment renders it, raw HTML allowed (stricter than GitHub)."""
    def render(text: str) -> str:
        markdown_it = pytest.importorskip("markdown_it")
        return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    return render
