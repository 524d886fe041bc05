"""A plugin for one measurement (``FLOPFLEET_PLUGINS=benchmarks.attention_without_cudnn``, in the agent and so in its
measuring processes): torch's scaled_dot_product_attention without its cuDNN backend, so that the layer cells run
flash or memory-efficient attention instead. What it answers (issue 32): how much of a run's time cuDNN's attention
graphs, built once per shape and per thread, cost, and how far the layer figures move without them. Not a suite
setting: the suite measures the attention transformers gets by default."""

import torch

torch.backends.cuda.enable_cudnn_sdp(False)
