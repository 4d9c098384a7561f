"""The text of an HTML-only reply, as a person sees it, for the shared reply reader.

Nothing is cut here: quotes become `>` lines and a quoted header block stays text, so the
reader decides what is quoted (`gateway.seam.reply_text`) for HTML as for plain text. What
looks different from what it says is marked, so it can never read as a plain yes:
struck-through text (`~ … ~`), hidden or invisible text (`[hidden]`), text only some clients
show (`[if mso]`), and style rules that add text (`[styled]`). An emoji image is its alt text;
a checkbox is `[ ]` or `[x]`.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIP_TAGS = frozenset({"script", "style", "title"})
_BLOCKS = frozenset(
    {"p", "div", "tr", "li", "ul", "ol", "table", "h1", "h2", "h3", "pre", "blockquote"}
)
_STRUCK_TAGS = frozenset({"s", "del", "strike"})
# Elements that show text this parser does not read as shown (raw text, other documents).
_UNREAD_TAGS = frozenset({"textarea", "xmp", "plaintext", "iframe", "object", "embed", "frame"})
_WHITE = r"(?:#fff(?:fff)?\b|white\b|rgb\(\s*255\s*,\s*255\s*,\s*255\s*\))"
_HIDDEN = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*hidden|opacity\s*:\s*0(?![.\d])"
    r"|(?:font-size|max-height|height|max-width|width)\s*:\s*0(?![.\d])"
    rf"|(?<![-\w])color\s*:\s*{_WHITE}",
    re.IGNORECASE,
)
_WHITE_COLOR = re.compile(_WHITE, re.IGNORECASE)
# Style that may change what is seen: an escape, a string (list markers, quotes), generated
# content, or a style sheet that hides or strikes through by class.
_STYLED = re.compile(
    r"\\|[\"']|content\s*:|line-through|display\s*:\s*none|visibility|opacity|height\s*:\s*0"
    r"|gradient|@import|url\(",
    re.IGNORECASE,
)
_LINE_THROUGH = re.compile(r"line-through", re.IGNORECASE)
# Browsers end "<!-->" and "<!--->" where they start; Python's parser reads on to the next "-->".
_BROWSER_COMMENTS = re.compile(r"<!--->?|<!-->")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.open: list[tuple[str, str]] = []  # (tag, what it closes with: "~" or "")
        self.skipping: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        if self.skipping is not None:
            return
        if tag in _SKIP_TAGS:
            self.skipping = tag
            return
        if tag in ("br", "hr"):
            self.parts.append("\n")
        elif tag == "img" and attr.get("alt", "").strip():
            self._text(f" {attr['alt'].strip()} ")
        elif tag == "input" and attr.get("type", "").lower() == "checkbox":
            self._text(" [x] " if "checked" in attr else " [ ] ")
        elif tag == "input" and (attr.get("value", "") + attr.get("placeholder", "")).strip():
            self._text(f" [{attr.get('value') or attr.get('placeholder')}] ")
        elif tag in _UNREAD_TAGS or (tag == "link" and "stylesheet" in attr.get("rel", "")):
            self._text(" [unread] ")  # shown, or styled, in a way not read here
        if tag in _BLOCKS:
            self._end_line()
        self._open(tag, attr)

    def _open(self, tag: str, attr: dict[str, str]) -> None:
        if tag in ("br", "hr", "img", "input", "meta", "link"):
            return  # void elements have no end tag
        style = attr.get("style", "")
        closing = ""
        white = tag == "font" and _WHITE_COLOR.fullmatch(attr.get("color", "").strip())
        if _HIDDEN.search(style) or "hidden" in attr or white or tag == "template":
            self._text(" [hidden] ")
        elif _STYLED.search(style):
            self._text(" [styled] ")
        if tag in _STRUCK_TAGS or _LINE_THROUGH.search(style):
            self._text(" ~ ")
            closing = " ~ "
        if tag == "q":  # shown in quotation marks: someone's words
            self._text(' " ')
            closing = ' " '
        self.open.append((tag, closing))

    def handle_endtag(self, tag: str) -> None:
        if self.skipping is not None:
            self.skipping = None if tag == self.skipping else self.skipping
            return
        if all(opened != tag for opened, _ in self.open):
            return  # an end tag nothing opened
        while self.open:  # elements left open close with their parent, as browsers do
            opened, closing = self.open.pop()
            self._text(closing)
            if opened == tag:
                break
        if tag in _BLOCKS:
            self._end_line()

    def handle_data(self, data: str) -> None:
        if self.skipping == "style" and _STYLED.search(data.replace('"', "").replace("'", "")):
            self.parts.append(" [styled] ")  # a style sheet that adds, hides or strikes text
        if self.skipping is None:
            self._text(re.sub(r"\s+", " ", data))  # HTML collapses whitespace

    def handle_comment(self, data: str) -> None:
        if data.lstrip().lower().startswith("[if"):  # Outlook shows what others do not
            self._text(" [if mso] " + re.sub(r"<[^>]*>", " ", data.split("]>", 1)[-1]))

    def _text(self, text: str) -> None:
        if not text.strip() and self._at_line_start():
            return
        quotes = sum(opened == "blockquote" for opened, _ in self.open)
        if quotes and self._at_line_start():
            self.parts.append("> " * quotes)
        self.parts.append(text)

    def _at_line_start(self) -> bool:
        return not self.parts or self.parts[-1].endswith("\n")

    def _end_line(self) -> None:
        """Blocks break lines but, unlike <br>, adjacent block edges make one break."""
        if not self._at_line_start():
            self.parts.append("\n")


def html_to_text(html: str) -> str:
    parser = _Text()
    parser.feed(_BROWSER_COMMENTS.sub("<!-- -->", html))
    parser.close()
    lines = (line.strip() for line in "".join(parser.parts).splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
