"""A pre-filter between the PTY and pyte: pass what pyte renders correctly, drop what it would draw as text.

pyte draws DCS/APC/PM/SOS payloads, colon SGR (``ESC[4:3m``), ``ESC[>4;2m``, kitty keyboard queries and the final
of escapes with intermediates it does not know (``ESC SP F``, ``ESC[2 q``) as garbage, accumulates unterminated
OSC strings without bound, and raises on digit runs longer than CPython's int-string limit. This filter hands pyte
only complete, well-formed sequences it understands, answers the queries pyte does not (secondary device
attributes, OSC 10/11 colour queries, DECRQM and DECRQSS (by the screen, ``queries``), XTVERSION and those in
``reports``), and carries an incomplete
sequence over to the next chunk. It works on
decoded text and costs nothing on chunks without ESC.

An answer is not sent when the query is filtered but when the screen reaches the marker left in its place, so
answers go out in the order of the queries, whichever of pyte and this filter answers each.
"""

from __future__ import annotations

import re
from collections import deque
from typing import final

from ptyd.terminal.reports import CAPABILITY_NAMES, SIZE_QUERIES, SOFT_RESET, capabilities_report

ESC = "\x1b"

_SEQUENCE = re.compile(
    r"""
    \x1b\[ (?P<params>[\x30-\x3f]*) (?P<inter>[\x20-\x2f]*) (?P<final>[\x40-\x7e])
  | \x1b\] (?P<osc>[^\x07\x1b]*) (?:\x07|\x1b\\)
  | \x1b[P_^X] (?:[^\x1b]|\x1b(?!\\))* \x1b\\
  | \x1b [\x20-\x2f]* (?![\[\]P_^X]) [\x30-\x7e]
    """,
    re.VERBOSE,
)

# A CSI with C0 controls inside it (``ESC [ 2 BS C``): terminals execute each control where it stands and finish
# the sequence; CAN and SUB abort it.
_CSI_WITH_C0 = re.compile(r"\x1b\[(?P<body>[\x00-\x17\x19\x1c-\x3f]*)(?P<final>[\x40-\x7e\x18\x1a])")
_C0 = re.compile(r"[\x00-\x1f]")

# What an incomplete sequence at the end of a chunk can look like.
_PREFIX = re.compile(
    r"""
    \x1b (?: \[ [\x00-\x17\x19\x1c-\x3f]*
           | \] [^\x07\x1b]* \x1b?
           | [P_^X] (?:[^\x1b]|\x1b(?!\\))* \x1b?
           | [\x20-\x2f]* )? \Z
    """,
    re.VERBOSE,
)

_C1 = dict.fromkeys(range(128, 160))  # 8-bit controls: ignored in UTF-8 mode, as xterm does

MAX_CSI_PARAMS = 64
MAX_OSC = 512
# Stands in the text for a query answered here; the screen sends the oldest answer when it reaches one. A program's
# own CSI ... y (DECTST, a hardware self-test) is dropped, so every marker is ours.
ANSWER_MARKER = "\x1b[y"
# DECSTR's "no scroll region" leaves the cursor where it is, where DECSTBM (CSI r) homes it: the soft reset unsets
# the region by a marker of its own.
MARGINS_OFF_MARKER = "\x1b[1y"
_SOFT_RESET = SOFT_RESET.replace("\x1b[r", MARGINS_OFF_MARKER)
MAX_CARRY = 4096  # an unterminated sequence longer than this is discarded up to its end

_CAPABILITY_NAMES = re.compile(CAPABILITY_NAMES)
_CSI_BODY = re.compile(r"[\x20-\x3f]*")
_ESC_INTERMEDIATES = ("(", ")", "#", "%")  # the only ones pyte parses: charset designation, DECALN

DA2_REPLY = "\x1b[>1;10;0c"  # "VT220, firmware 10": what xterm-compatible programs expect
DECRQSS_UNKNOWN = "\x1bP0$r\x1b\\"  # a setting pyte cannot report
XTVERSION_REPLY = "\x1bP>|ptyd(pyte)\x1b\\"
# An answer the screen computes when it reaches the marker: a size report (code), the cursor (DECXCPR, 6), a mode
# (DECRQM: "mode" or "private_mode", its number) or a setting (DECRQSS: an index into SETTINGS).
Report = tuple[str, int]
SETTINGS = ("m", "r")  # SGR, DECSTBM
_SETTINGS = {name: i for i, name in enumerate(SETTINGS)}
OSC_COLOR_REPLIES = {"10;?": "\x1b]10;rgb:e5e5/e5e5/e5e5\x1b\\", "11;?": "\x1b]11;rgb:0000/0000/0000\x1b\\"}


