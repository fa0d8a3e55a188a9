"""What the bytes at a request boundary are: HTTP/1.x, or something the canary records raw.

An HTTP/2 preface (every gRPC client), a TLS ClientHello or random bytes are no request:
the framer (``framing``) asks ``sniff`` at the start of every request, the first of a
connection and each one after, and records them raw as soon as the verdict is in.
Everything here is a pure function over bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

# RFC 9113 §3.4: the client connection preface of HTTP/2 with prior knowledge, what every
# gRPC client (containerd, CRI-O, BuildKit) sends first.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# sniff's window: a first line longer than this without its end is "request line too long"
# here (aiohttp's and llhttp's limit). Go has no limit per line, so the framer takes a longer
# line that is still a request line on, up to Go's head limit (framing.MAX_HEAD, rt4 C2).
MAX_REQUEST_LINE = 8190

# RFC 9110 §5.6.2 token characters: what a method may be made of.
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_REQUEST_LINE = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+ [\x21-\x7e\x80-\xff]+ HTTP/1\.[0-9]\r?\n")


class Kind(Enum):
    NEED_MORE = "need-more"
    HTTP1 = "http1"
    RAW = "raw"


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    raw_kind: str = ""  # for RAW: h2-preface | tls | garbage | incomplete
    summary: str = ""  # for RAW: what `canary show` prints after "raw: "


NEED_MORE = Verdict(Kind.NEED_MORE)
HTTP1 = Verdict(Kind.HTTP1)


def _raw(raw_kind: str, summary: str) -> Verdict:
    return Verdict(Kind.RAW, raw_kind, summary)


def _could_start_request_line(buf: bytes) -> bool:
    """True when ``buf`` (no newline yet) is still a prefix of some HTTP/1.x request line."""
    method_end = buf.find(b" ")
    method = buf if method_end < 0 else buf[:method_end]
    if not method or any(byte not in _TOKEN for byte in method):
        return not method and not buf  # empty buffer: nothing decided yet
    if method_end < 0:
        return True
    rest = buf[method_end + 1:]
    target_end = rest.find(b" ")
    target = rest if target_end < 0 else rest[:target_end]
    if any(byte <= 0x20 or byte == 0x7F for byte in target):
        return False
    if target_end < 0:
        return True
    if not target:
        return False
    version = rest[target_end + 1:]
    wanted = b"HTTP/1."
    if len(version) <= len(wanted):
        return wanted.startswith(version)
    return version.startswith(wanted) and version[len(wanted):len(wanted) + 1].isdigit() and (
        version[len(wanted) + 1:] in (b"", b"\r"))


def sniff(buf: bytes, eof: bool = False) -> Verdict:
    """Classify the first bytes ``buf`` of a connection; ``eof``: the peer sent nothing more.

    Returns NEED_MORE only when more bytes could still change the verdict, so a caller that
    buffers until a verdict never holds more than ``MAX_REQUEST_LINE`` bytes.
    """
    if not buf:
        return _raw("incomplete", "closed before any byte") if eof else NEED_MORE
    if buf.startswith(H2_PREFACE):
        return _raw("h2-preface", "h2 preface")
    if H2_PREFACE.startswith(buf):
        return _raw("incomplete", "part of an h2 preface") if eof else NEED_MORE
    if buf[0] == 0x16 and (len(buf) < 2 or buf[1] == 0x03):
        # TLS record header: content type 22 (handshake), then version major 3 (RFC 8446 §5.1).
        if len(buf) < 2:
            return _raw("incomplete", "one byte 0x16") if eof else NEED_MORE
        return _raw("tls", tls_summary(buf))
    newline = buf.find(b"\n")
    if newline >= 0:
        if _REQUEST_LINE.fullmatch(buf[:newline + 1]):
            return HTTP1
        return _raw("garbage", "not HTTP/1.x")
    if len(buf) >= MAX_REQUEST_LINE:
        return _raw("garbage", "request line too long")
    if not _could_start_request_line(buf):
        return _raw("garbage", "not HTTP/1.x")
    return _raw("incomplete", "half a request line") if eof else NEED_MORE


def tls_summary(buf: bytes) -> str:
    """``TLS ClientHello (SNI host)`` from a TLS record, as far as ``buf`` holds it."""
    sni = client_hello_sni(buf)
    if buf[5:6] != b"\x01":
        return "TLS"
    return f"TLS ClientHello (SNI {sni})" if sni else "TLS ClientHello"


def client_hello_sni(buf: bytes) -> str | None:
    """The server_name of a TLS ClientHello (RFC 8446 §4.1.2, RFC 6066 §3), or None.

    Never raises: every length is checked against what is actually there.
    """
    pos = 5 + 4  # record header, handshake header
    if len(buf) < pos or buf[5] != 0x01:
        return None
    pos += 2 + 32  # legacy_version, random
    if pos >= len(buf):
        return None
    pos += 1 + buf[pos]  # legacy_session_id
    if pos + 2 > len(buf):
        return None
    pos += 2 + int.from_bytes(buf[pos:pos + 2], "big")  # cipher_suites
    if pos >= len(buf):
        return None
    pos += 1 + buf[pos]  # legacy_compression_methods
    if pos + 2 > len(buf):
        return None
    end = min(len(buf), pos + 2 + int.from_bytes(buf[pos:pos + 2], "big"))
    pos += 2
    while pos + 4 <= end:
        ext_type = int.from_bytes(buf[pos:pos + 2], "big")
        ext_len = int.from_bytes(buf[pos + 2:pos + 4], "big")
        body = buf[pos + 4:pos + 4 + ext_len]
        pos += 4 + ext_len
        if ext_type != 0:
            continue
        # server_name_list: u16 length, then entries of (u8 type, u16 length, name)
        if len(body) < 5 or body[2] != 0:
            return None
        name_len = int.from_bytes(body[3:5], "big")
        name = body[5:5 + name_len]
        if len(name) != name_len:
            return None
        return name.decode("ascii", "replace")
    return None
