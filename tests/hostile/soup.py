"""Escape-sequence soup: seeded, reproducible hostile terminal output.

A soup is a run of pieces, each drawn from one family of what a terminal parser must survive: hyperlinks (OSC 8),
REP with huge counts, scroll regions and margins, the alternate screens, insert and delete of lines and
characters, tabs and tab stops, wide characters, emoji and combining marks, broken UTF-8, DCS/APC/OSC strings with
long payloads (and unterminated ones), cursor moves to the edges (what a resize then reflows), C0 and C1
controls, SGR soup, resets, queries. The same seed always gives the same bytes, so a crash found by a seed is
found again by it; ``pieces`` is the same soup as a list hypothesis can shrink.
"""

from __future__ import annotations

import random
from collections.abc import Callable

ESC = b"\x1b"
CSI = b"\x1b["
OSC = b"\x1b]"
ST = b"\x1b\\"
BEL = b"\x07"

# Numbers a parser or a grid gets wrong: zero, one, the edges of the sizes the tests use, 16-bit and 32-bit
# bounds, and more digits than any integer type holds.
_COUNTS = (
    0,
    1,
    2,
    3,
    7,
    8,
    23,
    24,
    39,
    40,
    79,
    80,
    99,
    100,
    159,
    160,
    255,
    256,
    499,
    500,
    501,
    999,
    1000,
    4095,
    9999,
    32767,
    32768,
    65534,
    65535,
    65536,
    99999,
    2**31 - 1,
    2**31,
    2**32,
    2**63,
    10**30,
)


def _count(rng: random.Random) -> bytes:
    if rng.random() < 0.7:
        return str(rng.choice(_COUNTS)).encode()
    return str(rng.randrange(0, 1 << rng.choice((4, 8, 16, 20)))).encode()


def _params(rng: random.Random, most: int = 4) -> bytes:
    return b";".join(_count(rng) if rng.random() < 0.85 else b"" for _ in range(rng.randrange(0, most + 1)))


def _text(rng: random.Random) -> bytes:
    size = rng.choice((1, 5, 40, 200, 2000))
    return bytes(rng.randrange(0x20, 0x7F) for _ in range(size))


_WIDE = (
    "漢字かなカナ한글",  # CJK: two columns each
    "😀🎉👍🏽👨‍👩‍👧‍👦🏳️‍🌈🇯🇵🇫🇷",  # emoji, a skin tone, ZWJ families, flags
    "❤️☺︎✔️",  # VS16 and VS15
    "e\u0301a\u0308\u0334\u0335\u20dd",  # combining marks
    "\u0301\u0302\u0303",  # combining marks with nothing to combine with
    "\u200b\u200d\u2060\ufeff\u00ad",  # zero-width characters
    "\u202e\u2066abc\u2069",  # bidi controls
    "𝕏𓀀\U0010fffd\U000e0001",  # astral planes, a tag character
    "ｱｲｳ",  # halfwidth
)


def _wide(rng: random.Random) -> bytes:
    text = "".join(rng.choice(_WIDE) for _ in range(rng.randrange(1, 6)))
    return (text * rng.choice((1, 1, 10, 200))).encode()


def _broken_utf8(rng: random.Random) -> bytes:
    forms = (
        b"\x80",  # a lone continuation byte
        b"\xc3",  # a lead byte without its continuation
        b"\xe2\x82",  # a truncated three-byte sequence
        b"\xf0\x9f\x98",  # a truncated four-byte sequence
        b"\xc0\xaf",  # overlong
        b"\xed\xa0\x80",  # an encoded surrogate
        b"\xf4\x90\x80\x80",  # past U+10FFFF
        b"\xfe\xff",
        b"\xf8\x88\x80\x80\x80",  # a five-byte form
    )
    out = b"".join(rng.choice(forms) for _ in range(rng.randrange(1, 20)))
    if rng.random() < 0.3:
        out += bytes(rng.randrange(0x80, 0x100) for _ in range(rng.randrange(1, 200)))
    return out


def _c0(rng: random.Random) -> bytes:
    return bytes(
        rng.choice(b"\x00\x05\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x18\x1a\x1b\x7f") for _ in range(rng.randrange(1, 30))
    )


def _c1(rng: random.Random) -> bytes:
    if rng.random() < 0.5:  # 8-bit C1 bytes, raw (invalid UTF-8) ...
        return bytes(rng.randrange(0x80, 0xA0) for _ in range(rng.randrange(1, 10)))
    return "".join(chr(rng.randrange(0x80, 0xA0)) for _ in range(rng.randrange(1, 10))).encode()  # ...and as UTF-8


def _csi_any(rng: random.Random) -> bytes:
    prefix = rng.choice((b"", b"", b"?", b">", b"<", b"=", b"?$"))
    inter = rng.choice((b"", b"", b" ", b"$", b"!", b'"', b"'", b"*"))
    params = _params(rng, 6) if rng.random() < 0.8 else b":".join(_count(rng) for _ in range(rng.randrange(1, 6)))
    return CSI + prefix + params + inter + bytes([rng.randrange(0x40, 0x7F)])


