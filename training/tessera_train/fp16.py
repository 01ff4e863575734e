"""The same ONNX network in half precision: fp16 weights and constants, a cast after each input
and before each output, so that callers still pass and receive fp32."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _half(t: TensorProto) -> TensorProto:
    if t.data_type != TensorProto.FLOAT:
        return t
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)


def to_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    graph = model.graph
    inputs = [i.name for i in graph.input]
    outputs = [o.name for o in graph.output]
    rename = {name: f"{name}_fp16" for name in inputs + outputs}
    nodes = [helper.make_node("Cast", [i], [rename[i]], to=TensorProto.FLOAT16) for i in inputs]
    for n in graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(n)
        node.input[:] = [rename.get(i, i) for i in n.input]
        node.output[:] = [rename.get(o, o) for o in n.output]
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                attr.t.CopyFrom(_half(attr.t))
        nodes.append(node)
    nodes += [helper.make_node("Cast", [rename[o]], [o], to=TensorProto.FLOAT) for o in outputs]
    inits = [_half(t) for t in graph.initializer]
    g = helper.make_graph(nodes, graph.name + "-fp16", list(graph.input), list(graph.output),
                          inits)
    m = helper.make_model(g, opset_imports=list(model.opset_import), producer_name="tessera")
    m.ir_version = model.ir_version
    onnx.checker.check_model(m)
    return m
