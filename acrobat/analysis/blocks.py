"""Static blocks: flatten tensor operators out of host code and group them (App. A.1, A.2).

``lower_function`` rewrites one specialization's body so that

- program calls and tensor operators nested in host statements move into
  statements of their own (temporaries ``_tN``);
- maximal static (hoistable, App. A.1) sub-expressions of recursion-
  dependent tensor statements move into statements of their own, so the
  hoisted part can run at a static depth;
- each maximal run of consecutive tensor statements becomes static blocks
  (grain-size coarsening, App. A.2): at most one hoisted block (static
  depth) followed by one recursion-dependent block.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import operator
from typing import Any, Callable

import torch

from acrobat.analysis import ragged, rankings, rowops
from acrobat.analysis.recurrent import module_ref
from acrobat.analysis.fusion import fused_matmul, matmul_groups
from acrobat.analysis.host_tensors import FROM_HOST, range_checked
from acrobat.analysis.inplace import inplace_result
from acrobat.analysis.kinds import (HOST, MUTABLE, RAGGED, ListK, RaggedK, SharedK, Spec, TensorK, TupleK, contains,
                                    has_shared, has_tensor, sdepth_of)
from acrobat.analysis.ragged import (SEGMENT_OPS, row_count, row_matmul, row_operands, row_scale, row_squeeze,
                                     segment_reference)
from acrobat.analysis.shape_vars import shape_definitions, size_operands
from acrobat.analysis.lowered import Block, BlockCall, BlockParam, ProgramCall
from acrobat.analysis.shared import SharedSlots
from acrobat.analysis.sized import metadata_read
from acrobat.errors import CompileError
from acrobat.frontend import ir
from acrobat.runtime.lookup import lookup
from acrobat.runtime.plan import RecurrentOp, SegmentOp
from acrobat.runtime.recurrent import recurrent_reference


class _Lowerer:
    def __init__(self, spec: Spec, slots: SharedSlots, block_ids: itertools.count, hoisting: bool, coarsening: bool,
                 fusion: bool, independent: Callable[[ir.Call], bool] | None = None):
        self.spec = spec
        self.independent = independent  # see infer_concurrency; None: no inference (the concurrency ablation)
        self.fusion = fusion
        self.hoisting = hoisting
        self.coarsening = coarsening
        self.slots = slots
        self.block_ids = block_ids
        self.temps = itertools.count()

    def error(self, node: ir.Expr | ir.Stmt, message: str) -> CompileError:
        return CompileError(message, node.loc.file, node.loc.line, node.loc.col)

    def kind(self, e: ir.Expr):
        return self.spec.kinds.get(e.nid, HOST)

    def temp(self, loc: ir.Loc, value: ir.Expr, kind) -> ir.Name:
        """A fresh variable standing for ``value`` (host code reading ``value`` reads it instead)."""
        name = ir.Name(loc, f"_t{next(self.temps)}")
        self.spec.var[name.id] = kind
        self.spec.kinds[name.nid] = kind
        if value.nid in self.spec.reads:
            self.spec.reads.add(name.nid)
        return name

    def is_op(self, e: ir.Expr) -> bool:
        return e.nid in self.spec.ops

    def is_static_op(self, e: ir.Expr) -> bool:
        k = self.kind(e)
        return self.hoisting and self.is_op(e) and isinstance(k, (TensorK, TupleK)) and has_tensor(k) \
            and sdepth_of(k) is not None

    # -- flattening -------------------------------------------------------
    def infer_concurrency(self, roots: list[ir.Expr], pre: list[ir.Stmt]) -> None:
        """Run independent program calls of one expression as ``acrobat.concurrent`` does (§4.1), inferred.

        ``compose(encode(node.left), encode(node.right))``: the calls that ``roots`` always evaluate (not
        under ``a if c else b`` or a later ``and``/``or`` operand), when there are two or more, none has a
        program call in its arguments, none passes a list (a callee could change it, or read what another
        appends) and none changes host state that outlives it (``aliases.escaping_effects``), become one
        concurrent call before the statement: each starts at the same depth, so their nodes batch with each
        other, instead of the second waiting for the first's depth. The calls themselves are replaced by the
        items of its result (in place, keeping their ids and kinds).
        """
        if self.independent is None:
            return
        calls: list[ir.Call] = []

        def visit(x: ir.Expr) -> None:
            if isinstance(x, ir.Call) and x.kind is ir.CallKind.PROGRAM:
                calls.append(x)
            elif not isinstance(x, (ir.IfExp, ir.BoolOp, ir.Concurrent)) and x.nid not in self.spec.choices:
                for c in ir.children(x):
                    visit(c)

        for r in roots:
            visit(r)
        if len(calls) < 2 or not all(self.independent(c) and not any(
                isinstance(x, ir.Call) and x.kind is ir.CallKind.PROGRAM for a in c.args for x in ir.walk(a)) and not any(
                contains(self.kind(a), MUTABLE) or isinstance(self.kind(a), RaggedK) for a in c.args) for c in calls):
            return
        fork = ir.Concurrent(calls[0].loc, calls)
        self.spec.kinds[fork.nid] = TupleK(tuple(self.kind(c) for c in calls))
        result = self.extract(fork, pre, False)
        items: dict[int, ir.Expr] = {}
        for i, c in enumerate(calls):
            item = ir.Subscript(c.loc, ir.Name(c.loc, result.id), ir.Const(c.loc, i))  # type: ignore[attr-defined]
            item.nid = c.nid
            self.spec.kinds[item.obj.nid] = self.spec.kinds[fork.nid]  # type: ignore[attr-defined]
            items[id(c)] = item
        for i, r in enumerate(roots):  # a root that is one of the calls is replaced in the list itself
            if id(r) in items:
                roots[i] = items[id(r)]
            else:
                _substitute(r, items)

    def extract(self, e: ir.Expr, pre: list[ir.Stmt], in_op: bool) -> ir.Expr:
        """Rewrite ``e`` so that it holds no program call, and no tensor op unless ``in_op``."""
        if isinstance(e, ir.BinOp) and e.inplace and isinstance(self.kind(e), TensorK):
            e = self.out_of_place(e)
        if isinstance(e, ir.Call) and e.kind is ir.CallKind.PROGRAM:
            self.infer_concurrency(e.args, pre)  # the list itself: an argument that is a call becomes its item
        elif not isinstance(e, ir.Concurrent):
            self.infer_concurrency([e], pre)
        if isinstance(e, ir.Call) and e.kind is ir.CallKind.PROGRAM or isinstance(e, ir.Concurrent):
            calls = e.calls if isinstance(e, ir.Concurrent) else [e]
            lowered = [(self.spec.calls[c.nid], [self.extract(a, pre, False) for a in c.args]) for c in calls]
            name = self.temp(e.loc, e, self.kind(e))
            pre.append(ProgramCall(e.loc, ir.Target(name=name.id), lowered, isinstance(e, ir.Concurrent)))
            return name
        if e.nid in self.spec.ragged:
            return self.lower_ragged(e, pre)
        if e.nid in self.spec.choices:
            return self.lower_choice(e, pre)  # type: ignore[arg-type]
        if e.nid in self.spec.loads:  # `child.state`: a statement of its own, which takes the stored depth (§4.1)
            e.obj = self.extract(e.obj, pre, False)  # type: ignore[attr-defined]
            name = self.temp(e.loc, e, self.kind(e))
            pre.append(ir.Assign(e.loc, ir.Target(name=name.id), e))
            return name
        if isinstance(e, ir.Attr) and e.attr in ("values", "indices") and isinstance(self.kind(e.obj), TupleK):
            # `x.topk(2).indices`: the pair crosses a block boundary as a tuple of its items: item 0 or 1
            item = ir.Subscript(e.loc, e.obj, ir.Const(e.loc, int(e.attr == "indices")))
            item.nid = e.nid
            return self.extract(item, pre, in_op)
        if isinstance(e, ir.BoolOp) and self.has_work(e):
            return self.lower_boolop(e, pre)
        if isinstance(e, ir.IfExp) and (self.has_work(e) or has_tensor(self.kind(e)) or has_shared(self.kind(e))):
            return self.lower_ifexp(e, pre)
        if e.nid in self.spec.shared_ops or isinstance(self.kind(e), SharedK):
            return e  # computed once per run, outside the skeleton
        if in_op and self.kind(e) is HOST and not self.is_op(e) and self.reads_value(e) and not self.shape_query(e):
            # host code inside an operator that reads a tensor's value (`h * h.max().item()`): the read is a
            # statement of its own before the operator, so the blocks computing what it reads come first (§4.2)
            value = self.rebuild(e, pre, in_op=False)
            name = self.temp(e.loc, value, self.kind(e))
            pre.append(ir.Assign(e.loc, ir.Target(name=name.id), value))
            return name
        if self.is_op(e) and not in_op:
            op = self.rebuild(e, pre, in_op=True)
            name = self.temp(e.loc, op, self.kind(e))
            pre.extend(self.tuple_items(ir.Assign(e.loc, ir.Target(name=name.id), op)))
            return name
        return self.rebuild(e, pre, in_op or self.is_op(e))

    def out_of_place(self, e: ir.BinOp) -> ir.Call:
        """``x op= y`` of a tensor ``x`` that alone holds its value (the kind analysis took it:
        ``acrobat.analysis.inplace``) as ``inplace_result(x, x op y)``: computed out of place, with the shape and
        dtype PyTorch's in-place update keeps. The call keeps ``e``'s node id and kind."""
        value = ir.BinOp(e.loc, e.op, e.left, e.right)
        left = ir.Name(e.left.loc, e.left.id) if isinstance(e.left, ir.Name) else e.left
        self.spec.kinds[left.nid] = self.kind(e.left)
        self.spec.kinds[value.nid] = self.kind(e)
        self.spec.ops.add(value.nid)
        call = ir.Call(e.loc, ir.CallKind.TORCH, inplace_result, [left, value], {})
        call.nid = e.nid
        return call

    def reads_value(self, e: ir.Expr) -> bool:
        """True when evaluating ``e`` reads a per-instance tensor's value or shape (§4.2)."""
        return any(x.nid in self.spec.reads for x in ir.walk(e))

    def has_work(self, e: ir.Expr) -> bool:
        """True when ``e`` holds a tensor operator, a program call, a module chosen by data or a load of a field."""
        return any(self.is_op(x) or x.nid in self.spec.ragged or x.nid in self.spec.choices or
                   x.nid in self.spec.loads or isinstance(x, ir.Concurrent) or
                   isinstance(x, ir.Call) and x.kind is ir.CallKind.PROGRAM for x in ir.walk(e))

    # -- lists of tensors as operands (analysis.ragged) --------------------
    def lower_ragged(self, e: ir.Expr, pre: list[ir.Stmt]) -> ir.Expr:
        """A stack, segment operator or row-wise operator of a per-instance list, as host code and blocks."""
        how, op = self.spec.ragged[e.nid]
        if how == "stack":  # the rows themselves: a copy of the list (a later append must not change it)
            assert isinstance(e, ir.Call)
            return ir.Call(e.loc, ir.CallKind.BUILTIN, "list", [self.extract(e.args[0], pre, False)], {})
        if how == "segment":
            assert isinstance(e, ir.Call) and op is not None
            operand = e.receiver if e.receiver is not None else e.args[0]
            return self.segment_call(e, op, self.extract(operand, pre, False), pre)
        if how == "topk":
            assert isinstance(e, ir.Call) and op is not None
            return self.lower_topk(e, op, pre)
        if how == "tolist":
            assert isinstance(e, ir.Call) and e.receiver is not None
            return self.lower_tolist(e, self.extract(e.receiver, pre, False), pre)
        if how == "recurrent":
            assert isinstance(e, ir.Call) and isinstance(op, RecurrentOp)
            return self.recurrent_call(e, op, pre)
        if how == "length":  # `S.shape[0]`, `S.size(0)`: the list's length, host data
            s = e.obj.obj if isinstance(e, ir.Subscript) else e.receiver  # type: ignore[attr-defined]
            return ir.Call(e.loc, ir.CallKind.BUILTIN, "len", [self.extract(s, pre, False)], {})
        if how in ("lead", "unlead", "lead_row", "lead_unit_row"):
            return self.lower_lead(e, how, pre)
        operands = _operands(e)
        lowered = [self.extract(x, pre, False) for x in operands]
        if how in ("view", "lead_view"):  # host code checks the first size against the list's length first
            at = 1 if how == "view" else 2
            lowered[0] = ir.Call(e.loc, ir.CallKind.HOST, row_count,
                                 [lowered[0], lowered[at], ir.TupleExpr(e.loc, lowered[at + 1:])], {})
            self.spec.kinds[lowered[0].nid] = RAGGED
        if how == "rowop" and isinstance(self.kind(e), TupleK):  # `S.chunk(3, dim=-1)`: a stacked list per part
            return ir.TupleExpr(e.loc, [self.map_rows(e, operands, lowered, pre, part)
                                        for part in range(len(self.kind(e).items))])  # type: ignore[attr-defined]
        rows = self.map_rows(e, operands, lowered, pre)
        if how == "contract":  # a @ S: sum over the list of a_j * S_j
            return self.segment_call(e, SEGMENT_SUM, rows, pre)
        return rows

    def lower_lead(self, e: ir.Expr, how: str, pre: list[ir.Stmt]) -> ir.Expr:
        """A unit axis put in front of a stacked list or read back (``kinds.LeadK``, held as the same list of
        rows): ``"lead"``/``"unlead"`` are the list itself, ``"lead_row"`` (``L[0, i]``) its item ``i``, and
        ``"lead_unit_row"`` (``L[:, i]``) that item's ``.unsqueeze(0)``, an operator node."""
        loc = e.loc
        if how in ("lead", "unlead"):
            return self.extract(e.obj if isinstance(e, ir.Subscript) else _operands(e)[0], pre, False)
        assert isinstance(e, ir.Subscript) and isinstance(e.index, ir.TupleExpr)
        item = ir.Subscript(loc, self.extract(e.obj, pre, False), self.extract(e.index.items[1], pre, False))
        if how == "lead_row":
            self.spec.kinds[item.nid] = self.kind(e)
            return self.read_as(e, item)
        row = self.temp(loc, item, TensorK(None))
        pre.append(ir.Assign(loc, ir.Target(name=row.id), item))
        unit = ir.Call(loc, ir.CallKind.METHOD, "unsqueeze", [ir.Const(loc, 0)], {},
                       receiver=self.tensor_name(loc, row.id))
        return self.extract(self.read_as(e, self.op_node(unit)), pre, False)

    def read_as(self, e: ir.Expr, x: ir.Expr) -> ir.Expr:
        """``x``, which stands for ``e``: host code that reads ``e``'s value reads ``x``'s (§4.2)."""
        if e.nid in self.spec.reads:
            self.spec.reads.add(x.nid)
        return x

    def segment_call(self, e: ir.Expr, op: SegmentOp, rows: ir.Expr, pre: list[ir.Stmt]) -> ir.Name:
        """``t = op(rows)`` as a segment node: one per instance, one launch for the batch (analysis.ragged)."""
        target = self.temp(e.loc, e, self.kind(e))
        param = BlockParam("_rows", "list", expr=rows)
        value = ir.Call(e.loc, ir.CallKind.TORCH, segment_reference(op), [ir.Name(e.loc, "_rows")], {})
        stmt = ir.Assign(e.loc, ir.Target(name=target.id), value)
        name = f"{self.spec.name}:{e.loc.line} ({op.op} over a list)"
        block = Block(next(self.block_ids), name, self.spec, [stmt], [param], [target.id], None, e.loc, segment=op)
        pre.append(BlockCall(e.loc, block))
        return target  # the temp itself: it carries a value read of ``e`` (§4.2)

    def recurrent_call(self, e: ir.Call, op: RecurrentOp, pre: list[ir.Stmt]) -> ir.Name:
        """``p.lstm(S, hx)`` as a recurrent segment node (``acrobat.analysis.recurrent``): the list's rows, then the
        initial state's tensors, one node per instance; the module itself a shared parameter (§5.1)."""
        loc = e.loc
        rows = self.extract(e.args[0], pre, False)
        hx = e.args[1] if len(e.args) > 1 else e.kwargs.get("hx")
        states: list[ir.Expr] = []
        if op.states and hx is not None:
            state = self.extract(hx, pre, False)
            states = list(state.items) if isinstance(state, ir.TupleExpr) else [state] if op.states == 1 else [
                self.item_of(state, j) for j in range(op.states)]  # type: ignore[arg-type]
        ref = module_ref(e, self.kind(e.receiver))  # type: ignore[arg-type]
        assert ref is not None
        slot = self.slots.slot(ref, self.spec)
        params = [BlockParam("_rows", "list", expr=rows), *(BlockParam(f"_v{j}", "tensor", expr=x)
                                                            for j, x in enumerate(states)),
                  BlockParam("_s", "shared", slot=slot)]
        target = self.temp(loc, e, self.kind(e))
        value = ir.Call(loc, ir.CallKind.TORCH, recurrent_reference(op), [ir.Name(loc, p.name) for p in params], {})
        name = f"{self.spec.name}:{loc.line} (nn.{op.op} over a list)"
        block = Block(next(self.block_ids), name, self.spec, [ir.Assign(loc, ir.Target(name=target.id), value)],
                      params, [target.id], None, loc, segment=op)
        pre.append(BlockCall(loc, block))
        return target

    def lower_topk(self, e: ir.Call, op: SegmentOp, pre: list[ir.Stmt]) -> ir.Name:
        """``torch.topk(S, k)``: a segment node that sorts each instance's list, then host code that keeps its first
        ``k`` rows (``rankings.top_rows``; ``k`` host data, which may differ per instance)."""
        ranked = self.segment_call(e, op, self.extract(rankings.ranked_operand(e), pre, False), pre)
        k = self.extract(rankings.arguments(e, "topk", self.error)["k"], pre, False)
        out = self.temp(e.loc, e, self.kind(e))
        pick = ir.Call(e.loc, ir.CallKind.TORCH, rankings.top_rows, [ir.Name(e.loc, ranked.id), k], {})
        pre.append(ir.Assign(e.loc, ir.Target(name=out.id), pick))
        return out

    def lower_tolist(self, e: ir.Call, rows: ir.Expr, pre: list[ir.Stmt]) -> ir.Name:
        """``S.tolist()`` of a stacked list: ``[row.tolist() for row in S]``, each row's value read by host code
        (a sync point, §4.2); the same numbers as the stacked tensor's ``tolist()``."""
        loc = e.loc
        out = self.temp(loc, e, HOST)
        pre.append(ir.Assign(loc, ir.Target(name=out.id), ir.ListExpr(loc, [])))
        row = self.temp(loc, e, TensorK(None))
        read = self.tensor_name(loc, row.id)
        self.spec.reads.add(read.nid)
        value = ir.Call(loc, ir.CallKind.METHOD, "tolist", [], {}, receiver=read)
        append = ir.Call(loc, ir.CallKind.METHOD, "append", [value], {}, receiver=ir.Name(loc, out.id))
        pre.append(ir.For(loc, ir.Target(name=row.id), rows, [ir.ExprStmt(loc, append)]))
        return out

    def map_rows(self, e: ir.Expr, operands: list[ir.Expr], lowered: list[ir.Expr], pre: list[ir.Stmt],
                 part: int | None = None) -> ir.Name:
        """``out = [op(row, ...) for row in S]`` as a map loop (§4.1): every row's node batches together
        (``part``: which result of an operator giving several, ``chunk``)."""
        loc = e.loc
        out = self.temp(loc, e, RAGGED)
        self.spec.reads.discard(out.nid)  # a list of handles has no value to wait for: a read of e is its result's
        pre.append(ir.Assign(loc, ir.Target(name=out.id), ir.ListExpr(loc, [])))
        rows, dense, args = [], [], []
        for x, lx in zip(operands, lowered):
            if isinstance(self.kind(x), RaggedK):
                r = self.temp(loc, x, TensorK(None))
                rows.append((r.id, lx))
                args.append(self.tensor_name(loc, r.id))
            else:
                dense.append(lx)
                args.append(lx)
        value = self.row_value(e, args, rows, dense, part)
        elem = self.temp(loc, e, TensorK(None))
        self.spec.reads.discard(elem.nid)
        append = ir.Call(loc, ir.CallKind.METHOD, "append", [ir.Name(loc, elem.id)], {}, receiver=ir.Name(loc, out.id))
        body: list[ir.Stmt] = [ir.Assign(loc, ir.Target(name=elem.id), value), ir.ExprStmt(loc, append)]
        if len(rows) == 1:
            target, it = ir.Target(name=rows[0][0]), rows[0][1]
        else:  # two stacked lists of one length (PyTorch raises on different lengths; so does zip(strict=True))
            target = ir.Target(items=[ir.Target(name=r) for r, _ in rows])
            it = ir.Call(loc, ir.CallKind.BUILTIN, "zip", [x for _, x in rows], {"strict": ir.Const(loc, True)})
        pre.append(ir.For(loc, target, it, body))
        return out

    def row_value(self, e: ir.Expr, args: list[ir.Expr], rows: list, dense: list[ir.Expr],
                  part: int | None = None) -> ir.Expr:
        """The operator ``e`` applied to one row (``args``: its operands with rows in place of stacked lists;
        ``part``: which of its results)."""
        loc = e.loc
        how = self.spec.ragged[e.nid][0]
        if how == "rowop":  # by its rule (acrobat.analysis.rowops): the row's dims in place of the stacked list's
            rule = rowops.rule_of(e) if isinstance(e, ir.Call) else None
            assert isinstance(e, ir.Call) and rule is not None
            f = rowops.form(e, rule, rowops.describe(e), [isinstance(self.kind(x), RaggedK) for x in _operands(e)])
            assert not isinstance(f, str)
            value: ir.Expr = rowops.row_call(e, rule, f, args, self.op_node, part)
        elif how == "contract":
            value = ir.Call(loc, ir.CallKind.TORCH, row_scale, args, {})
        elif isinstance(e, ir.BinOp) and e.op == "@" or isinstance(e, ir.Call) and e.kind is ir.CallKind.TORCH \
                and e.target is torch.matmul:
            value = ir.Call(loc, ir.CallKind.TORCH, row_matmul, args, {})
        elif isinstance(e, ir.Subscript):  # `S[:, j]`: `row[j]`; `S[..., j]`: `row[..., j]`, checked to miss the list axis
            assert isinstance(e.index, ir.TupleExpr)
            items, row = e.index.items, args[0]
            if not isinstance(items[0], ir.Slice):
                axes = sum(not (isinstance(x, ir.Const) and x.value in (None, Ellipsis)) for x in items)
                row = self.op_node(ir.Call(loc, ir.CallKind.TORCH, ragged.row_within, [row, ir.Const(loc, axes)], {}))
            else:
                items = items[1:]
            value = ir.Subscript(loc, row, ir.TupleExpr(loc, list(items)))
        elif how in ("view", "lead_view"):  # `S.view([1,] n, *shape)`: `row.view(*shape)` (n checked by host code)
            assert isinstance(e, ir.Call)
            value = ir.Call(loc, ir.CallKind.METHOD, e.target, args[2 if how == "view" else 3:], {}, receiver=args[0])
        elif isinstance(e, ir.Call) and ragged.row_axis(e) is not None:  # a dim past the list axis: a row's axis
            at = [id(x) for x in _operands(e)].index(id(ragged.dim_operand(e)))
            value = _on_row(e, [*args[:at], ir.Const(loc, ragged.row_axis(e) - 1), *args[at + 1:]])  # type: ignore[operator]
        elif isinstance(e, ir.Call) and e.kind is ir.CallKind.METHOD and e.target == "squeeze":
            value = ir.Call(loc, ir.CallKind.TORCH, row_squeeze, [args[0], e.args[0]], {})
        elif isinstance(e, ir.Call) and (e.kind is ir.CallKind.TORCH and ragged.takes_dense_whole(e.target)
                                         or e.kind is ir.CallKind.METHOD and e.target in ("unsqueeze", *ragged.CASTS)
                                         or self.callee_is_shared(e)):
            value = _on_row(e, args)  # F.linear/F.embedding: per row (takes_dense_whole); a module is checked to act row-wise
            if e.receiver is not None:
                self.row_calls.add(value.nid)
        else:  # a dense operand meets each row as it broadcasts against the list axis (`ragged.fitted`)
            def fit(x: ir.Expr) -> ir.Expr:
                return self.op_node(ir.Call(loc, ir.CallKind.TORCH, ragged.fitted,
                                            [x, self.tensor_name(loc, rows[0][0])], {}))
            dense_ids = {id(x) for x in dense}
            row_op = self.op_node(_on_row(e, [fit(x) if id(x) in dense_ids else x for x in args]))
            row_names: list[ir.Expr] = [self.tensor_name(loc, r) for r, _ in rows]
            keep = isinstance(e, ir.Call) and rowops.pointwise_dtype_kept(e)  # `zeros_like(S, dtype=...)`
            value = ir.Call(loc, ir.CallKind.TORCH, row_operands,
                            [row_op, ir.TupleExpr(loc, row_names), ir.TupleExpr(loc, [fit(x) for x in dense]),
                             *([ir.Const(loc, True)] if keep else [])], {})
        return self.op_node(value)

    def op_node(self, e: ir.Expr) -> ir.Expr:
        """Register a new per-instance tensor operator node (recursion-dependent depth)."""
        self.spec.ops.add(e.nid)
        self.spec.kinds[e.nid] = TensorK(None)
        return e

    def tensor_name(self, loc: ir.Loc, name: str) -> ir.Name:
        n = ir.Name(loc, name)
        self.spec.kinds[n.nid] = TensorK(None)
        return n

    def lower_boolop(self, e: ir.BoolOp, pre: list[ir.Stmt]) -> ir.Name:
        """``a and b`` with operators inside -> ``t = a; if t: t = b`` (keeps the short circuit)."""
        name = self.temp(e.loc, e, HOST)
        body = pre
        for i, value in enumerate(e.values):
            inner: list[ir.Stmt] = []
            inner.append(ir.Assign(value.loc, ir.Target(name=name.id), self.extract(value, inner, False)))
            if i == 0:
                body.extend(inner)
                continue
            test: ir.Expr = ir.Name(e.loc, name.id)
            if e.op == "or":
                test = ir.UnaryOp(e.loc, "not", test)
            body.append(ir.If(e.loc, test, inner, []))
            body = inner
        return ir.Name(e.loc, name.id)

    def lower_ifexp(self, e: ir.IfExp, pre: list[ir.Stmt]) -> ir.Name:
        """``a if c else b`` over tensors -> ``if c: t = a`` / ``else: t = b`` (each branch forms its own blocks;
        a tensor ``c`` is a value read, as for ``if``, §4.2)."""
        name = self.temp(e.loc, e, self.kind(e))
        test = self.extract(e.test, pre, False)
        branches: list[list[ir.Stmt]] = []
        for value in (e.body, e.orelse):
            inner: list[ir.Stmt] = []
            inner.append(ir.Assign(value.loc, ir.Target(name=name.id), self.extract(value, inner, False)))
            branches.append(inner)
        pre.append(ir.If(e.loc, test, *branches))
        return name  # carries the kind (a fresh Name would read as host data)

    def lower_choice(self, e: ir.Call, pre: list[ir.Stmt]) -> ir.Name:
        """``p.experts[k](x)`` -> ``_c = chosen_position(k, keys)``, then ``if _c == 0: t = p.experts[0](x)`` /
        ``else: if _c == 1: ...``: the per-module calls of the analysis (``Spec.choices``), each evaluating its own
        copy of the arguments in the branch taken, as Python evaluates them once after the index. Each branch's
        blocks batch the instances that chose its module: one launch per module chosen, the branches lined up
        as those of any ``if`` (§4.1)."""
        keys, calls = self.spec.choices[e.nid]
        assert isinstance(e.receiver, ir.Subscript)
        index = self.extract(e.receiver.index, pre, False)
        position = self.temp(e.loc, index, HOST)
        pre.append(ir.Assign(e.loc, ir.Target(name=position.id), ir.Call(
            e.loc, ir.CallKind.HOST, chosen_position, [index, ir.Const(e.loc, keys)], {})))
        name = self.temp(e.loc, e, self.kind(e))
        chain: list[ir.Stmt] = []
        for i in reversed(range(len(calls))):
            branch: list[ir.Stmt] = []
            call = copy.deepcopy(calls[i])  # ids kept: the analysis' facts of the call and its operands
            branch.append(ir.Assign(e.loc, ir.Target(name=name.id), self.extract(call, branch, False)))
            if chain:
                test = ir.Compare(e.loc, ["=="], [ir.Name(e.loc, position.id), ir.Const(e.loc, i)])
                branch = [ir.If(e.loc, test, branch, chain)]
            chain = branch
        pre.extend(chain)
        return name

    def rebuild(self, e: ir.Expr, pre: list[ir.Stmt], in_op: bool) -> ir.Expr:
        """Apply ``extract`` to the children of ``e`` in place (keeps ``e``'s nid and kind)."""
        match e:
            case ir.Attr():
                e.obj = self.extract(e.obj, pre, in_op)
            case ir.Subscript():
                e.obj, e.index = self.extract(e.obj, pre, in_op), self.extract(e.index, pre, in_op)
            case ir.TupleExpr() | ir.ListExpr():
                e.items = [self.extract(x, pre, in_op) for x in e.items]
            case ir.DictExpr():
                e.values = [self.extract(x, pre, in_op) for x in e.values]
            case ir.BinOp():
                e.left, e.right = self.extract(e.left, pre, in_op), self.extract(e.right, pre, in_op)
            case ir.UnaryOp():
                e.operand = self.extract(e.operand, pre, in_op)
            case ir.Compare():
                e.operands = [self.extract(x, pre, in_op) for x in e.operands]
            case ir.Call():
                if e.receiver is not None:
                    e.receiver = self.extract(e.receiver, pre, in_op)
                e.args = [self.extract(x, pre, in_op) for x in e.args]
                e.kwargs = {k: self.extract(v, pre, in_op) for k, v in e.kwargs.items()}
        return e

    def split_static(self, e: ir.Expr, pre: list[ir.Stmt]) -> ir.Expr:
        """Move maximal hoistable sub-expressions of a dynamic tensor expression into statements."""
        if self.is_static_op(e):
            name = self.temp(e.loc, e, self.kind(e))
            pre.extend(self.tuple_items(ir.Assign(e.loc, ir.Target(name=name.id), e)))
            return name
        if not self.is_op(e):
            return e
        for attr in ("obj", "index", "left", "right", "operand", "receiver"):
            sub = getattr(e, attr, None)
            if isinstance(sub, ir.Expr):
                setattr(e, attr, self.split_static(sub, pre))
        if isinstance(e, (ir.TupleExpr, ir.ListExpr)):
            e.items = [self.split_static(x, pre) for x in e.items]
        if isinstance(e, ir.Call):
            e.args = [self.split_static(x, pre) for x in e.args]
            e.kwargs = {k: self.split_static(v, pre) for k, v in e.kwargs.items()}
        return e

    def flatten(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in body:
            pre: list[ir.Stmt] = []
            match s:
                case ir.Assign(value=v) if self.is_op(v):
                    if isinstance(v, ir.BinOp) and v.inplace and isinstance(self.kind(v), TensorK):
                        v = self.out_of_place(v)  # never a write in a block: its operand may be unbatched there
                    s.value = self.rebuild(v, pre, in_op=True)
                    if not self.is_static_op(s.value):
                        s.value = self.split_static(s.value, pre)
                case ir.Assign(value=v) if isinstance(v, (ir.Call, ir.Concurrent)) and (
                        isinstance(v, ir.Concurrent) or v.kind is ir.CallKind.PROGRAM):
                    calls = v.calls if isinstance(v, ir.Concurrent) else [v]
                    lowered = [(self.spec.calls[c.nid], [self.extract(a, pre, False) for a in c.args]) for c in calls]
                    out.extend(pre)
                    out.append(ProgramCall(s.loc, s.target, lowered, isinstance(v, ir.Concurrent)))
                    self.spec.kinds.setdefault(s.nid, self.kind(v))
                    continue
                case ir.Assign(value=v) | ir.ExprStmt(value=v):
                    s.value = self.extract(v, pre, False)
                case ir.Return(value=v) if v is not None:
                    s.value = self.extract(v, pre, False)
                case ir.If():
                    s.test = self.extract(s.test, pre, False)
                    s.body, s.orelse = self.flatten(s.body), self.flatten(s.orelse)
                case ir.For():
                    s.iter = self.extract(s.iter, pre, False)
                    s.body = self.flatten(s.body)
                case ir.While():
                    s.test = self.extract(s.test, pre, False)
                    if pre and _continues(s.body):
                        # `continue` would skip a re-evaluation at the end of the body: test at the top instead,
                        # `while True: <condition's statements>; if not c: break; <body>`
                        leave = ir.If(s.loc, ir.UnaryOp(s.loc, "not", s.test), [ir.Break(s.loc)], [])
                        s.body = pre + [leave] + self.flatten(s.body)
                        s.test = ir.Const(s.loc, True)
                        out.append(s)
                        continue
                    # the condition's statements run before the loop and again at the end of every iteration
                    s.body = self.flatten(s.body + self.renumbered(pre))
            out.extend(pre)
            for stmt in pre:
                if isinstance(stmt, ir.Assign) and self.is_op(stmt.value) and not self.is_static_op(stmt.value):
                    stmt.value = self.split_static_in_place(stmt, out)
            out.extend(self.tuple_items(s) if isinstance(s, ir.Assign) and self.is_op(s.value) else [s])
        return out

    def tuple_items(self, s: ir.Assign) -> list[ir.Stmt]:
        """``x = op`` where ``op`` gives a tuple of tensors (``torch.chunk(y, 2)``, an ``nn.LSTMCell`` call):
        ``_t0, _t1 = op`` (block outputs are single tensors) and the host tuple ``x = (_t0, _t1)``."""
        k = self.kind(s.value)
        if s.target.name is None or not isinstance(k, TupleK) or not all(isinstance(i, TensorK) for i in k.items):
            return [s]
        names = [self.temp(s.loc, s.value, item) for item in k.items]
        for n in names:
            self.spec.reads.discard(n.nid)
        split = ir.Assign(s.loc, ir.Target(items=[ir.Target(name=n.id) for n in names]), s.value)
        whole = ir.TupleExpr(s.loc, [ir.Name(s.loc, n.id) for n in names])
        self.spec.kinds[whole.nid] = k
        for n, item in zip(whole.items, k.items):
            self.spec.kinds[n.nid] = item
        return [split, ir.Assign(s.loc, s.target, whole)]

    def renumbered(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        """A copy of ``stmts`` whose nodes have new ids, with the analysis facts of the nodes they copy: two
        blocks made of the same statements (a ``while`` test's, before the loop and at the end of its body)
        must not share the node ids their parameters are substituted by. A block already made (a segment operator
        over a list) is not copied: both places add a node of the one block."""
        made = {id(s.block): s.block for s in ir.walk_stmts(stmts) if isinstance(s, BlockCall)}
        out = copy.deepcopy(stmts, memo=dict(made))
        spec = self.spec
        for s in ir.walk_stmts(out):
            for node in [s, *(e for root in ir.stmt_exprs(s) for e in ir.walk(root))]:
                old = node.nid
                node.nid = ir.fresh_id()
                for table in (spec.kinds, spec.calls, spec.ragged):
                    if old in table:
                        table[node.nid] = table[old]  # type: ignore[index]
                for group in (spec.reads, spec.ops, spec.shared_ops, spec.loads):
                    if old in group:
                        group.add(node.nid)
        return out

    def split_static_in_place(self, stmt: ir.Assign, out: list[ir.Stmt]) -> ir.Expr:
        pre: list[ir.Stmt] = []
        value = self.split_static(stmt.value, pre)
        idx = out.index(stmt)
        out[idx:idx] = pre
        return value

    # -- block formation --------------------------------------------------
    def is_tensor_stmt(self, s: ir.Stmt) -> bool:
        return isinstance(s, ir.Assign) and self.is_op(s.value)

    def form(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        run: list[ir.Assign] = []
        for s in body:
            if self.is_tensor_stmt(s):
                run.append(s)  # type: ignore[arg-type]
                continue
            out.extend(self.blocks_of(run))
            run = []
            for sub in ir.sub_bodies(s):
                sub[:] = self.form(sub)
            out.append(s)
        out.extend(self.blocks_of(run))
        return out

    def blocks_of(self, run: list[ir.Assign]) -> list[ir.Stmt]:
        """Split a run of tensor statements into a hoisted block and a dynamic block."""
        if not run:
            return []
        if not self.coarsening:
            return [self.make_block([s], self.is_static_op(s.value)) for s in run]
        static: list[ir.Assign] = []
        dynamic: list[ir.Assign] = []
        touched: set[str] = set()  # names read or written by the dynamic statements so far
        result: list[ir.Stmt] = []
        for s in run:
            writes = set(s.target.names())
            if self.is_static_op(s.value) and not (writes & touched):
                static.append(s)
            else:
                if self.is_static_op(s.value) and dynamic:  # cannot move above: close the current pair
                    result += self.make_blocks(static, dynamic)
                    static, dynamic, touched = [], [], set()
                    static.append(s)
                    continue
                dynamic.append(s)
                touched |= writes | ir.names_read(s.value)
        return result + self.make_blocks(static, dynamic)

    def make_blocks(self, static: list[ir.Assign], dynamic: list[ir.Assign]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        if static and self.computed_late(static):  # each statement at its own static depth instead
            out += [self.make_block([s], True) for s in static]
        elif static:
            out.append(self.make_block(static, True))
        if dynamic:
            out.append(self.make_block(dynamic, False))
        return out

    def computed_late(self, stmts: list[ir.Assign]) -> bool:
        """Whether one hoisted block of ``stmts`` would compute a value that is read elsewhere later than its
        static depth says: the block runs one level above its deepest input (App. A.1), so a statement of a
        lower static depth in it (``p.emb[k]`` beside ``torch.exp(l)`` of a recursion's result ``l``) gives
        its value at the block's depth, where a reader placed by the value's own depth would find it missing
        (an internal scheduling error)."""
        defined: set[str] = set()
        inputs = [-1]
        for s in stmts:
            for e in ir.walk(s.value):
                if isinstance(e, ir.Name) and e.id not in defined and has_tensor(k := self.kind(e)):
                    inputs.append(sdepth_of(k) if sdepth_of(k) is not None else -1)
            defined |= set(s.target.names())
        depth = 1 + max(inputs)
        read = self.reads_outside(stmts)
        return any(sdepth_of(self.kind(s.value)) is not None and sdepth_of(self.kind(s.value)) < depth  # type: ignore[operator]
                   for s in stmts if set(s.target.names()) & read)

    def shape_query(self, e: ir.Expr) -> bool:
        """``x.shape``, ``x.shape[0]``, ``x.size(0)``, ``x.ndim``, ``len(x)`` of a per-instance tensor ``x``,
        with constant indices, and ``+ - * // %`` of those with constants or shared host data (``p.heads``):
        inside a block these are plain Python ints of the per-instance shape."""
        match e:
            case ir.Call(kind=ir.CallKind.BUILTIN, target="len", args=[a]):
                return isinstance(self.kind(a), TensorK)
            case ir.BinOp(left=a, right=b) if e.op in ("+", "-", "*", "//", "%"):  # `y.size(0) // 2`, `// p.heads`
                parts = [self.shape_query(x) for x in (a, b)]
                return any(parts) and all(q or isinstance(x, ir.Const) or isinstance(k := self.kind(x), SharedK)
                                          and k.host for q, x in zip(parts, (a, b)))
        read = metadata_read(e)
        return read is not None and isinstance(self.kind(read), TensorK)

    def make_block(self, stmts: list[ir.Assign], is_static: bool) -> BlockCall:
        params: list[BlockParam] = []
        by_key: dict[object, BlockParam] = {}
        defined: set[str] = set()
        sizes = {x.nid for s in stmts for c in ir.walk(s.value) if isinstance(c, ir.Call) for x in size_operands(c)}

        def param(key: object, role: str, make) -> BlockParam:
            if key not in by_key:
                by_key[key] = make(f"_{ {'tensor': 'v', 'host': 'h', 'shared': 's'}[role]}{len(params)}")
                params.append(by_key[key])
            return by_key[key]

        def visit(e: ir.Expr) -> None:
            k = self.kind(e)
            if isinstance(e, ir.Call) and self.is_op(e) and self.callee_is_shared(e):
                self.shared_callee(e, param)
                for c in [*e.args, *e.kwargs.values()]:
                    visit(c)
                return
            if isinstance(k, SharedK):  # a shared tensor or host data (`p.heads`): passed once per launch (§5.1)
                slot = self.slots.slot(k.ref, self.spec)
                self.subst[e.nid] = param(("s", slot), "shared", lambda n: BlockParam(n, "shared", slot=slot)).name
                return
            if isinstance(e, ir.Name) and e.id not in defined:
                if isinstance(k, TensorK):
                    p = param(("n", e.id), "tensor", lambda n: BlockParam(e.id, "tensor", expr=self.plain_name(e)))
                    self.subst[e.nid] = p.name
                    return
                if isinstance(k, TupleK) and k.items and all(isinstance(i, TensorK) for i in k.items):
                    # a tuple of tensors held in a variable (`state` of an nn.LSTMCell): its items are parameters
                    items = [param(("n", e.id, j), "tensor", lambda n, j=j: BlockParam(
                        n, "tensor", expr=self.item_of(e, j))).name for j in range(len(k.items))]
                    self.subst[e.nid] = "(" + "".join(x + ", " for x in items) + ")"
                    return
            if isinstance(e, ir.Const) or isinstance(e, ir.Name) and e.id in defined:
                return
            if self.shape_query(e):  # computed inside the block, where vmap shows the per-instance shape
                for x in ir.walk(e):
                    self.spec.reads.discard(x.nid)  # so the skeleton needs no value read for it
                for c in ir.children(e):
                    visit(c)
                return
            read = metadata_read(e)
            if read is not None and k is HOST and self.kind(read) is HOST:
                # `inst.x.dtype`, `t.shape[0]` of the instance's own tensor `t`: the tensor is the operand (a host
                # column of tensors, one per row) and the block reads its metadata, the same per row as per instance
                visit(read)
                return
            if not self.is_op(e) and not isinstance(e, (ir.TupleExpr, ir.ListExpr, ir.Slice)) and not (
                    isinstance(e, (ir.Subscript, ir.Attr)) and self.is_op(e.obj)):  # `chunk(x, 2)[0]`: in the block
                if isinstance(k, TensorK):  # a per-instance value the skeleton holds, e.g. `states[t]`
                    self.subst[e.nid] = param(("x", e.nid), "tensor", lambda n: BlockParam(n, "tensor", expr=e)).name
                    return
                if isinstance(e, ir.Slice) or not _constant_arithmetic(e):
                    if isinstance(k, ListK) and has_tensor(k):
                        raise self.error(e, f"a {k} held in a variable cannot be an operand of a tensor operator "
                                            "(its length is per-instance host data): stack it with torch.stack(xs) "
                                            "and reduce it over dim=0 (README: lists of tensors as operands), or "
                                            "combine its items in a loop, e.g. `acc = acc + x` for x in the list")
                    if k is not HOST:
                        raise self.error(e, f"a {k} value cannot be an operand of a tensor operator: pass its parts "
                                            "separately")
                    if e.nid in sizes:
                        raise self.error(e, self.host_size(e))
                    self.subst[e.nid] = param(("h", e.nid), "host",
                                              lambda n: BlockParam(n, "host", expr=e)).name
                return
            if isinstance(e, ir.Slice) and any(not isinstance(x, ir.Const) for x in ir.children(e)):
                raise self.error(e, "slice bounds inside a tensor operator must be constants")
            if isinstance(e, ir.Call) and e.kind is ir.CallKind.TORCH and e.args and (
                    self.kind(e.args[0]) is HOST or isinstance(e.args[0], (ir.ListExpr, ir.TupleExpr))
                    and all(self.kind(x) is HOST for x in e.args[0].items)):  # type: ignore[union-attr]
                # torch.tensor(node.word_id), torch.tensor([node.word]): batched numbers under vmap
                form = ir.known(FROM_HOST, e.target)
                if form is not None:
                    range_checked(e, lambda x: self.kind(x) is HOST and not isinstance(x, ir.Const))
                    e.target = form
            for c in ir.children(e):
                visit(c)

        for s in stmts:
            visit(s.value)
            defined.update(s.target.names())
        stmts = self.lookups(stmts, by_key)
        if self.fusion:
            stmts = self.fuse(stmts, by_key, param)
        if all(p.role == "shared" for p in params):
            # operands all constants or shared (a random op, e.g. `torch.randn(4)`): one dummy host
            # value per DFG node gives the batched form (vmap) a batch dimension to draw over
            params.insert(0, BlockParam("_row", "host", expr=ir.Const(stmts[0].loc, 0)))
        # a hoisted block runs one level above its deepest input (App. A.1)
        inputs = [sdepth_of(self.kind(p.expr)) for p in params if p.role == "tensor"]  # type: ignore[arg-type]
        if None in inputs:  # a recursion-dependent input (read for its shape, `torch.zeros(x.shape[0])`)
            is_static = False
        sdepth = 1 + max(inputs, default=-1) if is_static else None  # type: ignore[type-var]
        read_outside = self.reads_outside(stmts)
        outputs = [n for s in stmts for n in s.target.names() if n in read_outside]
        outputs = list(dict.fromkeys(outputs))
        bid = next(self.block_ids)
        name = f"{self.spec.name}:{stmts[0].loc.line}" + (" (hoisted)" if is_static else "")
        block = Block(bid, name, self.spec, stmts, params, outputs, sdepth, stmts[0].loc, subst=self.subst)
        return BlockCall(stmts[0].loc, block)

    @staticmethod
    def host_size(e: ir.Expr) -> str:
        """Why the per-instance host number ``e`` cannot be a size inside a block, and what to write instead."""
        what = f"`{e.id}`" if isinstance(e, ir.Name) else "this host value"
        return (f"{what} is a per-instance host number used as a size (or dim) of a tensor operator: in a static "
                "block it is one number per instance, a batched tensor under vmap, which no size can be. Write the "
                "shape read inline (`x.view(x.shape[0], -1)`, `x.size(-1) // 2`) or a constant; a variable bound once "
                "to a constant or a shape read of a tensor that is not rebound before this line (`n = x.shape[0]`) "
                "is read inline for you (acrobat.analysis.shape_vars). The dynamic tier runs it as written")

    def plain_name(self, e: ir.Name) -> ir.Name:
        """A new reference to variable ``e`` of the kind ``e`` has here (its static depth places a hoisted
        block, App. A.1), without the value read host code may make of ``e`` itself (§4.2)."""
        name = ir.Name(e.loc, e.id)
        self.spec.kinds[name.nid] = self.kind(e)
        return name

    def item_of(self, e: ir.Name, j: int) -> ir.Subscript:
        """``e[j]`` of a tuple variable ``e``, of the kind of its item ``j``."""
        item = ir.Subscript(e.loc, self.plain_name(e), ir.Const(e.loc, j))
        k = self.kind(e)
        self.spec.kinds[item.nid] = k.items[j] if isinstance(k, TupleK) else k
        return item

    def callee_is_shared(self, e: ir.Call) -> bool:
        """``e`` calls a shared value or its method with per-instance arguments (``p.cell(x)``, ``p.W.add(x)``)."""
        recv = e.receiver
        return e.kind in (ir.CallKind.METHOD, ir.CallKind.VALUE) and recv is not None \
            and isinstance(self.kind(recv), SharedK)

    def shared_callee(self, e: ir.Call, param: Callable) -> None:
        """Make ``e`` call a shared parameter of the block holding its callee's batchable form (§5.1).

        ``p.cell(x, (h, c))`` becomes ``_sK(x, (h, c))``: slot K holds what
        ``acrobat.codegen.modules.call_form`` makes of ``p.cell`` each run (for a
        module, its twin with batchable cells and its parameters as leaves).
        """
        recv = e.receiver
        assert recv is not None
        method = e.target if e.kind is ir.CallKind.METHOD else None
        ref = ("call", self.kind(recv).ref, method) + (("rows",) if e.nid in self.row_calls else ())
        slot = self.slots.slot(ref, self.spec, loc=e.loc, receiver=recv)
        name = param(("s", slot), "shared", lambda n: BlockParam(n, "shared", slot=slot)).name
        e.kind, e.target = ir.CallKind.VALUE, None
        e.receiver = ir.Name(recv.loc, name)

    def lookups(self, stmts: list[ir.Assign], by_key: dict) -> list[ir.Assign]:
        """Each ``W[i]`` of a shared value ``W`` by a per-instance host value ``i`` (an embedding lookup,
        ``p.emb[node.word_id]``) read through ``acrobat.runtime.lookup.lookup``, computed first in the
        block: ``W[i]``, or a lookup with a sparse gradient in a run with ``sparse_grads=True``."""
        out = list(stmts)
        for s in stmts:
            for e in ir.walk(s.value):
                if isinstance(e, ir.Subscript) and isinstance(self.kind(e.obj), SharedK) \
                        and ("h", e.index.nid) in by_key and e.obj.nid in self.subst:
                    temp = f"_lk{e.nid}"
                    args = [ir.Name(e.loc, self.subst[e.obj.nid]), ir.Name(e.loc, by_key[("h", e.index.nid)].name)]
                    out.insert(0, ir.Assign(e.loc, ir.Target(name=temp), ir.Call(e.loc, ir.CallKind.TORCH, lookup,
                                                                                 args, {})))
                    self.subst[e.nid] = temp
        return out

    def fuse(self, stmts: list[ir.Assign], by_key: dict, param: Callable) -> list[ir.Assign]:
        """Horizontal fusion (App. B.1): one matmul for each group of ``x @ W_i`` in the block."""
        def weight_slot(e: ir.Expr) -> int | None:  # a shared weight the block takes as it is (not a lookup)
            k = self.kind(e)
            slot = self.slots.slot(k.ref, self.spec) if isinstance(k, SharedK) else None
            return slot if ("s", slot) in by_key else None

        out = list(stmts)
        for n, group in sorted(enumerate(matmul_groups(stmts, weight_slot)), key=lambda g: -min(i for i, _, _ in g[1])):
            slots = tuple(dict.fromkeys(slot for _, _, slot in group))
            fused = param(("f", slots), "shared",
                          lambda name: BlockParam(name, "shared", slot=self.slots.slot(("hfuse", slots), None))).name
            first, node, _ = min(group, key=lambda g: g[0])
            loc = node.loc
            args = [ir.Name(loc, node.left.id), ir.Name(loc, fused)]  # type: ignore[union-attr]
            args += [ir.Name(loc, by_key[("s", slot)].name) for slot in slots]
            temp = f"_hf{n}"
            call = ir.Call(loc, ir.CallKind.TORCH, fused_matmul, args, {})
            out.insert(first, ir.Assign(loc, ir.Target(name=temp), call))
            for _, member, slot in group:
                self.subst[member.nid] = f"{temp}[{slots.index(slot)}]"
        return out

    def reads_outside(self, stmts: list[ir.Assign], call: BlockCall | None = None) -> set[str]:
        """Names read by statements other than ``stmts`` (and other than their own ``call``)."""
        inside = {s.nid for s in stmts} | ({call.nid} if call is not None else set())
        names: set[str] = set()
        for s in ir.walk_stmts(self.body):
            if s.nid in inside:
                continue
            for e in ir.stmt_exprs(s):
                names |= ir.names_read(e)
            if isinstance(s, ProgramCall):
                for _, args in s.calls:
                    for a in args:
                        names |= ir.names_read(a)
            if isinstance(s, BlockCall):
                for p in s.block.batched_params:
                    names |= ir.names_read(p.expr)  # type: ignore[arg-type]
        return names

    def lower(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        self.subst: dict[int, str] = {}
        self.row_calls: set[int] = set()  # nids of shared callees applied to the rows of a stacked list
        self.body = self.flatten(body)
        found = shape_definitions(self.body, self.spec, self.is_tensor_stmt)  # `n = h.shape[0]`: n read as h.shape[0]
        for s in ir.walk_stmts(self.body):
            if self.is_tensor_stmt(s):
                _substitute(s.value, found)  # type: ignore[attr-defined]
        self.body = self.form(self.body)
        # outputs of blocks read by later blocks are only known once all blocks exist; a block in a
        # loop that reads a name it writes (``h, c = cell(x, (h, c))``) reads it again next iteration
        in_loops = {id(t) for s in ir.walk_stmts(self.body) if isinstance(s, (ir.For, ir.While))
                    for t in ir.walk_stmts(s.body)}
        for s in ir.walk_stmts(self.body):
            if isinstance(s, BlockCall):
                read = self.reads_outside(s.block.stmts, s)
                if id(s) in in_loops:
                    read |= {p.expr.id for p in s.block.batched_params if isinstance(p.expr, ir.Name)}
                s.block.outputs = list(dict.fromkeys(n for st in s.block.stmts for n in st.target.names() if n in read))
        return self.body


SEGMENT_SUM = SEGMENT_OPS["sum"]


def chosen_position(index: Any, keys: range | tuple) -> int:
    """Where ``index`` is in ``keys``, the keys of a container of modules (``p.experts[index]``; ``module_keys``):
    host code of the dispatch ``lower_choice`` writes. A sequence's index (``keys`` a range) may be negative, as
    in Python.

    Raises:
        IndexError: an index out of range, as ``nn.ModuleList`` raises it.
        KeyError: a key the container lacks, as ``nn.ModuleDict`` raises it.
        TypeError: an index that is no integer, for a sequence.
    """
    if isinstance(keys, tuple):
        return {key: i for i, key in enumerate(keys)}[index]
    i = operator.index(index)
    if not -len(keys) <= i < len(keys):
        raise IndexError(f"index {i} is out of range")
    return i % len(keys)


def _operands(e: ir.Expr) -> list[ir.Expr]:
    """The operands of an operator node: receiver, positional and keyword arguments, both sides (of a
    comparison too), or what a subscript indexes."""
    if isinstance(e, ir.BinOp):
        return [e.left, e.right]
    if isinstance(e, ir.Compare):
        return list(e.operands)
    if isinstance(e, ir.UnaryOp):
        return [e.operand]
    if isinstance(e, ir.Subscript):  # its index is host data, kept in the row's subscript (`row_value`)
        return [e.obj]
    assert isinstance(e, ir.Call)
    return rowops.operands(e)


def _on_row(e: ir.Expr, args: list[ir.Expr]) -> ir.Expr:
    """A new operator node like ``e`` over the operands ``args`` (a row in place of a stacked list)."""
    node = copy.copy(e)
    node.nid = ir.fresh_id()
    _set_operands(node, args)
    return node


def _set_operands(e: ir.Expr, values: list[ir.Expr]) -> None:
    """Replace the operands of ``e`` (as ``_operands`` lists them) by ``values``."""
    if isinstance(e, ir.BinOp):
        e.left, e.right = values
        return
    if isinstance(e, ir.Compare):
        e.operands = list(values)
        return
    if isinstance(e, ir.UnaryOp):
        e.operand, = values
        return
    assert isinstance(e, ir.Call)
    it = iter(values)
    if e.receiver is not None:
        e.receiver = next(it)
    e.args = [next(it) for _ in e.args]
    e.kwargs = {k: next(it) for k in e.kwargs}


def _constant_arithmetic(e: ir.Expr) -> bool:
    """Whether ``e`` is constants combined by arithmetic alone (``-2.0``, ``-CLIP`` or ``CLIP / 2`` of a module
    constant, which the frontend reads as its value): one number for every instance, printed in the block as
    written, where a host operand would be a batched tensor under vmap (``torch.clamp(h, -CLIP, CLIP)`` then
    read it with ``.item()``)."""
    match e:
        case ir.Const():
            return True
        case ir.UnaryOp(op="-" | "+", operand=x):
            return _constant_arithmetic(x)
        case ir.BinOp(left=a, right=b):
            return _constant_arithmetic(a) and _constant_arithmetic(b)
    return False


def _continues(body: list[ir.Stmt]) -> bool:
    """True when ``body`` holds a ``continue`` of its own loop (not of a nested loop)."""
    return any(isinstance(s, ir.Continue) or isinstance(s, ir.If) and (_continues(s.body) or _continues(s.orelse))
               for s in body)


def _substitute(e: ir.Expr, items: dict[int, ir.Expr]) -> None:
    """Replace, inside ``e``, every sub-expression whose ``id`` is a key of ``items`` by its value (in place)."""
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, ir.Expr):
            if id(v) in items:
                setattr(e, f.name, items[id(v)])
            else:
                _substitute(v, items)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, ir.Expr):
                    if id(x) in items:
                        v[i] = items[id(x)]
                    else:
                        _substitute(x, items)
        elif isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, ir.Expr):
                    if id(x) in items:
                        v[k] = items[id(x)]
                    else:
                        _substitute(x, items)


def lower_function(spec: Spec, body: list[ir.Stmt], slots: SharedSlots, block_ids: itertools.count,
                   options, effects: set | None = None) -> list[ir.Stmt]:
    """Flatten one specialization's ``body`` (a private copy: it is rewritten) and form its static blocks.

    ``options`` (``acrobat.Options``) switches hoisting, coarsening and concurrency off for ablations;
    ``effects``: the specializations that change host state outliving them (``aliases.escaping_effects``),
    whose calls are never made concurrent by inference (``_Lowerer.infer_concurrency``).

    Each ``Block`` carries its specialization's substitution table
    (expression nid -> block parameter name) for the block code generator.

    Raises:
        CompileError: a construct that cannot be placed in a block.
    """
    independent = None
    if options.concurrency and effects is not None:
        def independent(c: ir.Call) -> bool:  # a call whose run changes no host state that outlives it
            return spec.calls.get(c.nid) not in effects
    lowerer = _Lowerer(spec, slots, block_ids, options.hoisting, options.coarsening, options.horizontal_fusion,
                       independent)
    return lowerer.lower(body)
