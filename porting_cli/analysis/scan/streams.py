"""CUDA streams, events and graphs."""

from __future__ import annotations

from .base import ReferenceFamily
from .calls import rebuilt_call

STREAM = ("torch.cuda.Stream", "torch.cuda.streams.Stream")
STREAM_CONTEXT = ("torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.current_stream",
                  "torch.cuda.default_stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream")
EVENT = ("torch.cuda.Event", "torch.cuda.streams.Event")
GRAPH = ("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.graphs",
         "torch.cuda.make_graphed_callables", "torch.cuda.graph_pool_handle")


class StreamsVisitor(ReferenceFamily):
    family = "streams"
    triggers = (r"cuda",)
    claims = STREAM + STREAM_CONTEXT + EVENT + GRAPH + ("torch.cuda.streams",)

    def on_reference(self, node, qn: str) -> None:
        if qn in STREAM:
            call = self.call_of(node)
            if call is not None and not call.args and not call.keywords:
                self.report(node, "NC601", edit_node=call, edit=lambda view: rebuilt_call(
                    view, call, "torch.Stream", [self.ctx.device()], []))
            else:
                self.report(node, "NC601")
        elif qn in STREAM_CONTEXT:
            self.report(node, "NC602", detail=f"`{qn}`")
        elif qn in EVENT:
            self.report(node, "NC603")
        elif qn in GRAPH or qn.startswith("torch.cuda.graphs."):
            self.report(node, "NC604", detail=f"`{qn}`")
