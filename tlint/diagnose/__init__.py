"""`tlint diagnose`: read a training run's logs, find what went wrong, compare two runs.

Readers (`tlint.diagnose.readers`) turn a run folder or file into a `Run`: step-indexed
series (loss, eval loss, gradient norm, learning rate, throughput, pad share) and the
recorded configuration. They read text formats with the standard library and TensorBoard
event files through the `tensorboard` package; nothing is unpickled or `torch.load`ed.
`tlint.diagnose.findings` finds spikes, non-finite steps, divergence, a stuck loss, gradient
explosions, the applied learning-rate schedule, train/eval gaps and throughput drops, each
with the static rules and verify probes that test its likely causes, ranked.
`tlint.diagnose.compare` finds where two runs separate and how their configurations differ.
"""
