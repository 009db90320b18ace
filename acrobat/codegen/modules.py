"""Batchable forms of ``torch.nn`` modules that models call (``h, c = p.cell(x, (h, c))``, §5.1).

A model may call modules held in its parameters. A static block cannot
call the user's module object itself: PyTorch has no batching rule for
some of their operators (``aten::lstm_cell``, ``aten::gru_cell`` runs a
per-sample fallback), and a kernel traced with fake tensors must take the
module's parameters as inputs, not meet the real tensors. So the prologue
(once per run, where parameter values are known) turns every module a
block calls into a ``ModuleForm``:

- a *twin* of the module: a shallow copy sharing the user's parameter
  tensors (nothing is copied and the user's module is left unmodified), in
  which every recurrent cell (``nn.RNNCell``, ``nn.GRUCell``,
  ``nn.LSTMCell``) computes the same math with ``F.linear`` and pointwise
  operators, which ``vmap`` batches and Inductor fuses; containers
  (``nn.Sequential``) and user ``nn.Module`` subclasses get twins of their
  children, so their ``forward`` runs as written over batchable parts;
- its parameter and buffer tensors, as the leaves of a pytree node: a block
  receives the form unbatched, once per launch (parameter reuse, §5.1),
  and ``torch.func.functional_call`` applies the twin to whatever tensors
  the leaves are (the real weights in eager ``vmap``; graph inputs when a
  kernel is traced with fake tensors).

Modules with no batchable form are rejected with a ``CompileError`` that
names the model's call site and what to write instead. ``call_form`` also
covers the other callees a block may be handed: a method of a shared
tensor (``p.W.add(x)``) becomes a ``TensorMethod`` whose tensor is a leaf too.
"""

from __future__ import annotations

import copy
import types
from typing import Any, Callable

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch import nn
from torch.func import functional_call

from acrobat.analysis.kinds import forward_hooks
from acrobat.errors import CompileError
from acrobat.frontend.ir import Loc
from acrobat.runtime.plan import Form


# ---------------------------------------------------------------- the cells as F.linear + pointwise ops


def rnn_cell(cell: nn.RNNCell, x: torch.Tensor, hx: torch.Tensor | None = None) -> torch.Tensor:
    """``nn.RNNCell``'s step: ``act(x W_ih^T + b_ih + h W_hh^T + b_hh)``.

    Shapes: ``x`` (..., input_size), ``hx`` (..., hidden_size) or None (zeros);
    returns (..., hidden_size). ``act`` is tanh or relu (``cell.nonlinearity``).
    """
    h = _zero_state(cell, x) if hx is None else hx
    pre = F.linear(x, cell.weight_ih, cell.bias_ih) + F.linear(h, cell.weight_hh, cell.bias_hh)
    return torch.tanh(pre) if cell.nonlinearity == "tanh" else torch.relu(pre)