@final
class Sanitizer:
    def __init__(self) -> None:
        self._carry = ""
        self._discarding = ""  # inside an over-long "string" (OSC, DCS...) or "csi", waiting for its end
        self.answers: deque[str | Report] = deque()  # for the ANSWER_MARKERs in the filtered text, in order

    def filter(self, text: str) -> str:
        """Return the part of ``text`` that is safe to feed pyte; queries' answers go to ``answers``."""
        if self._carry:
            text = self._carry + text
            self._carry = ""
        if self._discarding == "string":
            end = _string_end(text)
            if end < 0:
                self._carry = text[-1:] if text.endswith(ESC) else ""
                return ""
            self._discarding = ""
            text = text[end:]
        elif self._discarding == "csi":
            body = _CSI_BODY.match(text)
            end = body.end() if body else 0
            if end == len(text):
                return ""
            self._discarding = ""
            text = text[end + 1 :] if "\x40" <= text[end] <= "\x7e" else text[end:]
        if not text.isascii():
            text = text.translate(_C1)
        if ESC not in text:
            return text
        out: list[str] = []
        pos = 0
        while True:
            i = text.find(ESC, pos)
            if i < 0:
                out.append(text[pos:])
                break
            out.append(text[pos:i])
            m = _SEQUENCE.match(text, i)
            if m is None and (c0 := _CSI_WITH_C0.match(text, i)) is not None:
                inner, last = c0.group("body"), c0.group("final")
                out.append("".join(_C0.findall(inner)))
                if last not in "\x18\x1a" and (m := _SEQUENCE.fullmatch("\x1b[" + _C0.sub("", inner) + last)):
                    out.append(self._keep(m))
                pos = c0.end()
                continue
            if m is None:
                rest = text[i:]
                if _PREFIX.match(rest):
                    if len(rest) <= MAX_CARRY:
                        self._carry = rest
                    elif rest[1:2] in ("]", "P", "_", "^", "X"):
                        self._discarding = "string"
                    elif rest[1:2] == "[":
                        self._discarding = "csi"
                    break
                pos = i + 1  # a lone ESC before a control or text: drop the ESC
                continue
            out.append(self._keep(m))
            pos = m.end()
        return "".join(out)

    def _keep(self, m: re.Match[str]) -> str:
        seq = m.group(0)
        final = m.group("final")
        if final is not None:
            params = m.group("params")
            inter = m.group("inter")
            if inter == "!" and final == "p" and not params:
                return _SOFT_RESET
            if inter == "$" and final == "p" and len(params) <= 8 and params.lstrip("?").isdigit():
                private = params.startswith("?")  # DECRQM: answered from the modes as they are at the query
                return self._answer(("private_mode" if private else "mode", int(params.lstrip("?"))))
            if inter or len(params) > MAX_CSI_PARAMS or ":" in params or final == "y":
                return ""
            if params[:1] in ("<", "=", ">"):
                if params[:1] == ">" and final == "c" and params in (">", ">0"):
                    return self._answer(DA2_REPLY)
                if params[:1] == ">" and final == "q" and params in (">", ">0"):
                    return self._answer(XTVERSION_REPLY)
                return ""
            if params == "?6" and final == "n":
                return self._answer(("cursor", 6))
            if params[:1] == "?" and final not in "hlJK":  # private modes, selective erase (as plain erase)
                return ""
            if final == "t" and params.isdigit() and int(params) in SIZE_QUERIES:
                return self._answer(("size", int(params)))
            return seq
        osc = m.group("osc")
        if osc is not None:
            reply = OSC_COLOR_REPLIES.get(osc)
            if reply is not None:
                return self._answer(reply)
            code = osc.split(";", 1)[0]
            if code in ("0", "1", "2") and len(osc) <= MAX_OSC:
                return "\x1b]" + osc + "\x07"
            return ""
        if seq.startswith("\x1bP+q") and _CAPABILITY_NAMES.fullmatch(seq, 4, len(seq) - 2):
            return self._answer(capabilities_report(seq[4:-2]))  # hex only: the answer is the program's input
        if seq.startswith("\x1bP$q"):  # DECRQSS: the pen and the scroll region are pyte's; nothing else is
            setting = seq[4:-2]
            return self._answer(("setting", _SETTINGS[setting]) if setting in _SETTINGS else DECRQSS_UNKNOWN)
        if seq[1] in "P_^X" or len(seq) > 3 or (len(seq) == 3 and seq[1] not in _ESC_INTERMEDIATES):
            return ""
        return seq

    def _answer(self, reply: str | Report) -> str:
        self.answers.append(reply)
        return ANSWER_MARKER


def _string_end(text: str) -> int:
    """Index just past the first string terminator (BEL or ST), or -1."""
    bel = text.find("\x07")
    st = text.find("\x1b\\")
    ends = [p + 1 for p in (bel,) if p >= 0] + [p + 2 for p in (st,) if p >= 0]
    return min(ends) if ends else -1
