"""Text safe to write to a terminal: control characters in a name from a file or a cluster are shown, not obeyed.

A cluster alias, a topic or group name (a group name may hold any character), a YAML key: each can reach a message.
Written raw, `\\x1b]0;...\\x07` retitles the terminal, `\\x1b[2K` or `\\r` erases what was printed before it and
`\\x1b[8m` hides what follows. `terminal_safe(text)` writes every such character as its escape (`\\x1b`), keeping
only what kmirror's own output uses: newlines, tabs, colours (SGR, but not "conceal"), "erase to end of line", and a
carriage return that starts the text (the progress line rewrites itself). Bidirectional overrides (U+202A-U+202E,
U+2066-U+2069) are escaped too: they make a name read differently from what it is.

`ScrubbingStream` applies it to everything the CLI and the job print; error messages (`SpecIssue`, the CLI's
`Error:` line) are escaped with `styles=False`, colours included, since a name may carry a colour too.
Pure. Must not: change printable text.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_KEPT = re.compile(r"\x1b\[(?P<sgr>[0-9;]*)m|\x1b\[K")


def terminal_safe(text: str, *, styles: bool = True) -> str:
    """`text` with every control character but newline, tab, colours and erase-line written as an escape.
    `styles=False` for a message that holds no style of kmirror's: colours are escaped too."""
    if not _CONTROL.search(text):
        return text
    out: list[str] = []
    start = 0
    if styles and text.startswith("\r"):
        out.append("\r")
        start = 1
    position = start
    while position < len(text):
        match = _CONTROL.search(text, position)
        if match is None:
            out.append(text[position:])
            break
        out.append(text[position : match.start()])
        kept = _KEPT.match(text, match.start()) if styles and match.group(0) == "\x1b" else None
        if kept is not None and "8" not in (kept.group("sgr") or "").split(";"):
            out.append(kept.group(0))
            position = kept.end()
            continue
        out.append(_escape(match.group(0)))
        position = match.end()
    return "".join(out)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