def gru_cell(cell: nn.GRUCell, x: torch.Tensor, hx: torch.Tensor | None = None) -> torch.Tensor:
    """``nn.GRUCell``'s step; gates in PyTorch's order: reset ``r``, update ``z``, new ``n``.

    ``r = σ(x_r + h_r)``, ``z = σ(x_z + h_z)``, ``n = tanh(x_n + r * h_n)``,
    ``h' = (1 - z) * n + z * h``, where ``x_*``/``h_*`` are the chunks of
    ``F.linear(x, W_ih, b_ih)`` / ``F.linear(h, W_hh, b_hh)``.
    Shapes: ``x`` (..., input_size), ``hx`` (..., hidden_size) or None (zeros);
    returns (..., hidden_size).
    """
    h = _zero_state(cell, x) if hx is None else hx
    x_r, x_z, x_n = F.linear(x, cell.weight_ih, cell.bias_ih).chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, cell.weight_hh, cell.bias_hh).chunk(3, -1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return n + z * (h - n)


def lstm_cell(cell: nn.LSTMCell, x: torch.Tensor,
              hx: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``nn.LSTMCell``'s step; gates in PyTorch's order: input ``i``, forget ``f``, cell ``g``, output ``o``.

    ``c' = σ(f) * c + σ(i) * tanh(g)``, ``h' = σ(o) * tanh(c')`` over the chunks
    of ``F.linear(x, W_ih, b_ih) + F.linear(h, W_hh, b_hh)``.
    Shapes: ``x`` (..., input_size), ``hx`` a pair (h, c) of (..., hidden_size)
    or None (zeros); returns the pair (h', c').
    """
    if hx is None:
        h = c = _zero_state(cell, x)
    else:
        h, c = hx
    gates = F.linear(x, cell.weight_ih, cell.bias_ih) + F.linear(h, cell.weight_hh, cell.bias_hh)
    i, f, g, o = gates.chunk(4, -1)
    c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c2), c2


def _zero_state(cell: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The zero state a cell starts from when called without one: (..., hidden_size) like ``x``."""
    return x.new_zeros((*x.shape[:-1], cell.hidden_size))


#: Modules whose own forward has no batching rule: the step that replaces it in the twin.
CELL_FORMS: dict[type, Callable[..., Any]] = {nn.RNNCell: rnn_cell, nn.GRUCell: gru_cell, nn.LSTMCell: lstm_cell}

#: torch.nn modules whose own forward batches under ``vmap`` (per-instance operators only).
AS_WRITTEN: tuple[type, ...] = (
    nn.Linear, nn.Identity, nn.Embedding, nn.LayerNorm, nn.RMSNorm, nn.Flatten, nn.Unflatten,
    nn.Sequential, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout,
    *(c for c in vars(nn.modules.activation).values()
      if isinstance(c, type) and c.__module__ == nn.modules.activation.__name__ and c is not nn.MultiheadAttention),
)

#: What to write instead, for torch.nn modules with no batchable form.
_INSTEAD: dict[type, str] = {
    cls: f"call it on a stacked list of the sequence's rows (torch.stack(xs), its .unsqueeze(1), or emb(tokens) of "
         f"an nn.Embedding), which acrobat runs as one packed call per batch, or loop over the tokens with "
         f"nn.{cls.__name__}Cell" for cls in (nn.LSTM, nn.GRU, nn.RNN)
}


def batchable(module: nn.Module, path: str, loc: Loc) -> nn.Module:
    """The twin of ``module`` whose forward batches under ``vmap`` (see the module docstring).

    ``path`` names the module in messages (``p.encoder.cell``); ``loc`` is the
    model's call site.

    Raises:
        CompileError: ``module`` or a submodule is a torch.nn module with no
            batchable form (``nn.LSTM``, batch norm, ...). Dropout in training
            mode draws per instance (blocks run under ``vmap(randomness="different")``).
    """
    # the class whose forward runs: a user subclass that keeps a torch.nn forward counts as that module
    cls = next(c for c in type(module).__mro__ if "forward" in vars(c))
    name = type(module).__name__
    if isinstance(module, nn.Embedding) and module.max_norm is not None:
        raise _error(loc, f"`{path}` is nn.Embedding with max_norm, which rewrites its weight in place when "
                          "called: renormalize the weight before the run and drop max_norm")
    if isinstance(module, nn.Embedding) and module.scale_grad_by_freq:
        raise _error(loc, f"`{path}` is nn.Embedding with scale_grad_by_freq, which scales each row's gradient by "
                          "how often its index occurs in the call; batched, that would count over the whole batch: "
                          "drop scale_grad_by_freq (or the dynamic tier runs the lookup per instance)")
    if cls.__module__.startswith("torch.") and cls not in CELL_FORMS and cls not in AS_WRITTEN \
            and cls is not nn.Module:  # a user module with no forward of its own: only its methods are called
        tensors = ", ".join(f"{path}.{n}" for n, _ in [*module.named_parameters(), *module.named_buffers()])
        instead = _INSTEAD.get(cls, "write its computation with torch.nn.functional operators over its tensors"
                               + (f" ({tensors})" if tensors else ""))
        raise _error(loc, f"`{path}` is nn.{name}, which has no batchable form in acrobat: {instead}")
    twin = copy.copy(module)  # shares the parameter tensors; the dicts below are the twin's own
    twin._parameters = dict(module._parameters)
    twin._buffers = dict(module._buffers)
    twin._modules = {k: None if child is None else batchable(child, _child_path(path, k), loc)
                     for k, child in module._modules.items()}
    form = CELL_FORMS.get(cls)
    if form is not None:
        twin.forward = types.MethodType(form, twin)  # type: ignore[method-assign]
    return twin


def _child_path(path: str, name: str) -> str:
    """How the model names a submodule: ``p.seq[1]`` in containers, ``p.encoder.lin`` otherwise."""
    return f"{path}[{name}]" if name.isdigit() else f"{path}.{name}"


def _error(loc: Loc, message: str) -> CompileError:
    return CompileError(message, loc.file, loc.line, loc.col)


def _describe(module: nn.Module) -> tuple:
    """What a kernel traced through ``module`` depends on besides tensor shapes: per submodule
    its class, settings (``extra_repr``) and mode."""
    return tuple((name, type(m).__qualname__, m.extra_repr(), m.training) for name, m in module.named_modules())


class _Method(nn.Module):
    """A module whose forward is method ``name`` of ``inner`` (``functional_call`` calls forward only)."""

    def __init__(self, inner: nn.Module, name: str):
        super().__init__()
        self.inner = inner
        self.name = name

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.inner, self.name)(*args, **kwargs)


class ModuleForm(Form):
    """A module as a block calls it: its batchable twin applied to the leaves ``tensors``.

    ``form(*args)`` equals calling the user's module on the same per-instance
    arguments. A pytree node: ``tensors`` (parameters, then buffers, by
    ``names``) are its leaves, so ``vmap`` passes them unbatched and a traced
    kernel takes them as inputs; ``key`` describes everything else the
    computation depends on (used in kernel signatures).
    """

    def __init__(self, root: nn.Module, names: tuple[str, ...], tensors: tuple[torch.Tensor, ...], key: tuple):
        self.root = root
        self.names = names
        self.tensors = tensors
        self.key = key

    @staticmethod
    def of(module: nn.Module, method: str, path: str, loc: Loc) -> "ModuleForm":
        """The form of ``module.<method>`` (``"forward"`` for a call of the module itself).

        Raises:
            CompileError: see ``batchable``.
        """
        twin = batchable(module, path, loc)
        root = twin if method == "forward" else _Method(twin, method)
        named = [*root.named_parameters(), *root.named_buffers()]
        root.acrobat_own = tuple(t for _, t in named)  # the tensors the twin holds (the user's)
        return ModuleForm(root, tuple(n for n, _ in named), tuple(t for _, t in named),
                          (type(module).__qualname__, method, _describe(twin)))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if all(a is b for a, b in zip(self.tensors, self.root.acrobat_own)):
            return self.root(*args, **kwargs)  # its own tensors (eager vmap): no reparametrization (~50 µs a call)
        return functional_call(self.root, dict(zip(self.names, self.tensors)), args, kwargs)

    def __repr__(self) -> str:
        return f"ModuleForm({self.key[0]}.{self.key[1]}, {len(self.tensors)} tensors)"


class TensorMethod(Form):
    """A method of a shared tensor called with per-instance arguments (``p.W.add(x)``); the tensor is the leaf."""

    def __init__(self, tensor: torch.Tensor, name: str):
        self.tensor = tensor
        self.name = name
        self.key = name  # what the computation depends on besides the tensor

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.tensor, self.name)(*args, **kwargs)


pytree.register_pytree_node(
    ModuleForm, lambda f: (list(f.tensors), (f.root, f.names, f.key)),
    lambda leaves, ctx: ModuleForm(ctx[0], ctx[1], tuple(leaves), ctx[2]),
    serialized_type_name="acrobat.ModuleForm")
pytree.register_pytree_node(
    TensorMethod, lambda m: ([m.tensor], m.name), lambda leaves, name: TensorMethod(leaves[0], name),
    serialized_type_name="acrobat.TensorMethod")


#: Modules that act on each row of their input alone (the last dimensions): applied to a stacked list
#: (``acrobat.analysis.ragged``), row by row is the same as the whole.
ROWWISE: tuple[type, ...] = (
    nn.Linear, nn.Identity, nn.Embedding, nn.LayerNorm, nn.RMSNorm, nn.Sequential, nn.Dropout,
    *(c for c in vars(nn.modules.activation).values()
      if isinstance(c, type) and c.__module__ == nn.modules.activation.__name__
      and c not in (nn.MultiheadAttention, nn.Softmax, nn.LogSoftmax, nn.Softmin, nn.Softmax2d, nn.GLU)),
)


def call_form(receiver: Any, method: str | None, path: str, file: str, line: int, col: int,
              rowwise: bool = False) -> Any:
    """What a block calls for ``receiver.<method>(...)`` (or ``receiver(...)`` when ``method`` is None).

    Called by the generated prologue once per run, with the run's shared
    value ``receiver`` (named ``path`` in the model, called at file:line:col):

    - a module, or a module's attribute that is a module: its ``ModuleForm``;
    - a module's own method (``p.encode(x)``): a ``ModuleForm`` of that method;
    - a method of a tensor: a ``TensorMethod``;
    - anything else: the callable itself, as before (it must batch as written).

    With ``rowwise`` (the call is applied to the rows of a stacked list) the
    callee must be a module that acts row by row (``ROWWISE``, and containers
    of those).

    Raises:
        CompileError: a module with no batchable form (see ``batchable``), or
            one not known to act row by row where ``rowwise``.
    """
    loc = Loc(file, line, col)
    if rowwise:
        callee = receiver if method is None else getattr(receiver, method, None)
        odd = [m for m in callee.modules() if not isinstance(m, ROWWISE)] if isinstance(callee, nn.Module) else [callee]
        if odd:
            what = type(odd[0]).__name__
            raise _error(loc, f"`{path}{'.' + method if method else ''}` is applied to a stacked list (its length "
                              f"differs per instance), but {what} is not known to act on each row alone "
                              "(nn.Linear, activations, LayerNorm, Embedding, Dropout and nn.Sequential of them "
                              "are): loop over the list and call it on each item")
    if isinstance(receiver, nn.Module):
        hooked = forward_hooks(receiver)
        if hooked is not None:
            raise _error(loc, f"`{path}` has forward hooks ({hooked}), which the batched form of a module does not "
                              "run: remove them for the static tier (the dynamic tier runs the module with them)")
        if method is None:
            return ModuleForm.of(receiver, "forward", path, loc)
        attr = getattr(receiver, method)
        if isinstance(attr, nn.Module):
            return ModuleForm.of(attr, "forward", f"{path}.{method}", loc)
        if isinstance(attr, types.MethodType) and attr.__self__ is receiver:
            return ModuleForm.of(receiver, method, path, loc)
        return attr
    if isinstance(receiver, torch.Tensor) and method is not None:
        return TensorMethod(receiver, method)
    return receiver if method is None else getattr(receiver, method)
