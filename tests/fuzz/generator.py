"""Random acrobat programs of the constructs the README lists as supported, and their interactions.

``generate(chooser)`` writes one module: an ``@ab.program main(inst, p)``
over one instance kind of ``tests.fuzz.world`` and up to a few
``@ab.function`` helpers (a recursion over the tree, cells, a visitor that
appends to a list passed in), plus undecorated host helpers. Bodies are
drawn from statement kinds: assignments of tensors, host ints and floats,
``if``/``else`` on host data and on tensor values (value reads, §4.2),
``for`` over ranges, lists and the instance, bounded ``while`` loops,
``break``/``continue``, early ``return``, lists built by ``append`` (also
through an alias and a callee), comprehensions, dicts, Optional state,
tuples and starred unpacking, nested ``def``s, ``acrobat.phase()``,
results stored on the tree's nodes (``node.st = ...``, read back from the
children and by ``main``),
chained assignment, ``list.reverse()``, ``if xs:`` on a list,
``tuple(torch.chunk(...))``, ``.max(dim)`` pairs (``.values``, unpacked), a
module of an ``nn.ModuleList`` chosen by a per-instance int (dynamic tier),
``torch.stack`` with reductions (also over ``dim=-1`` of 0-D items, and
``keepdim=True``; ``topk``/``sort``/``argsort`` read back with ``.tolist()``),
softmax attention, ``torch.cat`` of unsqueezed items,
``nn`` cells and modules, inline value reads (``x * x.max().item()``), and
loops over a tensor's rows (``for x in M``, ``enumerate``, ``zip``, ``reversed``,
``list(M)``, the 0-d rows of a vector). Host int lists (token ids, lengths;
``int_list``): built from the instance and from host arithmetic, read by
``torch.tensor(ws)``, embedding lookups, ``len``, indexing, slicing,
``sum``/``max``/``count``/``index``, ``in``, ``for``/``enumerate``/``zip``, and
changed in place after such a use (``append``, ``pop``, ``ws[i] = k``,
``reverse``, ``insert``, ``sort``, ``+=``), the instance's own list too;
in-place writes on a ``Doc`` instance's tensor after a use (``inst.x.add_(1)``,
``inst.x[0] = v``). Also ``elif``, ``while True:``, annotated assignments,
``torch.inference_mode()``/``enable_grad()`` bodies, module methods
(``p.mix(x, h)``, calling ``self.squash``), ``nn.Embedding`` by a tensor of ids,
``nn.Sequential``, an ``nn.ParameterList`` item picked by host data, loops over the model's module and parameter
containers (``for m in p.experts``, ``enumerate``, ``zip(p.experts, p.biases)``, ``p.head``, ``reversed``), sums
started at a host number
(``acc = 0`` then ``acc += v`` in a loop, maybe run zero times; ``main`` may return ``acc`` itself), and in a
cell a construct the static tier rejects (a dict item assignment, ``try``, a stored lambda, a generator,
``isinstance`` on a tensor), which makes the cell a dynamic region (``rejected``), and in ``main`` one such
construct on ``h`` (a dict filled in a loop, ``try``, a stored lambda, ``isinstance``), which makes its statement
or loop a dynamic region, or the whole program dynamic where it cannot be outlined (``rejected_in_entry``); and
in ``main`` a dict keyed by host data: a memo table keyed by ``id(node)`` filled by a recursive callee, or a table
keyed by tokens filled in a loop (``memo_in_entry``).

Every variable has one type for its whole life, tracked here: ``T`` a
tensor of shape (H,), ``I`` a host int, ``F`` a host float, ``L`` a
non-empty list of ``T``, ``O`` an Optional ``T``, ``D`` a dict
``{"h": T, "c": T}``, ``P`` a pair ``(T, T)``, ``IL`` a non-empty list of host ints (emptied never:
``pop`` only while it holds two); ``main`` may also return ``S``, a 0-d
tensor (or a stacked list's product) computed with a host float, and ``A``, an accumulator (a host number or a
tensor, per instance). So programs are well-typed
and well-shaped, and they run as plain Python on every instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.fuzz.chooser import Chooser
from tests.fuzz.world import INSTANCE_KINDS

TYPES = ("T", "I", "F", "L", "O", "D", "P", "IL")


@dataclass
class Scope:
    """The variables visible at a point: name -> type; which lists may not grow (a loop iterates them)."""

    vars: dict[str, str] = field(default_factory=dict)
    frozen: set[str] = field(default_factory=set)  # lists a loop iterates (they may not grow), while counters
    node: str | None = None  # the tree node variable, in a tree function
    loop: bool = False  # inside a loop (break/continue allowed)
    ret: str | None = None  # what `return` gives in this function, or None where no early return is drawn

    def copy(self) -> "Scope":
        return Scope(dict(self.vars), set(self.frozen), self.node, self.loop, self.ret)

    def of(self, ty: str) -> list[str]:
        return [n for n, t in self.vars.items() if t == ty]


@dataclass
class FuzzProgram:
    """One generated program: its module source, the instance kind, dtype and run options to use."""

    source: str
    kind: str
    dtype: str  # "float32" or "float64"
    options: dict[str, bool]
    batch_sizes: tuple[int, ...]
    features: set[str]  # the statement and expression kinds it uses (for the fuzz report)


class Gen:
    """Writes one program from a ``Chooser``'s decisions (index 0: the simplest option)."""

    def __init__(self, ch: Chooser, max_stmts: int = 6, max_depth: int = 3):
        self.ch = ch
        self.max_stmts = max_stmts
        self.max_depth = max_depth
        self.names = 0
        self.helpers: list[str] = []  # source of the functions before main
        self.cells: list[str] = []  # names of tensor cells (x, h, p) -> T
        self.features: set[str] = set()
        self.kind = "seq"
        self.entry = False
        self.helpers_names: set[str] = set()
        self.result_types: list[str] = []  # what main returns besides a tensor, fixed up front (every return alike)
        self.stored = False  # the recursion stores `node.st` on every node (``tree_fn``)
        self.main_returns = False  # main has an early `return` (``final_result``)

    # -- names and small helpers ----------------------------------------------
    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def var(self, sc: Scope, ty: str) -> str | None:
        names = sc.of(ty)
        return self.ch.pick(names) if names else None

    def feat(self, name: str) -> None:
        self.features.add(name)

    # -- expressions -------------------------------------------------------------
    def tensor(self, sc: Scope, d: int = 0) -> str:
        """An expression of type T: shape (H,)."""
        leaf = d >= self.max_depth
        options = ["var", "h0", "emb", "inst_x"] if leaf else [
            "var", "h0", "emb", "tanh_lin", "sigmoid", "mul", "add", "sub", "relu", "scale", "gru", "linear",
            "stack_sum", "stack_mean", "stack_max", "attention", "list_item", "dict_item", "pair_item",
            "optional_or", "ifexp", "inline_read", "host_scale", "cell", "where", "stacked_weight", "cat_lin",
            "chunk", "dot_scale", "clamp", "lstm_h", "softmax_rows", "sum_list", "stack_index", "zeros_shape",
            "rec_call", "no_grad_exp", "il_emb", "il_embed", "il_float", "inst_x", "method", "head", "bias"]
        k = self.ch.pick(options)
        sub = lambda: self.tensor(sc, d + 1)  # noqa: E731
        if k == "var":
            return self.var(sc, "T") or "p.h0"
        if k == "h0":
            return "p.h0"
        if k == "emb":
            return f"p.emb[({self.int(sc, d + 1)}) % 7]"
        if k == "tanh_lin":
            return f"torch.tanh({sub()} @ p.W + p.b)"
        if k == "sigmoid":
            return f"torch.sigmoid({sub()})"
        if k == "mul":
            return f"({sub()} * {sub()})"
        if k == "add":
            return f"({sub()} + {sub()})"
        if k == "sub":
            return f"({sub()} - {sub()})"
        if k == "relu":
            return f"F.relu({sub()} @ p.U)"
        if k == "scale":
            return f"({sub()} * 0.5)"
        if k == "gru":
            self.feat("nn cell")
            return f"p.cell({sub()}, {sub()})"
        if k == "linear":
            self.feat("nn module")
            return f"torch.tanh(p.lin({sub()}))"
        lst = self.var(sc, "L")
        if k in ("stack_sum", "stack_mean", "stack_max", "attention", "list_item", "softmax_rows") and lst:
            self.feat("stack/reduce")
            if k == "stack_sum":
                return f"torch.stack({lst}).sum(0)"
            if k == "stack_mean":
                return f"torch.stack({lst}).mean(dim=0)"
            if k == "stack_max":
                return f"torch.stack({lst}).max(0).values"
            if k == "attention":
                self.feat("attention")
                return f"(torch.softmax(torch.stack({lst}) @ {sub()}, dim=0) @ torch.stack({lst}))"
            if k == "softmax_rows":  # not .sum(0): a softmax over the list axis sums to 1 in every column, and a
                # value read of those ties (argmax, a comparison) breaks them by rounding: no verdict
                return f"torch.softmax(torch.stack({lst}), dim=0)[-1]"
            return f"{lst}[{self.ch.pick(['0', '-1', f'len({lst}) - 1'])}]"
        dct = self.var(sc, "D")
        if k == "dict_item" and dct:
            self.feat("dict")
            return dct + self.ch.pick(['["h"]', '["c"]'])
        pair = self.var(sc, "P")
        if k == "pair_item" and pair:
            self.feat("tuple")
            return f"{pair}[{self.ch.pick(['0', '1'])}]"
        opt = self.var(sc, "O")
        if k == "optional_or" and opt:
            self.feat("optional")
            return f"({opt} if {opt} is not None else {sub()})"
        if k == "ifexp":
            self.feat("conditional expression")
            return f"({sub()} if {self.cond(sc, d + 1)} else {sub()})"
        if k == "inline_read":
            self.feat("inline value read")
            x = sub()
            return self.ch.pick([f"({x} * float({x}.max()))", f"({x} * {x}.sum().item())",
                                 f"p.emb[int(torch.argmax({x}))]"])
        if k == "host_scale":
            return f"({sub()} * {self.float(sc, d + 1)})"
        if k == "cell" and self.cells:
            self.feat("function call")
            extra = self.ch.pick(["", ", s=0.5", ", 0.25"])
            if extra:
                self.feat("keyword/default arguments")
            return f"{self.ch.pick(self.cells)}({sub()}, {sub()}, p{extra})"
        if k == "sum_list" and lst:
            self.feat("sum of a list")
            return f"sum({lst})"
        if k == "stack_index" and lst:
            self.feat("stacked list indexing")
            return f"torch.stack({lst})[{self.ch.pick(['0', '-1'])}]"
        if k == "zeros_shape":
            self.feat("shape in a tensor expression")
            x = sub()
            return f"({x} + torch.zeros({x}.shape[0], dtype={x}.dtype))"
        if k == "rec_call" and self.entry and self.kind in ("tree", "nary"):
            self.feat("recursion in a loop")
            return "rec(inst, p)"
        if k == "no_grad_exp":
            return f"torch.exp(-{sub()}.abs())"
        il = self.var(sc, "IL")
        if k in ("il_emb", "il_embed", "il_float") and il:
            return self.int_list_tensor(k, il, sc, d)
        if k == "inst_x" and self.kind == "doc" and self.entry:
            self.feat("instance tensor")
            return "inst.x"
        if k == "method":
            self.feat("module method call")
            return f"p.mix({sub()}, {sub()})"
        if k == "head":
            self.feat("nn.Sequential")
            return f"p.head({sub()})"
        if k == "bias":
            self.feat("parameter list by data")
            return f"({sub()} + p.biases[{self.int(sc, d + 1)} % 3])"
        if k == "where":
            x = sub()
            return f"torch.where({x} > 0, {x}, {sub()})"
        if k == "stacked_weight":
            self.feat("weight chosen by data")
            return f"torch.tanh({sub()} @ p.Ws[({self.int(sc, d + 1)}) % 3])"
        if k == "cat_lin":
            return f"torch.tanh(torch.cat([{sub()}, {sub()}]) @ p.W2)"
        if k == "chunk":
            return f"torch.chunk(torch.cat([{sub()}, {sub()}]), 2)[{self.ch.pick(['0', '1'])}]"
        if k == "dot_scale":
            return f"(({sub()} * {sub()}).sum() * {sub()})"
        if k == "clamp":
            return f"torch.clamp({sub()}, -0.5, 0.5)"
        if k == "lstm_h":
            self.feat("nn cell")
            return f"p.lstm({sub()})[{self.ch.pick(['0', '1'])}]"
        return self.var(sc, "T") or "p.h0"

    def int(self, sc: Scope, d: int = 0) -> str:
        """An expression of type I (a host int, small)."""
        options = ["const", "var"] if d >= self.max_depth else [
            "const", "var", "plus", "len", "argmax", "word", "mod", "minmax", "helper", "steps", "shape", "il_len",
            "il_item", "il_sum", "il_count", "il_index"]
        k = self.ch.pick(options)
        il = self.var(sc, "IL")
        if k.startswith("il_") and il:
            self.feat("host int list read")
            if k == "il_len":
                return f"len({il})"
            if k == "il_item":
                return self.ch.pick([f"{il}[0]", f"{il}[-1]", f"{il}[{self.int(sc, d + 1)} % len({il})]"])
            if k == "il_sum":
                return self.ch.pick([f"sum({il})", f"max({il})", f"min({il}[-2:])"])
            if k == "il_count":
                return f"{il}.count({self.int(sc, d + 1)})"
            return f"{il}.index({il}[-1])"
        if k == "var":
            return self.var(sc, "I") or str(self.ch.int(0, 3))
        if k == "plus":
            return f"({self.int(sc, d + 1)} + {self.ch.int(1, 2)})"
        if k == "len" and self.var(sc, "L"):
            return f"len({self.var(sc, 'L')})"
        if k == "argmax":
            self.feat("value read")
            return self.ch.pick([f"int(torch.argmax({self.tensor(sc, d + 1)}))",
                                 f"{self.tensor(sc, d + 1)}.argmax().item()"])
        if k == "word" and sc.node is not None:
            return f"{sc.node}.word"
        if k == "word" and self.kind == "doc" and self.entry:
            return "len(inst.tokens)"
        if k == "mod":
            return f"({self.int(sc, d + 1)} * 2 % 5)"
        if k == "minmax":
            return f"{self.ch.pick(['min', 'max'])}({self.int(sc, d + 1)}, {self.ch.int(0, 3)})"
        if k == "helper":
            self.feat("host helper")
            return f"clip({self.int(sc, d + 1)})"
        if k == "steps":
            return "p.steps"
        if k == "shape":
            self.feat("shape read")
            x = self.tensor(sc, d + 1)
            return self.ch.pick([f"{x}.shape[0]", f"{x}.size(0)", f"len({x})"])
        return str(self.ch.int(0, 3))

    def float(self, sc: Scope, d: int = 0) -> str:
        """An expression of type F (a host float)."""
        k = self.ch.pick(["const", "var", "scale", "read", "math"] if d < self.max_depth else ["const", "var"])
        if k == "var":
            return self.var(sc, "F") or "0.5"
        if k == "scale":
            return "p.scale"
        if k == "read":
            self.feat("value read")
            return self.ch.pick([f"float({self.tensor(sc, d + 1)}.sum())", f"{self.tensor(sc, d + 1)}.max().item()"])
        if k == "math":
            self.feat("math")
            return f"math.sqrt(abs({self.float(sc, d + 1)}) + 1.0)"
        return self.ch.pick(["0.5", "1.5", "-0.25"])

    def cond(self, sc: Scope, d: int = 0) -> str:
        """A test for ``if``/``while``/``a if c else b``: host data, or a tensor's value (a value read, §4.2)."""
        options = ["int_cmp", "int_mod"] if d >= self.max_depth else [
            "int_cmp", "int_mod", "leaf", "len", "none", "tensor_gt", "float_gt", "bool_read", "argmax_eq",
            "and", "or", "not", "item_gt", "isinstance", "il_in"]
        k = self.ch.pick(options)
        c = self.ch.pick(["0", "1", "2"])
        if k == "leaf" and sc.node is not None and self.kind == "tree":
            return f"{sc.node}.is_leaf"
        if k == "leaf" and sc.node is not None:
            return f"len({sc.node}.children) == 0"
        if k == "len" and self.var(sc, "L"):
            return f"len({self.var(sc, 'L')}) > {c}"
        if k == "none" and self.var(sc, "O"):
            self.feat("optional")
            return f"{self.var(sc, 'O')} is {self.ch.pick(['None', 'not None'])}"
        if k in ("tensor_gt", "float_gt", "bool_read", "argmax_eq", "item_gt"):
            self.feat("tensor-dependent control flow")
            x = self.tensor(sc, d + 1)
            t = self.ch.pick(["0.1", "-0.2", "0.35"])
            return {"tensor_gt": f"{x}.sum() > {t}", "float_gt": f"float({x}.max()) > {t}",
                    "bool_read": f"bool({x}[0] > {x}[1])", "argmax_eq": f"int(torch.argmax({x})) == {c}",
                    "item_gt": f"{x}.mean().item() < {t}"}[k]
        if k in ("and", "or"):
            return f"({self.cond(sc, d + 1)} {k} {self.cond(sc, d + 1)})"
        if k == "il_in" and self.var(sc, "IL"):
            self.feat("host int list read")
            return f"{self.int(sc, d + 1)} {self.ch.pick(['in', 'not in'])} {self.var(sc, 'IL')}"
        if k == "isinstance":
            return f"isinstance({self.int(sc, d + 1)}, int)"
        if k == "not":
            return f"not ({self.cond(sc, d + 1)})"
        if k == "int_mod":
            return f"{self.int(sc, d + 1)} % 2 == 0"
        return f"{self.int(sc, d + 1)} > {c}"

    def value(self, sc: Scope, ty: str) -> str:
        """A fresh value of type ``ty``."""
        if ty == "T":
            return self.tensor(sc)
        if ty == "I":
            return self.int(sc)
        if ty == "F":
            return self.float(sc)
        if ty == "L":
            return f"[{self.tensor(sc)}]"
        if ty == "O":
            return self.ch.pick(["None", self.tensor(sc)])
        if ty == "D":
            return f'{{"h": {self.tensor(sc)}, "c": {self.tensor(sc)}}}'
        if ty == "IL":
            return f"[{self.int(sc)}, {self.int(sc)}]"
        if ty == "S":  # a 0-d tensor beside a host number: its dtype is the tensor's, as a Python number promotes
            self.feat("0-d tensor and host number")
            return self.ch.pick([f"({self.tensor(sc)}.sum() * {self.float(sc)})",
                                 f"(torch.stack([{self.tensor(sc)}]) @ {self.tensor(sc)} / {self.float(sc)})"])
        return f"({self.tensor(sc)}, {self.tensor(sc)})"

    def result(self, sc: Scope) -> str:
        """What ``main`` returns: a tensor, or a tuple of a tensor and values of ``result_types`` (a variable of
        the type where one is visible, else a fresh value): every ``return`` of main gives the same structure."""
        parts = [self.tensor(sc)]
        for ty in self.result_types:
            v = self.var(sc, ty)
            parts.append(v if v is not None and self.ch.coin(70) else self.value(sc, ty))
        return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"

    # -- statements ----------------------------------------------------------------
    def body(self, sc: Scope, depth: int, n: int | None = None) -> list[str]:
        """Statements (at least one) at nesting ``depth``."""
        n = self.ch.int(1, self.max_stmts) if n is None else n
        out: list[str] = []
        for _ in range(n):
            out += self.stmt(sc, depth)
        return out or ["pass"]

    def stmt(self, sc: Scope, depth: int) -> list[str]:
        nested = depth < 3
        options = ["assign", "new_tensor", "int", "append", "value_read", "float"]
        if nested:
            options += ["if", "for_range", "for_list", "while", "comprehension", "call_visit"]
        options += ["dict", "optional", "pair", "alias_append", "starred", "aug", "assert", "setitem", "insert", "pop"]
        if nested:
            options += ["zip_loop", "reversed_loop", "no_grad", "stacked_loop", "list_truth", "tensor_rows"]
        options += ["chained", "reverse", "chunk_tuple", "max_pair", "keyed", "returned_list", "expert", "starred_call",
                    "dense_list", "module_data", "int_list", "il_mutate", "il_use_mutate", "idioms"]
        if nested:
            options += ["il_loop", "while_true"]
        if self.kind == "doc" and self.entry:
            options += ["inst_write"]
        if sc.loop:
            options += ["break", "continue"]
        if sc.ret is not None:
            options += ["return"]
        if self.entry and depth == 1:  # the entry's own top level
            options += ["phase", "nested_def"]
        k = self.ch.pick(options)
        ind = ""
        if k == "assign" and sc.of("T"):
            return [f"{self.ch.pick(sc.of('T'))} = {self.tensor(sc)}"]
        if k == "new_tensor" or k == "assign":
            name = self.fresh("t")
            line = f"{name} = {self.tensor(sc)}"
            if self.ch.coin(15):
                self.feat("annotated assignment")
                line = line.replace(" = ", ": torch.Tensor = ", 1)
            sc.vars[name] = "T"
            return [line]
        if k == "int":
            ints = [x for x in sc.of("I") if x not in sc.frozen]  # never a while loop's counter: it must grow
            name = self.ch.pick(ints + [self.fresh("k")]) if ints else self.fresh("k")
            line = f"{name} = {self.int(sc)}"
            sc.vars[name] = "I"
            return [line]
        if k == "float":
            name = self.fresh("f")
            line = f"{name} = {self.float(sc)}"
            sc.vars[name] = "F"
            return [line]
        if k == "value_read":
            self.feat("value read")
            name = self.fresh("k")
            line = f"{name} = {self.ch.pick(['int(torch.argmax({}))', 'round(float({}.sum()) * 2)', 'int({}.argmax())']).format(self.tensor(sc))}"
            sc.vars[name] = "I"
            return [line]
        if k == "append":
            lists = [x for x in sc.of("L") if x not in sc.frozen]
            if lists:
                self.feat("list append")
                return [f"{self.ch.pick(lists)}.append({self.tensor(sc)})"]
            name = self.fresh("xs")
            line = f"{name} = [{self.tensor(sc)}]"
            sc.vars[name] = "L"
            return [line]
        if k == "alias_append":
            lists = [x for x in sc.of("L") if x not in sc.frozen]
            if lists:
                self.feat("list alias")
                src, alias = self.ch.pick(lists), self.fresh("ys")
                sc.vars[alias] = "L"
                return [f"{alias} = {src}", f"{alias}.append({self.tensor(sc)})"]
            return self.stmt(sc, depth)
        if k == "aug":
            ints = sc.of("I")
            lists = [x for x in sc.of("L") if x not in sc.frozen]
            if lists and self.ch.coin(50):
                self.feat("list +=")
                return [f"{self.ch.pick(lists)} += [{self.tensor(sc)}]"]
            if ints:
                return [f"{self.ch.pick(ints)} += {self.ch.int(1, 2)}"]
            return self.stmt(sc, depth)
        if k == "dict":
            self.feat("dict")
            old = self.var(sc, "D")
            name = old if old and self.ch.coin(50) else self.fresh("d")
            if old and self.ch.coin(50):
                line = f'{name} = {{"h": {self.tensor(sc)}, "c": {old}["c"]}}'
            else:
                line = f"{name} = {self.value(sc, 'D')}"
            sc.vars[name] = "D"
            return [line]
        if k == "optional":
            self.feat("optional")
            opt = self.var(sc, "O")
            if opt is None:
                name = self.fresh("o")
                sc.vars[name] = "O"
                return [f"{name} = None"]
            return [f"if {self.cond(sc)}:", f"    {opt} = {self.tensor(sc)}"]
        if k == "pair":
            self.feat("tuple")
            pair = self.var(sc, "P")
            if pair and self.ch.coin(50):
                a, b = self.fresh("a"), self.fresh("b")
                sc.vars[a] = sc.vars[b] = "T"
                return [f"{a}, {b} = {pair}"]
            name = self.fresh("pr")
            line = f"{name} = {self.value(sc, 'P')}"
            sc.vars[name] = "P"
            return [line]
        if k == "starred" and sc.of("L"):
            self.feat("starred")
            first, rest = self.fresh("h"), self.fresh("rest")
            line = f"{first}, *{rest} = {self.ch.pick(sc.of('L'))}"
            sc.vars[first] = "T"
            sc.vars[rest] = "LE"  # may be empty: only its length is read
            return [line, self.new_int(sc, f"len({rest})")]
        if k in ("setitem", "insert", "pop"):
            lists = [x for x in sc.of("L") if x not in sc.frozen]
            if lists:
                self.feat("list " + k)
                lst = self.ch.pick(lists)
                if k == "setitem":
                    return [f"{lst}[{self.ch.pick(['0', '-1'])}] = {self.tensor(sc)}"]
                if k == "insert":
                    return [f"{lst}.insert(0, {self.tensor(sc)})"]
                return [f"if len({lst}) > 1:", f"    {lst}.pop()"]
            return self.stmt(sc, depth)
        if k == "chained":
            self.feat("chained assignment")
            a, b = self.fresh("t"), self.fresh("t")
            line = f"{a} = {b} = {self.tensor(sc)}"
            sc.vars[a] = sc.vars[b] = "T"
            return [line]
        if k == "reverse":
            lists = [x for x in sc.of("L") if x not in sc.frozen]
            if lists:
                self.feat("list reverse")
                return [f"{self.ch.pick(lists)}.reverse()"]
            return self.stmt(sc, depth)
        if k == "list_truth" and (sc.of("L") or sc.of("LE")):
            self.feat("list truth")
            src = self.ch.pick(sc.of("L") + sc.of("LE"))
            then = self.body(sc.copy(), depth + 1, self.ch.int(1, 2))
            other = self.body(sc.copy(), depth + 1, 1)
            return [f"if {src}:", *("    " + x for x in then), "else:", *("    " + x for x in other)]
        if k == "chunk_tuple":
            self.feat("tuple of chunks")
            a, b = self.fresh("a"), self.fresh("b")
            line = f"{a}, {b} = tuple(torch.chunk(torch.cat([{self.tensor(sc)}, {self.tensor(sc)}]), 2))"
            sc.vars[a] = sc.vars[b] = "T"
            return [line]
        if k == "keyed" and sc.of("L"):
            self.feat("key=lambda")
            src = self.ch.pick(sc.of("L"))
            reverse = self.ch.pick(["", ", reverse=True", ", reverse=False"])
            form = self.ch.int(0, 2)
            if form == 0:  # host keys with ties: the first best position, as Python picks it
                name = self.fresh("k")
                sc.vars[name] = "I"
                fn = self.ch.pick(["max", "min"])
                return [f"{name} = {fn}(range(len({src})), key=lambda j: (j * {self.ch.int(1, 5)}) % 3)"]
            if form == 1:  # every key equal: the first element, and a sort that keeps the order
                name = self.fresh("ys")
                sc.vars[name] = "L"
                return [f"{name} = sorted({src}, key=lambda x: len(x.shape){reverse})"]
            order, name = self.fresh("order"), self.fresh("t")
            sc.vars[name] = "T"
            return [f"{order} = sorted(range(len({src})), key=lambda j: -(j % 2){reverse})", f"{name} = {src}[{order}[0]]"]
        if k == "returned_list":
            self.feat("list returned by a callee, changed")
            if "collect" not in self.helpers_names:
                self.helpers_names.add("collect")
                self.helpers.append("\n".join(["@ab.function", "def collect(x, p, n):", "    out = []",
                                               "    for i in range(n):", "        x = torch.tanh(p.lin(x))",
                                               "        out.append(x)", "    return out"]))
            name = self.fresh("ys")
            lines = [f"{name} = collect({self.tensor(sc)}, p, {self.ch.int(1, 3)})"]
            sc.vars[name] = "L"
            lines.append(self.ch.pick([f"{name}.reverse()", f"{name}.append({self.tensor(sc)})",
                                       f"{name}.insert(0, {self.tensor(sc)})"]))
            return lines
        if k == "starred_call":
            return self.starred_call(sc)
        if k == "module_data":
            return self.module_data(sc, top=depth == 1)
        if k == "dense_list" and sc.of("L"):
            return self.dense_list(sc)
        if k == "idioms":
            return self.idioms(sc, depth)
        if k == "max_pair":
            name = self.fresh("t")
            if sc.of("L") and self.ch.coin(50):
                self.feat("max(dim=0).values of a stack")
                line = f"{name} = torch.stack({self.ch.pick(sc.of('L'))}).max(dim=0).values"
            else:
                self.feat("max(dim) unpacked")
                line = f"{name}, {self.fresh('ix')} = torch.outer({self.tensor(sc)}, {self.tensor(sc)}).max(1)"
            sc.vars[name] = "T"
            return [line]
        if k == "expert" and self.ch.coin(40):
            return self.module_loop(sc, depth)
        if k == "expert":
            self.feat("module chosen by a per-instance int")
            name = self.fresh("t")
            index = f"clip({self.int(sc)}) % 3" + (" - 3" if self.ch.coin(30) else "")  # negative: from the end
            line = f"{name} = p.experts[{index}]({self.tensor(sc)})"
            sc.vars[name] = "T"
            return [line]
        if k in ("zip_loop", "reversed_loop", "stacked_loop") and sc.of("L"):
            inner = sc.copy()
            inner.loop = True
            for name, ty in sc.vars.items():
                if ty == "L":
                    inner.frozen.add(name)
            a, b = self.fresh("x"), self.fresh("y")
            inner.vars[a] = "T"
            if k == "zip_loop":
                inner.vars[b] = "T"
            src = self.ch.pick(sc.of("L"))
            if k == "zip_loop":
                self.feat("zip")
                head = f"for {a}, {b} in zip({src}, {self.ch.pick(sc.of('L'))}):"
            elif k == "reversed_loop":
                self.feat("reversed")
                head = f"for {a} in reversed({src}):"
            else:
                self.feat("loop over a stacked list")
                head = f"for {a} in torch.stack({src}):"
            return [head, *("    " + x for x in self.body(inner, depth + 1, self.ch.int(1, 3)))]
        if k == "tensor_rows":
            return self.tensor_rows(sc, depth)
        if k == "int_list":
            return self.int_list(sc)
        if k in ("il_mutate", "il_use_mutate", "il_loop"):  # on a new list where none is there to change
            made = [] if [x for x in sc.of("IL") if x not in sc.frozen] else self.int_list(sc)
            return made + (self.int_list_loop(sc, depth) if k == "il_loop" else
                           self.int_list_change(sc, use=k == "il_use_mutate"))
        if k == "inst_write":
            return self.instance_write(sc)
        if k == "while_true":
            self.feat("while True")
            n = self.fresh("n")
            inner = sc.copy()
            inner.loop = True
            inner.vars[n] = "I"
            inner.frozen.add(n)
            return [f"{n} = 0", "while True:", f"    {n} = {n} + 1", f"    if {n} > {self.ch.int(0, 2)}:", "        break",
                    *("    " + s for s in self.body(inner, depth + 1, self.ch.int(1, 3)))]
        if k == "no_grad":
            self.feat("with no_grad")
            mode = self.ch.pick(["no_grad", "no_grad", "inference_mode", "enable_grad"])
            if mode != "no_grad":
                self.feat(f"with {mode}")
            return [f"with torch.{mode}():", *("    " + x for x in self.body(sc, depth + 1, self.ch.int(1, 2)))]
        if k == "assert":
            return [f"assert abs({self.int(sc)}) >= 0"]
        if k == "phase":
            self.feat("phase")
            return ["ab.phase()"]
        if k == "nested_def":
            return self.nested_def(sc)
        if k == "if":
            self.feat("if")
            test = self.cond(sc)
            then = self.body(sc.copy(), depth + 1, self.ch.int(1, 3))
            out = [f"if {test}:", *("    " + x for x in then)]
            if self.ch.coin(30):
                self.feat("elif")
                out += [f"elif {self.cond(sc)}:", *("    " + x for x in self.body(sc.copy(), depth + 1, self.ch.int(1, 2)))]
            if self.ch.coin(60):
                other = self.body(sc.copy(), depth + 1, self.ch.int(1, 3))
                out += ["else:", *("    " + x for x in other)]
            return out
        if k == "for_range":
            self.feat("for")
            i = self.fresh("i")
            inner = sc.copy()
            inner.loop = True
            inner.vars[i] = "I"
            return [f"for {i} in range({self.ch.int(0, 3)}):", *("    " + x for x in self.body(inner, depth + 1))]
        if k == "for_list":
            lists = sc.of("L")
            inner = sc.copy()
            inner.loop = True
            x = self.fresh("x")
            if lists and self.ch.coin(60):
                self.feat("for over list")
                src = self.ch.pick(lists)
                inner.frozen.add(src)
                for name, ty in sc.vars.items():  # an alias of the list may be the list itself
                    if ty == "L":
                        inner.frozen.add(name)
                inner.vars[x] = "T"
                head = f"for {x} in {src}:" if self.ch.coin(70) else f"for {self.fresh('j')}, {x} in enumerate({src}):"
            elif self.kind in ("seq", "doc") and self.entry:
                self.feat("for over instance")
                inner.vars[x] = "I"
                inner.frozen.update(sc.of("IL"))  # an alias of the instance's list may not grow while it is iterated
                head = f"for {x} in {'inst' if self.kind == 'seq' else 'inst.tokens'}:"
            else:
                inner.vars[x] = "I"
                head = f"for {x} in [{self.ch.int(0, 6)}, {self.ch.int(0, 6)}]:"
            return [head, *("    " + s for s in self.body(inner, depth + 1))]
        if k == "while":
            self.feat("while")
            n = self.fresh("n")
            inner = sc.copy()
            inner.loop = True
            inner.vars[n] = "I"
            inner.frozen.add(n)
            test = f"{n} < {self.ch.int(1, 3)}"
            if self.ch.coin(40):
                test += f" and {self.cond(inner)}"
            return [f"{n} = 0", f"while {test}:", f"    {n} = {n} + 1",
                    *("    " + s for s in self.body(inner, depth + 1))]
        if k == "break":
            self.feat("break")
            return [f"if {self.cond(sc)}:", "    break"]
        if k == "continue":
            self.feat("continue")
            return [f"if {self.cond(sc)}:", "    continue"]
        if k == "return":
            self.feat("early return")
            ret = self.result(sc) if sc.ret == "main" else self.tensor(sc)
            self.main_returns = self.main_returns or sc.ret == "main"
            return [f"if {self.cond(sc)}:", f"    return {ret}"]
        if k == "comprehension" and sc.of("L"):
            self.feat("comprehension")
            src = self.ch.pick(sc.of("L"))
            name, x = self.fresh("cs"), self.fresh("c")
            inner = sc.copy()
            inner.vars[x] = "T"
            elem = self.tensor(inner)
            sc.vars[name] = "L"
            if self.ch.coin(30):
                return [f"{name} = [{elem} for {x} in {src}]"]
            return [f"{name} = [{src}[0]] + [{elem} for {x} in {src} if {self.cond(inner)}]"]
        if k == "call_visit" and "visit" in self.helpers_names and self.kind != "seq":
            lists = [x for x in sc.of("L") if x not in sc.frozen]
            if lists and sc.node is not None:
                self.feat("list changed by callee")
                return [f"visit({sc.node}, p, {self.ch.pick(lists)})"]
        return [self.new_int(sc, self.int(sc))]

    def module_loop(self, sc: Scope, depth: int) -> list[str]:
        """A loop over a shared container of the model (``p.experts`` an ``nn.ModuleList``, ``p.head`` an
        ``nn.Sequential``, ``p.biases`` an ``nn.ParameterList``; plain, ``enumerate``, ``zip``, ``reversed``), which
        the static tier unrolls (``acrobat.analysis.unrolling``): its first statement chains a tensor through the
        item, then (nested) drawn statements, ``break``/``continue``/``return`` among them."""
        form = self.ch.pick(["list", "enumerate", "zip", "sequential", "reversed"])
        self.feat(f"loop over a module container: {form}")
        inner = sc.copy()
        inner.loop = True
        m, b, i = self.fresh("m"), self.fresh("b"), self.fresh("i")
        t = self.var(sc, "T")
        if t is None:
            t = self.fresh("t")
            inner.vars[t] = "T"
        src = t if t in sc.vars else self.tensor(sc)
        head, first = {
            "list": ("for {m} in p.experts:", "{t} = torch.tanh({m}({src}))"),
            "enumerate": ("for {i}, {m} in enumerate(p.experts):", "{t} = torch.tanh({m}({src})) * ({i} + 1) / 3"),
            "zip": ("for {m}, {b} in zip(p.experts, p.biases):", "{t} = torch.tanh({m}({src}) + {b})"),
            "sequential": ("for {m} in p.head:", "{t} = {m}({src})"),
            "reversed": ("for {b} in reversed(p.biases):", "{t} = torch.tanh({src} - {b})"),
        }[form]
        if form == "enumerate":
            inner.vars[i] = "I"
            inner.frozen.add(i)
        rest = self.body(inner, depth + 1, self.ch.int(1, 2)) if depth < 3 else []
        return [head.format(m=m, b=b, i=i), *("    " + x for x in [first.format(t=t, m=m, b=b, i=i, src=src), *rest])]

    def starred_call(self, sc: Scope) -> list[str]:
        """``t = f(*pair, ...)``: a cell, a torch operator or a function taking ``*rest`` given a tuple's items by
        ``*`` (a pair variable or a tuple display), maybe keywords by ``**{...}``; or ``spread(x, *xs)`` of a list
        of per-instance length (passed whole as ``rest``)."""
        self.feat("starred call")
        pair = self.var(sc, "P") or f"({self.tensor(sc)}, {self.tensor(sc)})"
        form = self.ch.int(0, 3)
        if form == 0 and self.cells:
            cell = self.ch.pick(self.cells)
            rest = self.ch.pick(["p", f"p, {self.float(sc)}", f'**{{"p": p, "s": {self.float(sc)}}}'])
            call = f"{cell}(*{pair}, {rest})"
        elif form == 1:
            call = self.ch.pick([f"torch.maximum(*{pair})", f"torch.add(*{pair}, alpha=0.5)",
                                 f"torch.sub(*{pair})"])
        else:
            if "spread" not in self.helpers_names:
                self.helpers_names.add("spread")
                self.helpers.append("\n".join(["@ab.function", "def spread(x, *rest):", "    acc = x",
                                               "    for r in rest:", "        acc = acc + torch.tanh(r)",
                                               "    return acc / (1 + len(rest))"]))
            forms = [f"spread(*{pair})", f"spread({self.tensor(sc)}, *{pair})", f"spread({self.tensor(sc)})"]
            if sc.of("L") and self.ch.int(0, 1):  # a list of per-instance length, passed whole as `rest`
                self.feat("list unpacked into *rest")
                forms = [f"spread({self.tensor(sc)}, *{self.ch.pick(sc.of('L'))})"]
            call = self.ch.pick(forms)
        name = self.fresh("t")
        sc.vars[name] = "T"
        return [f"{name} = {call}"]

    def dense_list(self, sc: Scope) -> list[str]:
        """A T from a list L by the dense forms of a per-instance-length list (issue 18 §2): ``torch.cat`` of its
        items with a leading unit axis, a softmax or reduction over ``dim=-1`` of a stack of 0-D items, a
        softmax over ``dim=-1`` (each item) or ``dim=-2`` (the list) of a stack of items, ``keepdim=True`` (also
        broadcast back, ``S - S.mean(0, keepdim=True)``), indices within the rows (``S[:, j]``, ``S[..., :2]``); topk,
        sort and argsort of a stack (values, ``.tolist()`` reads, an item picked by a stable sort's index); operators
        within the rows of a stack (``acrobat.analysis.rowops``: torch.where, masked_fill, F.normalize, layer_norm,
        chunk, view/transpose/flatten along the rows' axes, repeat), then reduced over the list."""
        lst, name, v = self.ch.pick(sc.of("L")), self.fresh("t"), self.fresh("v")
        form = self.ch.int(0, 4)
        if form == 0:
            self.feat("torch.cat of unsqueezed items")
            unit = self.ch.pick([f"{v}.unsqueeze(0)", f"{v}[None]", f"{v}.view(1, -1)", f"{v}.reshape(1, -1)",
                                 f"torch.unsqueeze({v}, 0)"])
            reduce = self.ch.pick([".max(dim=0).values", ".sum(0)", ".amax(0)", "[-1]"])
            value = f"torch.cat([{unit} for {v} in {lst}]){reduce}"
        elif form == 1:
            self.feat("dim=-1 of stacked scalars")
            scores = f"torch.stack([({v} * {self.tensor(sc)}).sum() for {v} in {lst}])"
            value = self.ch.pick([f"torch.softmax({scores}, dim=-1) @ torch.stack({lst})",
                                  f"{self.tensor(sc)} * torch.logsumexp({scores}, -1, keepdim=True)",
                                  f"{self.tensor(sc)} * {scores}.mean(dim=-1)"])
        elif form == 2:
            self.feat("softmax over dim=-1 of a stack")
            value = self.ch.pick([f"torch.softmax(torch.stack({lst}), dim=-1)[-1]",
                                  f"torch.log_softmax(torch.stack({lst}), dim=-2)[0]",
                                  f"torch.stack({lst}).sum(0, keepdim=True)[0]",
                                  f"(torch.stack({lst}) - torch.stack({lst}).mean(0, keepdim=True)).amax(0)",
                                  f"{self.tensor(sc)} * torch.stack({lst})[:, {self.ch.int(0, 3)}].sum()",
                                  f"torch.stack({lst})[:, None].sum(0)[0] + torch.stack({lst})[..., :2].sum()"])
        elif form == 4:
            self.feat("operator within the rows of a stack")
            S, t = f"torch.stack({lst})", self.tensor(sc)
            value = self.ch.pick([f"torch.where({S} > 0, {S}, {t} * 0.5).sum(0)",
                                  f"F.normalize({S}, dim=-1).amax(0)",
                                  f"F.layer_norm({S} * {t}, (4,)).sum(0)",
                                  f"{S}.clamp(-0.5, 0.5).masked_fill({S} < -0.2, 0.0).sum(0)",
                                  f"({S}.chunk(2, dim=-1)[0].repeat(1, 2) * {S}).sum(0)",
                                  f"{S}.view(len({lst}), 2, 2).transpose(1, 2).flatten(1).amax(0)",
                                  f"torch.maximum({S}, torch.zeros_like({S})).sum(0) + (~({S} > 0)).float().sum(0)"])
        else:  # values, or indices of a stable sort: PyTorch's order of tied indices is unspecified otherwise
            self.feat("topk/sort of a stack")
            scores = f"torch.stack([({v} * {self.tensor(sc)}).sum() for {v} in {lst}])"
            k = f"min({self.ch.int(1, 3)}, len({lst}))"
            value = self.ch.pick([f"torch.topk(torch.stack({lst}), {k}, dim=0).values.sum(0)",
                                  f"torch.sort(torch.stack({lst}), dim=0, descending=True).values[0]",
                                  f"{self.tensor(sc)} * torch.topk({scores}, {k}, largest=False).values.sum(0)",
                                  f"{self.tensor(sc)} * max(torch.sort({scores}).values.tolist())",
                                  f"{lst}[torch.sort({scores}, stable=True).indices.tolist()[-1]]",
                                  f"{lst}[{scores}.argsort(descending=True, stable=True).tolist()[0]]"])
        sc.vars[name] = "T"
        return [f"{name} = {value}"]

    def idioms(self, sc: Scope, depth: int) -> list[str]:
        """A T by training code's idioms (issue 18 §2): a full reduction without dim of a stack of a list L
        (``torch.stack(xs).mean()``), ``torch.cat`` of a list variable of unit-axis items that only the cat reads,
        augmented assignments of a fresh tensor that only its own updates and one read see (``acc += x``), and
        (at a function's top level) a sum started at a host number (``accumulator``)."""
        name, v, form = self.fresh("t"), self.fresh("v"), self.ch.int(0, 3)
        if form == 3 and depth == 1:
            return self.accumulator(sc, depth)
        lines: list[str] = []
        if form == 0 and sc.of("L"):
            self.feat("full reduction of a stack")
            stack = self.ch.pick([f"torch.stack({self.ch.pick(sc.of('L'))})",
                                  f"torch.stack([({v} * {self.tensor(sc)}).sum() for {v} in {self.ch.pick(sc.of('L'))}])"])
            reduce = self.ch.pick([".mean()", ".sum()", ".max()", ".amin()", "torch.sum({})"])
            value = f"{self.tensor(sc)} * " + (reduce.format(stack) if "{" in reduce else stack + reduce)
        elif form == 1 and sc.of("L"):
            self.feat("torch.cat of a list variable")
            hs = self.fresh("hs")
            unit = self.ch.pick([f"{v}.view(1, -1)", f"{v}[None]", f"{v}.reshape(1, -1)"])
            lines.append(f"{hs} = [{unit} for {v} in {self.ch.pick(sc.of('L'))}]")
            value = f"torch.cat({hs}, 0){self.ch.pick(['.sum(0)', '.amax(0)', '.mean(0)'])}"
        else:
            self.feat("augmented assignment of a fresh tensor")
            acc = self.fresh("acc")
            lines.append(f"{acc} = {self.ch.pick(['torch.tanh', 'torch.sigmoid'])}({self.tensor(sc)})")
            lines += self.item_writes(acc)
            for _ in range(self.ch.int(1, 3)):
                op = self.ch.pick(["+=", "-=", "*=", "/="])
                lines.append(f"{acc} {op} {self.tensor(sc) if op != '/=' else '2.0'}")
            value = f"{acc} * 1.0"
        sc.vars[name] = "T"
        if self.ch.coin(25):
            return [*lines, *self.shape_var(sc, name, value)]
        return [*lines, f"{name} = {value}"]

    def shape_var(self, sc: Scope, name: str, value: str) -> list[str]:
        """``name``, a T, as ``value`` through a shape read held in a new host int ``k`` (``k = t.shape[0]``, then
        ``t.view(k // 2, 2)``: read inline in the block, acrobat.analysis.shape_vars); ``k`` stays visible."""
        self.feat("shape read held in a variable")
        t, k = self.fresh("t"), self.fresh("k")
        read = self.ch.pick([f"{t}.shape[0]", f"{t}.size(-1)", f"len({t})", f"{t}.numel()"])
        size = self.ch.pick([f"{k}", f"{k} // 2, 2", f"2, -1, {k} // 4", f"{k} - 1 + 1"])
        sc.vars[k] = "I"
        return [f"{t} = {value}", f"{k} = {read}", f"{name} = {t}.view({size}).flatten()"]

    def accumulator(self, sc: Scope, depth: int) -> list[str]:
        """A sum started at a host number (issue 18 §2, ``acrobat.analysis.accumulators``): ``acc = 0`` (an int or
        a float), then ``acc += v``/``-=``/``acc = acc + v``/``acc = acc - v`` in a loop that runs zero times for
        some instances (over ``range`` of a host int, the instance's tokens, a tree node's children), maybe
        under an ``if`` or in a nested loop, with every ``v`` a vector or every one a 0-D tensor; then a T that
        reads ``acc`` (a number or a tensor, per instance). ``acc`` stays visible as an ``A``: ``main`` may
        return it (``final_result``)."""
        self.feat("accumulator from a host number")
        acc, x, name = self.fresh("acc"), self.fresh("x"), self.fresh("t")
        inner = sc.copy()
        inner.loop = False  # no break/continue drawn here: the loop body is the updates alone
        if self.kind in ("seq", "doc") and self.entry and self.ch.coin(50):
            inner.vars[x] = "I"
            head = f"for {x} in {'inst' if self.kind == 'seq' else 'inst.tokens'}:"
        elif sc.node is not None and self.kind == "nary" and self.ch.coin(50):
            head = f"for {x} in {sc.node}.children:"  # none for a leaf
        else:
            inner.vars[x] = "I"
            head = f"for {x} in range({self.int(sc)}):"
        scalar = self.ch.coin(50)
        lines = [f"{acc} = {self.ch.pick(['0', '0.0', '1', '-0.5'])}", head]
        for _ in range(self.ch.int(1, 2)):
            value = f"{self.tensor(inner)}" + (self.ch.pick([".sum()", ".mean()", "[0]"]) if scalar else "")
            update = self.ch.pick([f"{acc} += {value}", f"{acc} -= {value}", f"{acc} = {acc} + {value}",
                                   f"{acc} = {acc} - {value}"])
            form = self.ch.int(0, 2)
            if form == 0:
                lines.append(f"    {update}")
            elif form == 1:
                self.feat("accumulator updated under an if")
                lines += [f"    if {self.cond(inner)}:", f"        {update}"]
            else:
                self.feat("accumulator updated in a nested loop")
                lines += [f"    for {self.fresh('j')} in range({self.ch.int(0, 2)}):", f"        {update}"]
        read = self.ch.pick([f"({self.tensor(sc)} + {acc})", f"({self.tensor(sc)} * {acc})",
                             f"({acc} - {self.tensor(sc)})"])
        sc.vars[name] = "T"
        sc.vars[acc] = "A"
        return [*lines, f"{name} = {read}"]

    def final_result(self, sc: Scope) -> str:
        """What ``main``'s last ``return`` gives: ``result``, with an accumulator (an ``A``: a host number or a
        tensor, per instance) after it where one is visible and no earlier ``return`` of ``main`` gives another
        structure."""
        value = self.result(sc)
        accs = sc.of("A")
        if accs and not self.main_returns and self.ch.coin(50):
            self.feat("accumulator returned")
            return f"({value}, {self.ch.pick(accs)})"
        return value

    def item_writes(self, acc: str) -> list[str]:
        """Item assignments into ``acc`` right after its fresh binding (issue 18 §2: ``x[0] = v``, the CRF
        tutorial's form; ``acrobat.analysis.inplace.item_set``), an int and a slice. It draws no choice, so the
        programs of the seeds picked before keep their other constructs."""
        self.feat("item assignment of a fresh tensor")
        return [f"{acc}[0] = 0.5", f"{acc}[-2:] = {acc}.sum() * 0.1"]

    def tensor_rows(self, sc: Scope, depth: int) -> list[str]:
        """Python over a tensor's rows (issue 18 §2) of an (H, H) tensor ``M`` (per-instance, shared or a weight):
        ``for x in M``, ``enumerate(M, start=j)``, ``zip(M, xs)``/``zip(xs, M)`` (also of two tensors, the other
        cut to 0-3 rows), ``reversed(M)``; ``xs = list(M)``; a loop over the 0-d rows of a T."""
        m = self.ch.pick([f"torch.outer({self.tensor(sc)}, {self.tensor(sc)})", "p.W",
                          f"torch.tanh({self.tensor(sc)} * p.U)"])
        form = self.ch.int(0, 5)
        if form == 4:
            self.feat("list of a tensor's rows")
            name = self.fresh("xs")
            sc.vars[name] = "L"
            return [f"{name} = list({m})"]
        if form == 5:
            self.feat("loop over a tensor's 0-d rows")
            acc, v = self.fresh("t"), self.fresh("v")
            lines = [f"{acc} = {self.tensor(sc)}", f"for {v} in {self.tensor(sc)}:", f"    {acc} = {acc} * torch.tanh({v})"]
            sc.vars[acc] = "T"
            return lines
        inner = sc.copy()
        inner.loop = True
        for name, ty in sc.vars.items():
            if ty == "L":
                inner.frozen.add(name)
        x = self.fresh("x")
        inner.vars[x] = "T"
        if form == 0:
            self.feat("loop over a tensor's rows")
            head = f"for {x} in {m}:"
        elif form == 1:
            self.feat("enumerate over a tensor's rows")
            j = self.fresh("j")
            inner.vars[j] = "I"
            head = f"for {j}, {x} in enumerate({m}{self.ch.pick(['', ', start=2', ', -1'])}):"
        elif form == 2:
            self.feat("zip over a tensor's rows")
            y = self.fresh("y")
            inner.vars[y] = "T"
            other = self.ch.pick(sc.of("L")) if sc.of("L") and self.ch.coin(60) else f"{m}[:{self.ch.int(0, 3)}]"
            head = f"for {x}, {y} in zip({m}, {other}):" if self.ch.coin(50) else f"for {y}, {x} in zip({other}, {m}):"
        else:
            self.feat("reversed over a tensor's rows")
            head = f"for {x} in reversed({m}):"
        return [head, *("    " + line for line in self.body(inner, depth + 1, self.ch.int(1, 3)))]

    def module_data(self, sc: Scope, top: bool) -> list[str]:
        """``k = TABLE["b"][i % 2] + TABLE["a"]``: a module-level dict of host data read in the model; at a
        function's top level, ``k`` then rebound to a tensor, ``k = p.emb[clip(k)]`` (the ports' ``target2index``
        and ``inputs = self.emb(inputs)``, issue 18)."""
        self.feat("module-level data")
        if "TABLE" not in self.helpers_names:
            self.helpers_names.add("TABLE")
            self.helpers.append('TABLE = {"a": 1, "b": (2, 3)}')
        name = self.fresh("k")
        lines = [f'{name} = TABLE["b"][{self.int(sc)} % 2] + TABLE["a"]']
        sc.vars[name] = "I"
        if top:
            self.feat("int rebound to a tensor")
            lines.append(f"{name} = p.emb[clip({name})]")
            sc.vars[name] = "T"
        return lines

    def int_list_tensor(self, k: str, il: str, sc: Scope, d: int) -> str:
        """A T read from the host int list ``il``: an embedding lookup by ``torch.tensor`` of it (or of a non-empty
        slice), ``nn.Embedding`` by its ids (also masked by a comparison, ``F.embedding`` of ``torch.LongTensor``,
        times ``.shape[0]``) or by one id, or a float tensor of it scaling a tensor."""
        self.feat("tensor of a host int list")
        ids = self.ch.pick([il, f"{il}[:1]", f"[{il}[0], {il}[-1]]", f"{il}[-2:]", f"{il}[:1] * 3", f"{il}[::-1]",
                            f"{il}[1:] + [{self.int(sc, d + 1)}]"])  # of per-instance length, or of one length
        if k == "il_emb":
            return self.ch.pick([f"p.emb[torch.tensor({ids}) % 7].sum(0)", f"p.emb[torch.tensor({ids}) % 7].mean(dim=0)",
                                 f"p.emb[{il}[{self.int(sc, d + 1)} % len({il})] % 7]"])
        if k == "il_embed":
            self.feat("nn.Embedding by ids")
            return self.ch.pick([f"p.embed(torch.tensor({ids}) % 7).max(0).values",
                                 f"p.embed(torch.tensor({il}[-1] % 7))",
                                 f"(p.embed(torch.tensor({ids}) % 7) * (torch.tensor({ids}) % 3 != 0).float()"
                                 f".unsqueeze(-1)).sum(0)",
                                 f"F.embedding(torch.LongTensor({ids}) % 7, p.embed.weight).mean(0)",
                                 f"p.embed(torch.tensor({ids}, dtype=torch.long) % 7).sum(0) * "
                                 f"torch.tensor({ids}).shape[0]"])
        return f"(torch.tensor({ids}, dtype=torch.float32).mean() * {self.tensor(sc, d + 1)})"

    def int_list(self, sc: Scope) -> list[str]:
        """``ws = ...``: a new IL from the instance (a token list, the instance's own list aliased or copied, a node's
        word ids), from host ints, or from another IL (a comprehension, a slice, ``sorted``, ``+``)."""
        self.feat("host int list")
        src = self.var(sc, "IL")
        forms = [lambda: f"[{self.int(sc)}, {self.int(sc)}]", lambda: f"list(range(clip({self.int(sc)}) + 1))"]
        if src:
            forms += [lambda: f"[w * 2 % 7 for w in {src}]", lambda: f"{src}[::-1]",
                      lambda: f"{src}[1:] + [{self.int(sc)}]", lambda: f"sorted({src})", lambda: src,
                      lambda: f"list({src})", lambda: f"[w + j for j, w in enumerate({src})]",
                      lambda: self.mapped(src)]
        if self.entry and self.kind in ("seq", "doc"):
            own = "inst" if self.kind == "seq" else "inst.tokens"
            self.feat("instance's own int list")
            forms += [lambda: own, lambda: f"list({own})", lambda: f"{own}[:{self.ch.int(1, 3)}]"]
        if sc.node is not None:
            forms += [lambda: f"[{sc.node}.word % 7, {self.int(sc)}]" if self.kind == "tree" else
                      f"[c.word for c in {sc.node}.children] + [{sc.node}.word]"]
        value = self.ch.pick(forms)()
        name = self.fresh("ws")
        sc.vars[name] = "IL"
        return [f"{name} = {value}"]

    def mapped(self, src: str) -> str:
        """``list(map(lambda w: ..., src))`` or ``sorted(map(...))``: a map of a lambda consumed where it stands (the
        comprehension over ``src``)."""
        self.feat("map of a lambda")
        fn = f"map(lambda w: (w * 3 + {self.ch.int(0, 6)}) % 7, {src})"
        return self.ch.pick([f"list({fn})", f"sorted({fn})"])

    def int_list_change(self, sc: Scope, use: bool) -> list[str]:
        """An IL changed in place (``append``, ``pop`` while it holds two, ``ws[i] = k``, ``reverse``, ``insert``,
        ``sort``, ``+=``), with ``use`` first a new T that reads it (``torch.tensor``, an embedding lookup)."""
        il = self.ch.pick([x for x in sc.of("IL") if x not in sc.frozen])
        lines: list[str] = []
        if use:
            self.feat("host int list changed after a use")
            name = self.fresh("t")
            lines.append(f"{name} = {self.int_list_tensor(self.ch.pick(['il_emb', 'il_embed', 'il_float']), il, sc, 1)}")
            sc.vars[name] = "T"
        self.feat("host int list changed")
        if self.ch.coin(25):  # never emptied: reads index it
            return lines + [f"if len({il}) > 1:", f"    {self.ch.pick([f'{il}.pop()', f'{il}.pop(0)', f'del {il}[0]'])}"]
        change = self.ch.pick([lambda: f"{il}.append({self.int(sc)})", lambda: f"{il}.reverse()",
                               lambda: f"{il}[{self.int(sc)} % len({il})] = {self.int(sc)}", lambda: f"{il}.sort()",
                               lambda: f"{il}.insert(0, {self.int(sc)})", lambda: f"{il} += [{self.int(sc)}]"])
        return lines + [change()]

    def int_list_loop(self, sc: Scope, depth: int) -> list[str]:
        """``for w in ws`` over an IL (also ``enumerate``, ``zip`` with a list of T or another IL, a reversed slice),
        the body often embedding ``w`` into a T; every list is frozen inside."""
        self.feat("loop over a host int list")
        il = self.ch.pick(sc.of("IL"))
        inner = sc.copy()
        inner.loop = True
        inner.frozen.update(n for n, ty in sc.vars.items() if ty in ("L", "IL"))
        w = self.fresh("w")
        inner.vars[w] = "I"
        form = self.ch.int(0, 3)
        if form == 1:
            j = self.fresh("j")
            inner.vars[j] = "I"
            head = f"for {j}, {w} in enumerate({il}):"
        elif form == 2:
            x = self.fresh("x")
            other = self.ch.pick(sc.of("L") + sc.of("IL"))
            inner.vars[x] = "T" if sc.vars[other] == "L" else "I"
            self.feat("zip of a host int list")
            head = f"for {w}, {x} in zip({il}, {other}):"
        else:
            head = f"for {w} in {il if form == 0 else il + '[::-1]'}:"
        body = []
        if sc.of("T") and self.ch.coin(60):
            t = self.ch.pick(sc.of("T"))
            body.append(f"{t} = torch.tanh({t} + p.emb[{w} % 7])")
        body += self.body(inner, depth + 1, self.ch.int(1, 2))
        return [head, *("    " + x for x in body)]

    def instance_write(self, sc: Scope) -> list[str]:
        """An in-place write on the ``Doc`` instance's tensor ``inst.x`` (``add_``, ``mul_``, ``clamp_``, an item
        set, a write through a view of it), often right after a new T that reads it."""
        self.feat("instance tensor written in place")
        lines: list[str] = []
        if self.ch.coin(60):
            name = self.fresh("t")
            lines.append(f"{name} = {self.ch.pick(['torch.tanh(inst.x)', 'inst.x * 2', 'inst.x @ p.W', 'inst.x'])}"
                         f" * {self.tensor(sc)}")
            sc.vars[name] = "T"
        write = self.ch.pick(["inst.x.add_(1.0)", "inst.x.mul_(0.5)", f"inst.x[{self.int(sc)} % 4] = {self.float(sc)}",
                              f"inst.x.add_({self.tensor(sc)})", "inst.x.clamp_(-0.5, 0.5)",
                              "inst.x[:2].mul_(0.5)", "inst.x.detach().add_(1.0)"])  # (the last two: through a view)
        return lines + [write]

    def new_int(self, sc: Scope, value: str) -> str:
        """``k = value`` for a new int variable ``k`` (visible after this statement)."""
        name = self.fresh("k")
        sc.vars[name] = "I"
        return f"{name} = {value}"

    def nested_def(self, sc: Scope) -> list[str]:
        """A nested ``def`` capturing ``p`` (bound once), called right away."""
        self.feat("nested def")
        name, a = self.fresh("inner"), self.fresh("a")
        inner = Scope({a: "T"})
        body = self.tensor(inner)
        arg = self.tensor(sc)
        res = self.fresh("t")
        sc.vars[res] = "T"
        return [f"def {name}({a}):", f"    return {body}", f"{res} = {name}({arg})"]

    # -- functions ---------------------------------------------------------------------
    def function(self, header: str, sc: Scope, prologue: list[str], epilogue: list[str], ret: str) -> list[str]:
        lines = [header, *("    " + x for x in prologue)]
        lines += ["    " + x for x in self.body(sc, 1)]
        lines += ["    " + x for x in epilogue]
        lines.append(f"    return {ret(sc) if callable(ret) else ret}")
        return lines

    def cell_fn(self) -> None:
        """A tensor cell ``cellK(x, h, p)``: straight-line or branching tensor code."""
        name = self.fresh("cell")
        sc = Scope({"x": "T", "h": "T", "s": "F"}, ret="T")
        saved = self.cells
        self.cells = list(saved)  # a cell calls only earlier cells: no recursion through cells
        lines = ["@ab.function", f"def {name}(x, h, p, s=1.0):",
                 *("    " + s for s in self.body(sc, 1, self.ch.int(1, 3)))]
        lines.append(f"    return {self.tensor(sc)}")
        self.cells = saved + [name]
        self.helpers.append("\n".join(lines))

    def rejected(self) -> None:
        """Sometimes a construct the static tier rejects put first in one cell, on its ``x`` and ``h``: the cell
        then runs as a dynamic region of an otherwise static program (``acrobat.analysis.regions``), or, where its
        body changes what it did not make, the whole program in the dynamic tier. Drawn after everything else, so
        the programs of the seeds before this draw existed stay as they were, the construct aside."""
        cells = [i for i, h in enumerate(self.helpers) if h.startswith("@ab.function\ndef cell")]
        if not cells or not self.ch.coin(20):
            return
        i = self.ch.pick(cells)
        form = self.ch.pick(["dict", "try", "lambda", "generator", "isinstance"])
        self.feat(f"rejected construct in a helper: {form}")
        decorator, head, rest = self.helpers[i].split("\n", 2)
        self.helpers[i] = "\n".join([decorator, head, *("    " + x for x in self._rejected_lines(form)), rest])

    @staticmethod
    def _rejected_lines(form: str) -> list[str]:
        """The statements of rejected construct ``form`` (see ``rejected``)."""
        return {"dict": ["rj_d = {}", "rj_d['v'] = x * 0.5", "x = rj_d['v'] + h"],
                "try": ["try:", "    x = x / s", "except ZeroDivisionError:", "    x = h"],
                "lambda": ["rj_f = lambda v: torch.tanh(v) * 0.5", "x = rj_f(x) + rj_f(h)"],
                "generator": ["def rj_g():", "    yield x", "    yield h * 0.5", "x = sum(rj_g())"],
                "isinstance": ["if isinstance(x, torch.Tensor) and not isinstance(h, float):", "    x = x + h"]}[form]

    def rejected_in_entry(self, main: list[str], at: int) -> None:
        """Sometimes a construct the static tier rejects, on ``h``, put into ``main`` (its lines) after line ``at``
        (the end of its prologue, where ``h`` is a tensor): its statement or loop is outlined into a dynamic region
        (``acrobat.analysis.outline``), or, a stored lambda, the whole program runs in the dynamic tier. Drawn
        last, so the programs of the seeds before this draw existed stay as they were, the construct aside."""
        if not self.ch.coin(20):
            return
        form = self.ch.pick(["dict loop", "try", "lambda", "isinstance"])
        self.feat(f"rejected construct in the entry: {form}")
        lines = {"dict loop": ["for rj_k in range(2):", "    rj_d = {}", "    rj_d['v'] = torch.tanh(h) * 0.5",
                               "    h = rj_d['v'] + h"],
                 "try": ["try:", "    h = h / 2.0", "except ZeroDivisionError:", "    h = h * 0.5"],
                 "lambda": ["rj_f = lambda v: torch.tanh(v) * 0.5", "h = rj_f(h) + h"],
                 "isinstance": ["if isinstance(h, torch.Tensor):", "    h = h * 0.5 + 0.1"]}[form]
        main[at + 1:at + 1] = ["    " + x for x in lines]

    def memo_in_entry(self, main: list[str], at: int) -> None:
        """Sometimes a dict keyed by host data, put into ``main`` (its lines) after line ``at`` (the end of its
        prologue, where ``h`` is a tensor): over a tree, a memo table keyed by ``id(node)`` that a recursive
        callee fills (``memo_rec``) and ``main`` reads back with ``.items()``; over tokens, a table keyed by
        ``tok % 3`` (or a tuple or string of it) filled where ``k not in memo`` and read per token, maybe with
        ``.get``. Drawn last, so the programs of the seeds before this draw existed stay as they were, the table
        aside."""
        if not self.ch.coin(20):
            return
        self.feat("memo dict keyed by host data")
        if self.kind in ("seq", "doc"):
            key = self.ch.pick(["hm_t % 3", "(hm_t % 3, 'k')", "str(hm_t % 3)"])
            read = (["    hm_v = hm_memo.get(" + key + ")", "    if hm_v is not None:", "        h = h + hm_v * 0.5"]
                    if self.ch.coin(50) else ["    h = h + hm_memo[" + key + "] * 0.5"])
            lines = ["hm_memo = {}", f"for hm_t in {'inst' if self.kind == 'seq' else 'inst.tokens'}:",
                     f"    if {key} not in hm_memo:", f"        hm_memo[{key}] = torch.tanh(p.emb[hm_t % 7] + h) * 0.5",
                     *read, "h = h * (1.0 / (1 + len(hm_memo)))"]
        else:
            kids = "[node.left, node.right] if not node.is_leaf else []" if self.kind == "tree" else "node.children"
            self.helpers.append("\n".join([
                "@ab.function", "def memo_rec(node, p, memo):", "    if id(node) in memo:",
                "        return memo[id(node)]",
                "    m = torch.tanh(p.emb[node.word % 7] @ p.W)", f"    for c in {kids}:",
                "        m = m + memo_rec(c, p, memo) * 0.5", "    memo[id(node)] = m", "    return m"]))
            lines = ["hm_memo = {}", "h = h + memo_rec(inst, p, hm_memo) * 0.5", "for hm_k, hm_v in hm_memo.items():",
                     "    h = h + hm_v * 0.05", "h = h * (1.0 / len(hm_memo))"]
        main[at + 1:at + 1] = ["    " + x for x in lines]

    def tree_fn(self) -> str:
        """The recursion over the instance tree, ``rec(node, p)`` -> T; and maybe ``visit(node, p, outs)``."""
        self.feat("recursion")
        sc = Scope({"node": "I"}, node="node", ret="T")
        del sc.vars["node"]
        conc = self.ch.coin(50)
        self.stored = self.ch.coin(35)  # every node stores `node.st` before any return; parents read it back
        if self.stored:
            self.feat("node attribute stored and read back")
        if self.kind == "tree":
            leaf_sc = sc.copy()
            leaf = ["    if node.is_leaf:", f"        h = p.emb[node.word % 7]"]
            leaf_sc.vars["h"] = "T"
            leaf += self.store("        ", leaf_sc)
            leaf += ["        " + s for s in self.body(leaf_sc, 2, self.ch.int(0, 2))] if self.ch.coin(50) else []
            leaf.append(f"        return {self.tensor(leaf_sc)}")
            if conc:
                self.feat("concurrent calls")
                calls = ["    l, r = ab.concurrent(rec(node.left, p), rec(node.right, p))"]
            else:
                calls = ["    l = rec(node.left, p)", "    r = rec(node.right, p)"]
            sc.vars["l"] = sc.vars["r"] = "T"
            if self.stored:
                calls.append(f"    st = {self.ch.pick(['node.left.st', 'node.right.st', '(node.left.st + node.right.st)'])}")
        else:
            leaf = ["    if len(node.children) == 0:", *self.store("        ", sc.copy()),
                    f"        return p.emb[node.word % 7]"]
            comp = self.ch.coin(50)
            calls = ["    hs = [rec(c, p) for c in node.children]"] if comp else \
                ["    hs = []", "    for c in node.children:", "        hs.append(rec(c, p))"]
            sc.vars["hs"] = "L"
            sc.vars["l"] = "T"
            calls.append("    l = torch.stack(hs).sum(0)")
            self.feat("comprehension" if comp else "list append")
            if self.stored:
                calls.append(f"    st = {self.ch.pick(['sum([c.st for c in node.children])', 'node.children[0].st'])}")
        if self.stored:
            sc.vars["st"] = "T"
            calls += self.store("    ", sc)
        body = ["    " + s for s in self.body(sc, 1, self.ch.int(1, 3))]
        lines = ["@ab.function", "def rec(node, p):", *leaf, *calls, *body, f"    return {self.tensor(sc)}"]
        self.helpers.append("\n".join(lines))
        if self.ch.coin(40):
            self.visit_fn()
        return "rec"

    def store(self, indent: str, sc: Scope) -> list[str]:
        """``node.st = <tensor>`` in a recursion that stores on its nodes (``self.stored``), else nothing."""
        return [f"{indent}node.st = {self.tensor(sc)}"] if self.stored else []

    def visit_fn(self) -> None:
        """``visit(node, p, outs)``: appends a tensor per node to the list it is given (a callee changes it)."""
        self.helpers_names.add("visit")
        kids = "[node.left, node.right] if not node.is_leaf else []" if self.kind == "tree" else "node.children"
        lines = ["@ab.function", "def visit(node, p, outs):", f"    outs.append(torch.tanh(p.emb[node.word % 7] @ p.W))",
                 f"    for c in {kids}:", "        visit(c, p, outs)"]
        self.helpers.append("\n".join(lines))

    def program(self) -> FuzzProgram:
        ch = self.ch
        self.kind = ch.pick(INSTANCE_KINDS)
        dtype = ch.pick(["float32", "float64"])
        self.result_types = [ty for ty in ("I", "L", "D", "O", "F", "P", "S", "IL") if ch.coin(25)]
        for _ in range(ch.int(0, 2)):
            self.cell_fn()
        sc = Scope({"inst": "I"}, ret="main")
        del sc.vars["inst"]
        prologue: list[str] = []
        if self.kind in ("seq", "doc"):
            sc.vars["h"] = "T"
            prologue = ["h = p.h0"]
            tokens = "inst" if self.kind == "seq" else "inst.tokens"
            if self.kind == "doc":
                sc.vars["toks"] = "IL"
                prologue.append(f"toks = {self.ch.pick(['inst.tokens', 'list(inst.tokens)'])}")
            if ch.coin(50):
                self.feat("for over instance")
                step = self.tensor(Scope({"h": "T", "x": "T"}))
                prologue += [f"for tok in {tokens}:", "    x = p.emb[tok]", f"    h = {step.replace('p.h0', 'x')}"]
        else:
            self.tree_fn()
            sc.vars["h"] = "T"
            sc.node = "inst"
            prologue = ["h = rec(inst, p)"]
            if self.stored:
                sc.vars["st"] = "T"
                prologue.append("st = inst.st")
            if "visit" in self.helpers_names:
                sc.vars["outs"] = "L"
                prologue += ["outs = [h]", "visit(inst, p, outs)"]
        self.entry = True
        main = self.function("def main(inst, p):", sc, prologue, [], self.final_result)
        self.entry = False
        options = {name: not ch.coin(15) for name in
                   ("coarsening", "hoisting", "concurrency", "phases", "stages", "ghosts", "fibers", "horizontal_fusion")}
        sizes = tuple(sorted({ch.int(1, 12), ch.int(1, 40)}))
        self.rejected()
        self.rejected_in_entry(main, len(prologue))
        self.memo_in_entry(main, len(prologue))
        head = ["import math", "", "import torch", "import torch.nn.functional as F", "", "import acrobat as ab", "",
                "", "def clip(k):", "    return min(max(k, 0), 3)", ""]
        src = "\n".join(head + ["\n" + h + "\n" for h in self.helpers] + ["", "@ab.program", *main, ""])
        return FuzzProgram(src, self.kind, dtype, options, sizes, self.features)


def generate(ch: Chooser, max_stmts: int = 6, max_depth: int = 3) -> FuzzProgram:
    """One random program from ``ch``'s decisions (see the module docstring): bodies of at most ``max_stmts``
    statements, expressions nested at most ``max_depth`` deep."""
    return Gen(ch, max_stmts, max_depth).program()
