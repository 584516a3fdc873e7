"""The TorchAO suite (`neuron-check quant`): torchao's quantization recipes and low-precision
training on a device, judged against the same recipe on the CPU (docs/quant.md)."""
