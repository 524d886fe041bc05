"""The one base every wire model inherits, and the bounded field types they share."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints


class WireModel(BaseModel):
    """Strict, closed, immutable and finite: a bad payload fails at the edge, not in a report."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        str_max_length=4096,
        validate_default=False,
    )


class Answer(WireModel):
    """What the collector answers: read ignoring fields the reader does not know, so that a newer collector may add
    one without an older agent losing the answer (docs/contract.md)."""

    model_config = ConfigDict(extra="ignore")


#: Short identifiers users type or filter on (benchmark names, model names, tag keys).
Slug = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")]
#: Human-readable labels (GPU names, versions, hostnames).
Label = Annotated[str, StringConstraints(min_length=1, max_length=256)]
#: Free text such as a failure reason.
Text = Annotated[str, StringConstraints(min_length=1, max_length=2000)]
#: Tag values: short free text.
TagValue = Annotated[str, StringConstraints(max_length=256)]

Seconds = Annotated[float, Field(ge=0.0, le=1e7)]
PositiveSeconds = Annotated[float, Field(gt=0.0, le=1e7)]
Rate = Annotated[float, Field(ge=0.0, le=1e12)]
Fraction = Annotated[float, Field(ge=0.0, le=1e3)]
#: A part of a whole: 0 to 1.
Share = Annotated[float, Field(ge=0.0, le=1.0)]
Count = Annotated[int, Field(ge=0, le=2**62)]
Positive = Annotated[int, Field(ge=1, le=2**62)]
Dim = Annotated[int, Field(ge=1, le=1 << 24)]
Mhz = Annotated[int, Field(ge=0, le=100_000)]
Watts = Annotated[float, Field(ge=0.0, le=100_000.0)]
Celsius = Annotated[int, Field(ge=-100, le=300)]
GpuIndex = Annotated[int, Field(ge=0, le=1023)]
