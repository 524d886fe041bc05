"""Request bodies read under a size limit: streamed, gzip inflated with a cap, refused the moment they pass it."""

from __future__ import annotations

import zlib

from fastapi import Request

from ..errors import BadEncoding, BadGzip, PayloadTooLarge


async def read_body(request: Request, limit: int) -> tuple[bytes, bytes | None]:
    """The (inflated) body, empty if none came, and, if it came gzipped, the bytes as sent; refused with 413 as soon
    as it passes ``limit`` bytes on the wire or inflated, never read whole first."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip"):
        raise BadEncoding(f"Content-Encoding {encoding!r} is not supported; send identity or gzip")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is {declared} bytes; the limit is {limit}")
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else None
    chunks: list[bytes] = []
    sent: list[bytes] = []
    wire = size = 0
    async for chunk in request.stream():
        wire += len(chunk)
        if wire > limit:
            raise PayloadTooLarge(f"the body is over the limit of {limit} bytes")
        if inflate is not None:
            sent.append(chunk)
            try:
                # Inflate at most what is left under the limit: a gzip bomb stops here, not in memory.
                chunk = inflate.decompress(chunk, limit - size + 1)
            except zlib.error as exc:
                raise BadGzip(f"the body is not valid gzip: {exc}") from None
            if inflate.unconsumed_tail:
                raise PayloadTooLarge(f"the body inflates past the limit of {limit} bytes")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body inflates past the limit of {limit} bytes")
        chunks.append(chunk)
    if inflate is not None and not inflate.eof:
        raise BadGzip("the gzip body is truncated")
    return b"".join(chunks), b"".join(sent) if inflate is not None else None
