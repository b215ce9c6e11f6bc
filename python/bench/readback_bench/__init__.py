"""The parts of python/bench/bench.py, the benchmark of sized_readback in PyTorch: the machine
a run measured (machine), the summaries of samples (summary), the binding's own cost (binding),
the torch.compile checks (torch_compile), the targets (targets) and the Markdown table
(report). bench.py runs them and writes the JSON."""
