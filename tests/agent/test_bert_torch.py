"""The health profile's plain-torch BERT layer is transformers' BertLayer without the import: the same parameter
names, the same outputs and gradients for the same weights and dropout draws, and a measuring process that runs
it never imports transformers (what makes `flopfleet-agent check` fast). Its TFLOPS side by side with
transformers' on the H200: docs/results/h200.md."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent.benchmarks.bert_torch import TorchBertLayerBenchmark, torch_bert_layer
from agent.benchmarks.layers import LayerGrid
from agent.errors import Unsupported
from agent.harness.suites import HEALTH
from agent.models import families
from schemas.health_figures import health_figure
from tests.conftest import ROOT

SHAPE = families.SHAPES["bert-tiny"]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("training", [False, True])
def test_it_computes_what_transformers_computes(attn: str, training: bool) -> None:
    import torch

    theirs = families.block(SHAPE, "bert_layer", attn)
    mine = torch_bert_layer(SHAPE, attn)
    mine.load_state_dict(theirs.state_dict(), strict=True)  # every parameter, under the same name
    theirs.train(training)
    mine.train(training)
    x = torch.randn(3, 24, SHAPE.hidden, requires_grad=True)
    outputs, grads = [], []
    for layer in (theirs, mine):
        torch.manual_seed(7)  # the same dropout draws, in the same order
        out = layer(x)
        out = out[0] if isinstance(out, tuple) else out
        (grad,) = torch.autograd.grad(out.square().sum(), x)
        outputs.append(out)
        grads.append(grad)
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-4)
    if training:  # dropout was on: the outputs differ from an eval pass
        theirs.eval()
        assert not torch.allclose(theirs(x)[0] if isinstance(theirs(x), tuple) else theirs(x), outputs[0])


def test_other_attention_is_unsupported_by_name() -> None:
    with pytest.raises(Unsupported, match="flash_attention_2"):
        torch_bert_layer(SHAPE, "flash_attention_2")


def test_it_gives_the_health_figure_and_says_whose_code_it_is() -> None:
    bench = HEALTH.benchmarks(only=("layer_bert_torch",))[0]
    assert isinstance(bench, TorchBertLayerBenchmark) and bench.WARM == ()
    small = TorchBertLayerBenchmark(LayerGrid(model="bert-tiny", seq_lens=(16,), batches=(2,), dtypes=("fp32",),
                                              modes=("fwd+bwd",)))  # fmt: skip
    from agent.devices.target import cpu_target
    from agent.harness.suites import QUICK
    from agent.machine.monitor import Monitor
    from agent.run.runner import run_cases

    (result,) = run_cases([small], [cpu_target()], [], QUICK.policy, Monitor(None, {}))
    assert result.status == "ok" and result.params.implementation == "torch"  # type: ignore[union-attr]
    assert result.params.attn_implementation == "sdpa"  # type: ignore[union-attr]
    fp16 = result.model_copy(update={"params": result.params.model_copy(update={"dtype": "fp16"})})
    assert health_figure(fp16) == "bert_fwdbwd"  # the same figure as transformers' layer gives


def test_a_measuring_process_running_it_never_imports_transformers() -> None:
    """What a measuring child does with the health profile's layer case (agent/launchers/child.py: warm, then the
    case), in a fresh interpreter that then says whether transformers was imported."""
    code = """
import sys
from agent.benchmarks.bert_torch import TorchBertLayerBenchmark
from agent.benchmarks.layers import LayerGrid
from agent.harness.cases import CaseContext, measure_case
from agent.launchers import child
from agent.harness.suites import QUICK
from agent.devices.target import cpu_target
child.refuse_unused_imports()
child.warm(list(TorchBertLayerBenchmark.WARM))
bench = TorchBertLayerBenchmark(LayerGrid(model="bert-tiny", seq_lens=(8,), batches=(1,), dtypes=("fp32",),
                                          modes=("fwd+bwd",)))
target = cpu_target()
(case,) = bench.cases(target)
measured = measure_case(bench, case, CaseContext(target, QUICK.policy))
assert measured.status == "ok", measured.reason
print("transformers" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
