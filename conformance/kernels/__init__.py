"""The custom-kernel suite: custom ops a kernel library registers, checked on a device.

`neuron-check kernels TARGET` imports TARGET (a Python file or an importable module), finds
every op in the namespaces it registered, and checks each op in each dtype (WorkItem
("kernels", "NS::NAME", variant, dtype, mode)):

    variant                        mode      judged
    opcheck.schema                 eager     torch.library.opcheck's test_schema
    opcheck.fake                   eager     ... test_faketensor (fake kernel exists, right metadata)
    opcheck.autograd_registration  eager     ... test_autograd_registration
    opcheck.aot_dispatch_dynamic   eager     ... test_aot_dispatch_dynamic
    forward                        both      the device against the reference, by the numerics rule
    backward (--grad)              both      gradients, the same way

In compile mode forward and backward run through torch.compile(fullgraph=True) of a function
that calls the op: a graph break at the op fails the item, and with --dynamic a second shape
must not recompile.

What TARGET declares with this module (imports nothing heavy, so a library can import it freely):

    @reference("NS::NAME")      a function with the op's signature: the reference (default: the
                                op's own CPU or CompositeExplicitAutograd kernel, run on the CPU)
    @samples("NS::NAME")        fn(device, dtype, requires_grad) yielding (args, kwargs)
    family("NS::NAME", "attention")   the op's samples come from a family generator
                                (attention, moe, norm, rotary, softmax, matmul)
"""

from conformance.kernels.declare import family, reference, samples

__all__ = ["family", "reference", "samples"]
