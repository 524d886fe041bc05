"""The models the benchmarks build: shapes and builders for the layer and training families, and Llama (transformers'
and the lean plain-torch one, with its ops seam and Triton kernels). Nothing here is imported to plan a suite."""
