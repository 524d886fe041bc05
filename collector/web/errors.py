"""The errors only requests raise (their place in the one tree is drawn in ``collector/store/errors.py``)."""

from __future__ import annotations

from ..store.errors import CollectorError


class InvalidBaseline(CollectorError):
    status_code = 422
    code = "invalid_baseline"


class PayloadTooLarge(CollectorError):
    status_code = 413
    code = "payload_too_large"


class BadEncoding(CollectorError):
    status_code = 415
    code = "unsupported_encoding"


class BadGzip(BadEncoding):
    status_code = 400
    code = "invalid_gzip"


class Busy(CollectorError):
    status_code = 429
    code = "busy"
