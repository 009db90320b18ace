"""Every program the fuzzer (and issue 17) found acrobat wrong on, shrunk, as a regression test.

Each is a small module over ``tests.fuzz.world`` run by the fuzz oracle:
plain Python per instance against the batched run on both backends, at
the batch sizes given. The comment above each says what acrobat did.
"""

from __future__ import annotations

import pytest

from tests.fuzz.generator import FuzzProgram
from tests.fuzz.oracle import check

HEAD = "import math\nimport torch\nimport torch.nn.functional as F\nimport acrobat as ab\n\n"

CASES = {
    # a while test holding a sum over a list: its statements run before the loop and again at the end of the body,
    # and the copy of the segment block had the block's own id and node ids (two blocks of id 1; the pass check
    # found it: InternalError, or the dynamic tier with a DynamicFallbackWarning); the copy now adds a node of
    # the one block (seeds 129, 233, 534 of the expert-heavy generator)
    "while_test_with_a_list_sum": ("nary", '''
@ab.function
def rec(node, p):
    if len(node.children) == 0:
        return p.emb[node.word % 7]
    hs = []
    for c in node.children:
        hs.append(rec(c, p))
    l = torch.stack(hs).sum(0)
    n1 = 0
    while n1 < 1 and torch.stack(hs).sum(0).sum() > 0.1:
        n1 = n1 + 1
    return l

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    # horizontal fusion grouped `h @ p.U` with `h @ p.Ws[k % 3]`, a weight chosen per instance (a lookup, not a
    # shared parameter of the block): KeyError ('s', 4) in the compiler (seed 522)
    "fusion_beside_a_chosen_weight": ("seq", '''
@ab.program
def main(inst, p):
    h = p.h0
    for x1 in inst:
        x1 = p.steps
        if 0 > 0:
            return torch.tanh(torch.cat([p.lstm(F.relu(h @ p.U))[0], torch.tanh(h @ p.Ws[(x1) % 3])]) @ p.W2)
    return h
'''),
    # a dict variable assigned twice, its "h" item first a block's tensor and then a shared value: the
    # skeleton lifted the item into a handle (the variable's joined kind) but the return's result layout
    # took the last assignment's kind (shared), so `run` returned the int handle 33554432 for `d1["h"]`,
    # a silent wrong answer (long fuzz run, seed 900004)
    # the same for a tuple item: `t = (tanh(...), h); t = (h, t[1])` returned a handle for `t[0]`
    "tuple_item_shared_after_tensor": ("seq", '''
@ab.program
def main(inst, p):
    h = p.h0
    t = (torch.tanh(p.lin(h)), h)
    t = (h, t[1])
    return (p.h0, t)
'''),
    "dict_item_shared_after_tensor": ("seq", '''
@ab.program
def main(inst, p):
    h = p.h0
    d1 = {"h": torch.tanh(p.lin(h)), "c": h}
    d1 = {"h": h, "c": d1["c"]}
    return (p.h0, d1)
'''),
    # the shape of an inline attention over a stacked list (`(softmax(S @ l) @ S).shape[0]` in a tensor
    # expression) left a value read on the list of rows the contraction sums: `_rt.value(list)`, a TypeError
    # (InternalError); the rows' list and each row no longer carry the read (long fuzz run, seed 800030)
    # the same read by host code (`k = (softmax(S @ l) @ S).shape[0]`; seeds 800479, 800509)
    "host_shape_of_an_inline_contraction": ("nary", '''
@ab.function
def rec(node, p):
    if len(node.children) == 0:
        return p.emb[node.word % 7]
    hs = []
    for c in node.children:
        hs.append(rec(c, p))
    l = torch.stack(hs).sum(0)
    k1 = (torch.softmax(torch.stack(hs) @ l, dim=0) @ torch.stack(hs)).shape[0]
    return l * k1

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    "shape_of_an_inline_contraction": ("nary", '''
@ab.function
def rec(node, p):
    if len(node.children) == 0:
        return p.emb[node.word % 7]
    hs = []
    for c in node.children:
        hs.append(rec(c, p))
    l = torch.stack(hs).sum(0)
    l = ((torch.softmax(torch.stack(hs) @ l, dim=0) @ torch.stack(hs)) + torch.zeros((torch.softmax(torch.stack(hs) @ l, dim=0) @ torch.stack(hs)).shape[0], dtype=(torch.softmax(torch.stack(hs) @ l, dim=0) @ torch.stack(hs)).dtype))
    return l

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    # the items of a shared value unpacked (`a, b = torch.chunk(torch.cat([h, h]), 2)` over weights) were each
    # the whole tuple in the shared-value prologue (a TypeError for `a @ W`; `a[0]` would have read the wrong
    # tensor); each item is now its own slot (long fuzz run, seed 700003)
    "items_of_a_shared_tuple": ("seq", '''
@ab.program
def main(inst, p):
    h = p.h0
    a1, b2 = tuple(torch.chunk(torch.cat([h, h]), 2))
    c1, c2 = torch.chunk(p.W, 2)
    d3 = {"h": torch.tanh(a1 @ p.W + p.b), "c": h}
    return h, d3["h"], c1[0] + c2[1] + p.emb[inst[0]]
'''),
    # one hoisted block held `p.emb[k]` (static depth 0) and `torch.exp(l)` of a recursion's result (depth 1): the
    # block ran at depth 1, where the parent's block read `p.emb[k]` as of depth 0 (internal scheduling error: a
    # value was needed before it was computed); such statements now get a block each (long fuzz run, seed 600026)
    "hoisted_value_computed_late": ("tree", '''
@ab.function
def rec(node, p):
    if node.is_leaf:
        return p.h0
    l = rec(node.left, p)
    r = rec(node.right, p)
    l = torch.exp(-l.abs())
    return p.emb[(0) % 7]

@ab.program
def main(inst, p):
    h = rec(inst, p)
    return h
'''),
    # a parameter passed a shared value and assigned a per-instance one in the body (`x = tanh(x @ W)`) has a
    # tensor variable's kind: its block took the shared value for a DFG handle (TypeError: a Parameter, not a
    # handle); the function now lifts it on entry (long fuzz run, seed 600020)
    "shared_parameter_reassigned": ("seq", '''
@ab.function
def cell(x, h, p, s=1.0):
    x = torch.tanh(x @ p.W + p.b)
    return x

@ab.program
def main(inst, p):
    h = p.h0
    t = cell(h, h, p)
    return h, t
'''),
    # a hoisted block reading a variable an earlier hoisted block computed ran at the same depth as it
    # (internal scheduling error: a value was needed before it was computed)
    "hoisted_block_after_hoisted_call": ("seq", '''
@ab.function
def inner(x, p):
    return torch.tanh(x @ p.W)

@ab.program
def main(inst, p):
    return inner(p.emb[inst[0]], p) @ p.U
'''),
    # a value read inside an operator (`h * h.max().item()`) was evaluated before the block computing h
    "inline_item_read": ("seq", '''
@ab.program
def main(inst, p):
    h = torch.tanh(p.emb[inst[0]] @ p.W)
    return h * h.max().item()
'''),
    "inline_index_read": ("seq", '''
@ab.program
def main(inst, p):
    h = torch.tanh(p.emb[inst[0]] @ p.W)
    return p.emb[int(torch.argmax(h))] * h
'''),
    # shape arithmetic of a tensor computed in the same block (NameError in the skeleton)
    "split_by_own_size": ("seq", '''
@ab.program
def main(inst, p):
    y = torch.tanh(torch.cat([p.emb[inst[0]], p.h0]) @ p.W2)
    a, b = torch.split(torch.cat([y, y]), y.size(0) // 2 * 2)
    return a * b
'''),
    # a value read of a dict item in a while loop (`int` object has no attribute `max`)
    "read_of_dict_item_in_loop": ("seq", '''
@ab.program
def main(inst, p):
    d = {"h": p.emb[inst[0]], "c": p.h0}
    n = 0
    while n < 2:
        n = n + 1
        d = {"h": d["h"] * float(d["h"].max()), "c": d["c"]}
    return d["h"]
'''),
    # host data in the parameters (p.steps, p.scale) was taken for shared tensors: `k += 1` rejected, a float
    # joined with 0.5 rejected
    "shared_host_numbers": ("seq", '''
@ab.program
def main(inst, p):
    k = p.steps
    k += 1
    f = p.scale
    if len(inst) > 2:
        f = 0.5
    return p.emb[k % 7] * f
'''),
    # `.item()` of a shared tensor is a Python number for host code
    "item_of_shared_tensor": ("seq", '''
def clip(k):
    return min(max(k, 0), 3)

@ab.program
def main(inst, p):
    k = clip((p.h0 * p.h0).argmax().item())
    return p.emb[k]
'''),
    # a list variable of shared values stacked: the prologue read the instance's list (NameError)
    "stack_of_shared_list": ("seq", '''
@ab.program
def main(inst, p):
    xs = [p.h0]
    return torch.stack(xs).sum(0) * float(torch.stack(xs).sum(0).max())
'''),
    # torch.chunk of a hoisted value split into its own block: a tuple crossed a block boundary
    "chunk_item_of_module": ("seq", '''
@ab.program
def main(inst, p):
    pr = (torch.tanh(p.emb[inst[0]] @ p.W), p.h0)
    if 0 % 2 == 0:
        return p.lstm(torch.chunk(torch.cat([p.h0, pr[0]]), 2)[0])[0]
    return p.h0
'''),
    # an LSTMCell state kept whole and unpacked later (TypeError: cannot unpack an int)
    "lstm_state_kept_whole": ("seq", '''
@ab.program
def main(inst, p):
    state = p.lstm(p.emb[inst[0]])
    for tok in inst[1:]:
        state = p.lstm(p.emb[tok], state)
    h, c = state
    return h + c
'''),
    # a shared op whose kind became a tuple of tensors in a later fixpoint iteration stayed a prologue value
    "chunk_in_carried_loop": ("seq", '''
@ab.function
def cell(x, h, p):
    return torch.tanh(x @ p.W) + h

@ab.program
def main(inst, p):
    h = p.h0
    for tok in inst:
        h = torch.chunk(torch.cat([cell(h, h, p), p.emb[tok]]), 2)[0]
    return h
'''),
    # a while test's statements copied to the end of the body shared node ids with the first copy (NameError)
    "while_test_with_block": ("nary", '''
@ab.function
def rec(node, p):
    if len(node.children) == 0:
        return p.emb[node.word % 7]
    l = torch.stack([rec(c, p) for c in node.children]).sum(0)
    n = 0
    while n < 2 and float(torch.tanh(l @ p.Ws[0]).max()) > 0.1:
        n = n + 1
        l = l * 0.5
    return l

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    # a call returning a shared value inside a value read: the prologue could not print the call
    "shared_result_of_a_call": ("seq", '''
@ab.function
def same(x, h, p):
    return p.h0

@ab.program
def main(inst, p):
    l = p.emb[inst[0]]
    return same(l, l, p) * float(same(l, l, p).max())
'''),
    # a call in a while test: deepcopy duplicated the function object (KeyError of a specialization)
    "call_in_while_test": ("seq", '''
@ab.function
def same(x, h, p):
    return p.h0

@ab.program
def main(inst, p):
    h = p.h0
    n = 0
    while n < 1 and int(torch.argmax(same(h, h, p))) == 0:
        n = n + 1
    return h
'''),
    # a stacked list times a call result not yet analysed: rejected as a "bottom operand"
    "attention_over_visited": ("tree", '''
@ab.function
def rec(node, p):
    if node.is_leaf:
        return p.emb[node.word % 7]
    return torch.tanh((rec(node.left, p) + rec(node.right, p)) @ p.W)

@ab.function
def visit(node, p, outs):
    outs.append(torch.tanh(p.emb[node.word % 7] @ p.W))
    for c in [node.left, node.right] if not node.is_leaf else []:
        visit(c, p, outs)

@ab.program
def main(inst, p):
    h = rec(inst, p)
    outs = [h]
    visit(inst, p, outs)
    return torch.softmax(torch.stack(outs) @ h, dim=0) @ torch.stack(outs)
'''),
    # model variables named like generated code (_d, _rt, _h, _S) and a local shadowing a builtin the
    # skeleton calls (max)
    "names_of_generated_code": ("tree", '''
@ab.function
def rec(node, p):
    if node.is_leaf:
        _d = p.emb[node.word % 7]
        return _d
    _rt, _h = ab.concurrent(rec(node.left, p), rec(node.right, p))
    max = 2
    _S = torch.tanh((_rt + _h) @ p.W) * max
    return _S

@ab.program
def main(inst, p):
    _t0 = rec(inst, p)
    return _t0
'''),
    # a shape read inside an operator (`p.Ws[l.shape[0] % 3]`) made its block take l and run inline, but the
    # kind of its result stayed hoisted, so a later hoisted block read it before it was computed (internal
    # scheduling error; found by the fuzzer once it drew other programs, issue 18)
    "shape_read_in_an_operator_of_a_recursive_value": ("nary", '''
@ab.function
def rec(node, p):
    if len(node.children) == 0:
        return p.emb[node.word % 7]
    hs = []
    for c in node.children:
        hs.append(rec(c, p))
    l = torch.stack(hs).sum(0)
    l = torch.tanh(p.emb[(0) % 7] @ p.Ws[(l.shape[0]) % 3])
    k5 = int(torch.argmax(l))
    return l

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    # the same, the shape read indexing a parameter (`p.emb[l.shape[0] % 7]`: a lookup, per instance)
    "shape_read_in_a_lookup_of_a_recursive_value": ("tree", '''
@ab.function
def rec(node, p):
    if node.is_leaf:
        return p.emb[node.word % 7]
    l = rec(node.left, p)
    r = rec(node.right, p)
    l = p.emb[(l.shape[0]) % 7]
    return l

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    # a loop appending to a list through an alias (`ys = hs; ys.append(l)`) while reading it (`torch.stack(hs)`)
    # was taken for a map loop (iterations at one depth): the alias hid the loop-carried list
    "alias_append_in_a_loop_reading_the_list": ("nary", '''
@ab.function
def rec(node, p):
    if len(node.children) == 0:
        return p.emb[node.word % 7]
    hs = []
    for c in node.children:
        hs.append(rec(c, p))
    l = torch.stack(hs).sum(0)
    for x4 in [0, 0]:
        for i5 in range(2):
            l = torch.stack(hs).sum(0)
            ys6 = hs
            ys6.append(l)
    return l

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    # two calls in one expression, made concurrent by inference (no ab.concurrent), with a value read between
    "inferred_concurrent_calls": ("tree", '''
@ab.function
def rec(node, p):
    if node.is_leaf:
        return p.emb[node.word % 7]
    h = torch.tanh(torch.cat([rec(node.left, p), rec(node.right, p)]) @ p.W2)
    if h.sum() > 0:
        h = -h
    return h

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    # found by the long fuzz run of session 9 (seed 4000134): an inferred concurrent call whose calls are the
    # arguments of a program call themselves; the concurrent call ran them and the statement made them again
    # (every recursive `f(rec(l), rec(r))` did 2**depth times the work), and here the second copy's block read a
    # shared slot it did not take (an internal error: the program ran in the dynamic tier)
    "calls_as_arguments_of_a_call": ("nary", '''
@ab.function
def cell1(x, h, p, s=1.0):
    return x

@ab.function
def rec(node, p):
    if len(node.children) == 0:
        return p.emb[node.word % 7]
    hs = []
    for c in node.children:
        hs.append(rec(c, p))
    l = torch.stack(hs).sum(0)
    ys5 = hs
    ys5.append(cell1(torch.tanh(cell1(l, l, p) @ p.W + p.b), cell1(torch.tanh(torch.cat([l, l]) @ p.W2), l, p), p))
    return l

@ab.program
def main(inst, p):
    return rec(inst, p)
'''),
    # found by the long fuzz run of session 9 (seed 5000181): the shape of a value computed from shared values
    # only (a program call over parameters) was typed a per-instance tensor, and its block returned an int (an
    # internal error: the batch ran in the dynamic tier)
    "shape_of_a_shared_call": ("seq", '''
@ab.function
def cell1(x, h, p, s=1.0):
    return torch.tanh(p.h0 @ p.W + p.b)

@ab.program
def main(inst, p):
    k4 = cell1(p.h0 - p.h0, torch.exp(-p.h0.abs()), p, 0.25).shape[0]
    return (p.h0 * k4, k4)
'''),
    # found by long fuzz runs (seed 10100207, session hunt8): `p.h0.size(0)` of a shared tensor was typed a shared
    # tensor, so the host list `ws[1:] + [p.h0.size(0)]` became an operator of a static block with the batched
    # host operand `ws[1:]` (`unsupported operand type(s) for +: 'Tensor' and 'list'`: an internal error; the batch
    # ran in the dynamic tier); a metadata read of a shared tensor is now host data the same for every instance
    # (`_Analyzer.shared_metadata`), and the list is host code's
    "size_of_a_shared_tensor_in_a_host_list": ("doc", '''
@ab.program
def main(inst, p):
    ws = list(range(len(inst.tokens) // 9 + 3))  # 3 items: the instance's tokens are 1 to 6
    e = F.embedding(torch.LongTensor(ws[1:] + [p.h0.size(0)]) % 7, p.embed.weight).mean(0)
    return e * p.h0.size(0)
'''),
    # found by long fuzz runs (seed 10400214, session hunt8): `torch.zeros(S.max(0).values.shape[0], dtype=...)`
    # with `S` of `torch.tensor(toks)`: building the rows of `torch.tensor(toks)` first put the size, evaluated
    # before them, in a variable, a per-instance host number, so the factory was built as a stacked list of rows
    # made by host code, whose `dtype=S.max(0).values.dtype` shared its nodes with each row's block: the block's
    # metadata read took the value read off host code's (`_t[0].dtype` of a handle: `'int' object has no attribute
    # 'dtype'`, an internal error; the batch ran in the dynamic tier). Now the rows' pass puts the read's object
    # alone in a variable (`rows._into_variable`: the shape read stays in the block, no stacked list), and the host
    # call's keywords are copies of the row's (`sized.host_rows_call`; the second case, a size of `len(toks)`)
    "dtype_of_a_segment_result_for_a_factory": ("doc", '''
@ab.program
def main(inst, p):
    toks = list(inst.tokens)
    return (p.embed(torch.tensor(toks) % 7).max(0).values + torch.zeros(p.embed(torch.tensor(toks) % 7).max(0).values.shape[0], dtype=p.embed(torch.tensor(toks) % 7).max(0).values.dtype))
'''),
    "dtype_of_a_segment_result_for_sized_rows": ("doc", '''
@ab.program
def main(inst, p):
    toks = list(inst.tokens)
    return torch.zeros(len(toks), dtype=p.embed(torch.tensor(toks) % 7).max(0).values.dtype).sum() + p.h0
'''),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_regression(name):
    kind, body = CASES[name]
    program = FuzzProgram(HEAD + body, kind, "float32", {}, (1, 5, 12), set())
    out = check(program, ("eager",))
    assert out.category == "ok", str(out)


@pytest.mark.parametrize("name", ["dict_item_shared_after_tensor", "tuple_item_shared_after_tensor", "lstm_state_kept_whole", "chunk_item_of_module", "while_test_with_block",
                                  "shared_parameter_reassigned", "hoisted_value_computed_late",
                                  "shape_of_an_inline_contraction"])
def test_regression_compiled(name):
    kind, body = CASES[name]
    out = check(FuzzProgram(HEAD + body, kind, "float64", {}, (3, 9), set()), ("compiled",))
    assert out.category == "ok", str(out)


# Found by probing the fuzzer's new in-place writes on a `Doc` instance's tensor (session hunt3): a write through
# a *view* of a tensor after a launch that reads it. The static tier rejects such programs (an in-place operator
# on the instance's data), so they run in the dynamic tier, which recorded the view operator (`inst.x[:2]`,
# `.detach()`, `.unsqueeze(0)`, `y[:2]`) as a DFG node whose lazy result was a *copy*; the write then went to that
# copy, not into the storage the view shares with `inst.x` (or `y`): a silent wrong answer (the result and the
# instance's tensor after the run). Now a view of the instance's own tensor is made eagerly (a real view), and a
# lazy view of a computed value is tracked: a write through it, or into its base, is made on the base's own copy
# and every view of it made again (`Recorder.write_own`). The last cases are of that tracking.
VIEW_WRITES = {
    "slice_of_instance_tensor_written": '''
@ab.program
def main(inst, p):
    y = torch.tanh(inst.x) * p.h0
    v = inst.x[:2]
    v.mul_(0.0)
    return y + inst.x
''',
    "detached_instance_tensor_written": '''
@ab.program
def main(inst, p):
    y = torch.tanh(inst.x) * p.h0
    d = inst.x.detach()
    d.add_(1.0)
    return y + inst.x
''',
    "unsqueezed_instance_tensor_written": '''
@ab.program
def main(inst, p):
    y = torch.tanh(inst.x) * p.h0
    inst.x.unsqueeze(0).mul_(2.0)
    return y + inst.x
''',
    "slice_of_computed_value_written": '''
@ab.program
def main(inst, p):
    y = inst.x @ p.W
    z = y * 2
    v = y[:2]
    v.mul_(0.0)
    return z + y
''',
    "base_written_after_a_view": '''
@ab.program
def main(inst, p):
    y = torch.tanh(inst.x @ p.W)
    v = y[1:3]
    w = v * 3.0
    y.mul_(2.0)
    return v + w, y
''',
    "view_of_a_view_written": '''
@ab.program
def main(inst, p):
    y = torch.tanh(inst.x @ p.W)
    v = y.unsqueeze(0)[:, :3]
    u = v.detach()
    u[0, 1] = 5.0
    return y, v, u.sum()
''',
    "chunk_of_a_value_written": '''
@ab.program
def main(inst, p):
    y = torch.sigmoid(inst.x @ p.W)
    a, b = y.chunk(2)
    b.add_(1.0)
    y.mul_(0.5)
    return a, b, y
''',
}


@pytest.mark.parametrize("name", sorted(VIEW_WRITES))
def test_write_through_a_view(name):
    # the dynamic tier alone: with default options, inference batches of a program the static tier rejects run
    # in the dynamic tier or as plain calls by measurement (acrobat.runtime.tier), so whether one shows it varies
    out = check(FuzzProgram(HEAD + VIEW_WRITES[name], "doc", "float32", {}, (1, 4), set()), ("dynamic",))
    assert out.category == "ok", str(out)


# Found by the fuzzer's `Doc` instances (seeds 148, 5023, 5289 of session hunt3): the dtype of the instance's own
# tensor given to a tensor operator (`torch.zeros(n, dtype=t.dtype)`, `t = inst.x`) was a per-instance host value,
# which the static block took as a batched host operand and turned into a tensor: `Could not infer dtype of
# torch.dtype` (an InternalError; the batch ran again in the dynamic tier). Now the tensor is the block's operand
# and its `.dtype` is read inside the block.
def test_dtype_of_an_instance_tensor_in_a_block():
    body = '''
@ab.program
def main(inst, p):
    t = inst.x
    return t + torch.zeros(t.shape[0], dtype=t.dtype) + p.h0
'''
    out = check(FuzzProgram(HEAD + body, "doc", "float32", {}, (1, 4), set()), ("eager",))
    assert out.category == "ok", str(out)
