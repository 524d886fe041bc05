"""A published table as a baseline of its own (``import-reference``, and the ``reference_values`` an older
collector kept): its values, and the bundle they become."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from schemas.baselines import BaselineBundle, BaselineFigure, BaselineSource, CardBaseline, seal

from .errors import CollectorError
from .figures import BY_KEY

#: The published table's measured rows -> our figure keys (the rest are datasheet facts: theory, memory, price).
REFERENCE_METRICS = {
    "matmul_fp32_tflops": "matmul_fp32",
    "matmul_fp16_tflops": "matmul_fp16",
    "vector_mult_tflops": "vector",
    "bert_layer_fwd_tflops": "bert_fwd",
    "bert_layer_fwdbwd_tflops": "bert_fwdbwd",
    "gpt2_block_fwd_tflops": "gpt2_fwd",
    "gpt2_block_fwdbwd_tflops": "gpt2_fwdbwd",
    "t5_encoder_fwd_tflops": "t5_encoder_fwd",
    "t5_encoder_fwdbwd_tflops": "t5_encoder_fwdbwd",
    "t5_decoder_fwd_tflops": "t5_decoder_fwd",
    "t5_decoder_fwdbwd_tflops": "t5_decoder_fwdbwd",
}


@dataclass(frozen=True)
class ReferenceValue:
    card: str
    metric: str
    value: float
    unit: str | None
    source: str
    note: str | None


def published_bundle(values: list[ReferenceValue], exported_at: datetime) -> BaselineBundle:
    """A published table as a baseline: one ``published`` card per column, its measured rows as figures (our keys),
    the rest as datasheet facts. Its name is its source, so importing the same table again replaces it."""
    if not values:
        raise CollectorError("the reference table has no values")
    source, notes = values[0].source, values[0].note
    cards = []
    for card in dict.fromkeys(v.card for v in values):
        mine = [v for v in values if v.card == card]
        keys = {v.metric: REFERENCE_METRICS[v.metric] for v in mine if v.metric in REFERENCE_METRICS}
        figures = tuple(BaselineFigure(figure=keys[v.metric], unit=BY_KEY[keys[v.metric]].unit, value=v.value)
                        for v in mine if v.metric in keys)  # fmt: skip
        facts = {v.metric: v.value for v in mine if v.metric not in REFERENCE_METRICS}
        cards.append(CardBaseline(card=card, kind="published", figures=figures, facts=facts, note=notes))
    return seal(source, BaselineSource(collector=None, exported_at=exported_at, description=notes), cards)