def _rep(rng: random.Random) -> bytes:
    lead = rng.choice((b"x", b"\xe6\xbc\xa2", b"\xf0\x9f\x98\x80", b"", b"\x1b[1;31mz", b"\t"))
    return lead + CSI + _count(rng) + b"b"


def _cursor(rng: random.Random) -> bytes:
    final = rng.choice(b"ABCDEFGHIdefa`")
    if final in b"Hf":
        return CSI + _count(rng) + b";" + _count(rng) + bytes([final])
    return CSI + _count(rng) + bytes([final])


def _edge(rng: random.Random) -> bytes:
    """The cursor to a corner or the last column with a pending wrap: what a resize next has to reflow."""
    return rng.choice(
        (
            CSI + b"999;999H",
            CSI + b"999;999Hx",
            CSI + b"999;999H\xe6\xbc\xa2",
            CSI + b"999Gx" + ESC + b"7",
            CSI + b"1;999Hxy",
            CSI + b"H" + ESC + b"M" * 3,
            CSI + b"999;1H" + b"\n" * 5,
            CSI + b"?7l" + CSI + b"999Gabc" + CSI + b"?7h",
        )
    )


def _region(rng: random.Random) -> bytes:
    out = CSI + _count(rng) + b";" + _count(rng) + b"r"
    if rng.random() < 0.5:
        out += CSI + b"?69h" + CSI + _count(rng) + b";" + _count(rng) + b"s"
    if rng.random() < 0.5:
        out += CSI + b"?6" + rng.choice((b"h", b"l"))
    out += CSI + _count(rng) + rng.choice((b"S", b"T", b"L", b"M"))
    return out + b"\n" * rng.randrange(0, 50)


def _edit(rng: random.Random) -> bytes:
    return CSI + _count(rng) + bytes([rng.choice(b"@PLMXJK")]) + rng.choice((b"", b"text", b"\xe6\xbc\xa2"))


def _erase(rng: random.Random) -> bytes:
    return CSI + rng.choice((b"", b"?")) + rng.choice((b"0", b"1", b"2", b"3", b"")) + rng.choice((b"J", b"K"))


def _tabs(rng: random.Random) -> bytes:
    return rng.choice(
        (
            b"\t" * rng.randrange(1, 300),
            ESC + b"H",  # HTS
            CSI + rng.choice((b"0", b"3", b"")) + b"g",  # TBC
            CSI + _count(rng) + b"I",  # CHT
            CSI + _count(rng) + b"Z",  # CBT
            CSI + b"?5W",  # DECST8C
        )
    )


def _screens(rng: random.Random) -> bytes:
    mode = rng.choice((b"1049", b"1047", b"1048", b"47"))
    return CSI + b"?" + mode + rng.choice((b"h", b"l")) + rng.choice((b"", b"x", ESC + b"7", ESC + b"8"))


def _modes(rng: random.Random) -> bytes:
    modes = (1, 3, 4, 5, 6, 7, 12, 25, 40, 45, 66, 67, 69, 95, 1000, 1002, 1004, 1006, 1016, 2004, 2026, 2027, 2031)
    mode = str(rng.choice(modes)).encode()
    return CSI + rng.choice((b"?", b"")) + mode + rng.choice((b"h", b"l", b"$p"))


def _payload(rng: random.Random) -> bytes:
    size = rng.choice((0, 1, 100, 4096, 70_000, 300_000))
    alphabet = rng.choice((b"a", b"0123456789;:=/", bytes(range(0x20, 0x7F)), "é漢😀".encode()))
    return (alphabet * (size // len(alphabet) + 1))[:size]


def _terminator(rng: random.Random) -> bytes:
    return rng.choice((ST, ST, BEL, b"\x9c", b"\xc2\x9c", b"", ESC, CSI + b"m", b"\x18"))


def _hyperlink(rng: random.Random) -> bytes:
    params = rng.choice((b"", b"id=a", b"id=" + _payload(rng)[:5000], b"a=b:c=d"))
    uri = rng.choice((b"http://a", b"", b"file:///x", b"http://" + _payload(rng)))
    out = OSC + b"8;" + params + b";" + uri + _terminator(rng)
    if rng.random() < 0.7:
        out += _text(rng)[:50] + rng.choice((b"", OSC + b"8;;" + ST))
    return out


def _hyperlink_run(rng: random.Random) -> bytes:
    """Many hyperlinked cells: distinct links (by id or URI), or one long link over a long run (REP included)."""
    count = rng.choice((10, 100, 1000, 5000))
    uri = b"http://" + _payload(rng)[: rng.choice((1, 100, 2000))]
    if rng.random() < 0.5:
        body = b"".join(OSC + b"8;id=%d;%s%d" % (i, uri, i) + ST + b"x" for i in range(count))
    else:
        body = OSC + b"8;;" + uri + ST + b"y" * count + CSI + _count(rng) + b"b"
    return body + rng.choice((OSC + b"8;;" + ST, b""))


def _osc(rng: random.Random) -> bytes:
    number = rng.choice(
        (
            b"0",
            b"1",
            b"2",
            b"4;1;",
            b"4;300;rgb:ff/00/00",
            b"7;file://",
            b"10;?",
            b"11;?",
            b"12;",
            b"52;c;",
            b"104;",
            b"112",
            b"133;A",
            b"133;D;0",
            b"1337;",
            b"9;",
            b"777;",
            b"99999999;",
            b"",
            b";",
        )
    )
    return OSC + number + _payload(rng) + _terminator(rng)


def _dcs(rng: random.Random) -> bytes:
    head = rng.choice((b"$q", b"$qm", b"$q r", b"+q", b"+q544e", b"q", b"0;1;8q#0;2;0;0;0", b"=1s", b"tmux;", b""))
    return ESC + b"P" + head + _payload(rng) + _terminator(rng)


def _apc(rng: random.Random) -> bytes:
    head = rng.choice((b"G", b"Ga=T,f=100;", b"Ga=q,i=1;", b"Gi=31,s=10,v=2,a=T,f=24,m=1;", b""))
    return ESC + b"_" + head + _payload(rng) + _terminator(rng)


def _pm_sos(rng: random.Random) -> bytes:
    return ESC + rng.choice((b"^", b"X")) + _payload(rng)[:10_000] + _terminator(rng)


def _sgr(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randrange(1, 12)):
        parts.append(
            rng.choice(
                (
                    _count(rng),
                    b"38;5;" + _count(rng),
                    b"48;2;" + _count(rng) + b";" + _count(rng) + b";" + _count(rng),
                    b"58:2::" + _count(rng) + b":1:2",
                    b"4:" + _count(rng),
                    b"38:5",
                    b"38;2",
                )
            )
        )
    return CSI + b";".join(parts) + b"m"


def _escapes(rng: random.Random) -> bytes:
    return rng.choice(
        (
            ESC + b"c",  # RIS
            ESC + b"#8",  # DECALN
            ESC + b"#3",
            ESC + b"#6",  # double height and width
            ESC + b"(0" + b"lqqk" + ESC + b"(B",  # DEC line drawing
            ESC + b")0\x0eab\x0f",
            ESC + b"*A",
            ESC + b"+<",
            ESC + b"N",
            ESC + b"O",  # SS2, SS3
            ESC + b"D" * 50,
            ESC + b"E" * 50,
            ESC + b"M" * 50,  # IND, NEL, RI
            ESC + b"7",
            ESC + b"8",
            ESC + b"=",
            ESC + b">",
            CSI + b"!p",  # DECSTR
            ESC + b" F",
            ESC + b"%G",
            ESC + b"\x00",
        )
    )


def _queries(rng: random.Random) -> bytes:
    return rng.choice(
        (
            CSI + b"c",
            CSI + b">c",
            CSI + b"=c",
            CSI + b"5n",
            CSI + b"6n",
            CSI + b"?6n",
            CSI + b">q",
            CSI + b"?2027$p",
            CSI + b"14t",
            CSI + b"18t",
            CSI + b"16t",
            CSI + b"?u",
            CSI + b"x",
            ESC + b"P$qm" + ST,
            ESC + b"P+q544e" + ST,
            OSC + b"10;?" + ST,
            OSC + b"4;1;?" + BEL,
        )
    )


def _lines(rng: random.Random) -> bytes:
    line = _text(rng)[: rng.choice((0, 10, 159, 160, 161, 499, 500, 501))]
    return (line + rng.choice((b"\r\n", b"\n", b"\r", b"\x0b\x0c"))) * rng.randrange(1, 400)


def _window(rng: random.Random) -> bytes:
    return CSI + rng.choice((b"8;", b"4;", b"3;", b"22;", b"23;", b"1", b"2", b"9;1")) + _params(rng, 2) + b"t"


def _kitty(rng: random.Random) -> bytes:
    return CSI + rng.choice((b">", b"<", b"=", b"?")) + _count(rng) + b"u"


PIECES: tuple[Callable[[random.Random], bytes], ...] = (
    _text,
    _wide,
    _broken_utf8,
    _c0,
    _c1,
    _csi_any,
    _rep,
    _rep,
    _cursor,
    _edge,
    _region,
    _edit,
    _erase,
    _tabs,
    _screens,
    _screens,
    _modes,
    _hyperlink,
    _hyperlink,
    _hyperlink_run,
    _osc,
    _dcs,
    _apc,
    _pm_sos,
    _sgr,
    _escapes,
    _queries,
    _lines,
    _window,
    _kitty,
)


def piece(index: int, seed: int) -> bytes:
    """Piece family ``index`` drawn with ``seed``: what the hypothesis strategy composes."""
    return PIECES[index % len(PIECES)](random.Random(seed))


def soup(seed: int, pieces: int = 40) -> bytes:
    """``pieces`` pieces of soup, the same for the same seed."""
    rng = random.Random(seed)
    return b"".join(piece(rng.randrange(len(PIECES)), rng.getrandbits(32)) for _ in range(pieces))


def chunks(seed: int, data: bytes, parts: int) -> list[bytes]:
    """``data`` cut at ``parts - 1`` seeded points (anywhere: inside a sequence, inside a character)."""
    rng = random.Random(seed ^ 0x5EED)
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(parts - 1))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
