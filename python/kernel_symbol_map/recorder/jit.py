"""Python code a JIT compiles, which the interpreter never runs: noted as run, by the test that ran it.

Per-test coverage sees the lines the interpreter executes. A function that a
JIT compiles is not executed by it: its compiled form is. So the recorder
watches the JITs themselves, and notes a function's code (and the code it
compiled in) as run by the scope that ran it:

* ``torch.compile`` (Dynamo): each frame Dynamo compiles is noted with every
  code object it traced into the graph (inlined callees included), read from
  Dynamo's own output; a test that runs the compiled frame again shows it to
  coverage by the frame's first line, and gets them all
  (:class:`.pycoverage.PythonCoverage` joins the two at the end);
* numba: a call of a ``@njit``/``@jit`` dispatcher, or a launch of a
  ``@cuda.jit`` kernel, notes its function and every dispatcher its code
  names (what numba compiles into it);
* Triton: a launch of a ``JITFunction`` (through an autotuner or heuristics
  too) notes its function and every ``JITFunction`` its code names, and the
  function as the one the launched kernel is named after (``launched``);
* ``torch.utils.cpp_extension.load``: the source files it compiles at run
  time (``built``), which ``select`` decides by source;
* any decorator that compiles a function from its source text
  (``jit-decorators`` in ``[tool.kernel-symbol-map]``, or the
  ``KERNEL_SYMBOL_MAP_JIT_DECORATORS`` variable: ``module:name`` entries): a
  call, launch (``f[grid]``) or ``run`` of what it returned notes the function,
  and names it as Triton's launches do.

Each is watched from the moment its module is imported (an import hook), so a
JIT first imported inside a test is watched before it compiles anything. What
cannot be watched is said (``problem``), never guessed: the measurement then
holds no Python evidence, and ``select`` runs what it cannot clear.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from . import imports

DECORATORS_VARIABLE = "KERNEL_SYMBOL_MAP_JIT_DECORATORS"  # "module:name,module:name": source-text JITs

Note = Callable[[types.CodeType], None]  # this code ran, in the current scope
Compiled = Callable[[types.CodeType, Sequence[types.CodeType]], None]  # Dynamo compiled a frame of this code
Launched = Callable[[types.FunctionType], None]  # a kernel named after this function ran, in the current scope
Built = Callable[[Sequence[str]], None]  # these source files were compiled at run time, in the current scope


class JitWatch:
    """This process's watch over the JITs it imports: what they run is passed to ``note`` and ``compiled``."""

    def __init__(self, note: Note, compiled: Compiled, decorators: Sequence[str] = (),
                 launched: Launched | None = None, built: Built | None = None) -> None:
        self.note, self.compiled = note, compiled
        self.launched: Launched = launched or (lambda _function: None)
        self.built: Built = built or (lambda _sources: None)
        self.problem = ""
        self.names: dict[str, list[str]] = {}  # module -> its source-text JIT decorators
        for entry in decorators:
            module, _, name = entry.partition(":")
            if not module or not name:
                self.problem = self.problem or f"jit-decorators entry {entry!r} is not 'module:name'"
                continue
            self.names.setdefault(module, []).append(name)
        self.hooks: dict[str, Callable[[types.ModuleType], None]] = {
            **{module: self._decorators for module in self.names},
            "torch._dynamo.convert_frame": self._dynamo,
            "numba.core.dispatcher": self._numba,
            "numba.np.ufunc.dufunc": self._numba_ufuncs,
            "numba.cuda.dispatcher": self._numba_cuda,
            "triton.runtime.jit": self._triton,
            "torch.utils.cpp_extension": self._cpp_extension,
        }
        self.finder: imports.AfterImport | None = None

    def start(self) -> None:
        """Watch modules imported from now on, and those already imported."""
        self.finder = imports.watch(self.hooks, self._failed)

    def _failed(self, module: str, error: BaseException) -> None:
        self.problem = self.problem or f"{module} could not be watched ({type(error).__name__}: {error}): code it " \
                                       "compiles may have run unseen"

    # -- each JIT ---------------------------------------------------------------------------------

    def _dynamo(self, module: types.ModuleType) -> None:
        def hook(code: types.CodeType, _new: types.CodeType) -> None:
            traced = _traced_code(sys._getframe(1))
            if traced is None:
                self.problem = self.problem or ("torch.compile compiled a frame whose traced code this recorder "
                                                "cannot read (a torch it does not know): its callees ran unseen")
                traced = []
            self.compiled(code, [code, *traced])
            return None

        module.register_bytecode_hook(hook)

    def _numba(self, module: types.ModuleType) -> None:
        dispatcher = module.Dispatcher
        # a dispatcher passed in is compiled in too
        self._noting(dispatcher, "__call__", lambda v: _numba_function(v) if isinstance(v, dispatcher) else None,
                     passed=True, kernel=False)

    def _numba_ufuncs(self, module: types.ModuleType) -> None:
        self._noting(module.DUFunc, "__call__", _numba_function, passed=False, kernel=False)

    def _numba_cuda(self, module: types.ModuleType) -> None:
        dispatcher = module.CUDADispatcher
        # a launch (kernel[grid](...)) calls it; its device functions are dispatchers too, compiled in
        self._noting(dispatcher, "call", lambda v: v.py_func if isinstance(v, dispatcher) else None, passed=False,
                     kernel=False)

    def _triton(self, module: types.ModuleType) -> None:
        jit_function = module.JITFunction
        # a JITFunction passed as a constexpr is compiled in too; the kernel is named after the function it runs
        self._noting(jit_function, "run", lambda v: v.fn if isinstance(v, jit_function) else None, passed=True,
                     kernel=True)

    def _cpp_extension(self, module: types.ModuleType) -> None:
        """``torch.utils.cpp_extension.load``: the source files it compiles at run time, by the scope that asked."""
        load, built = module.load, self.built

        def loading(name: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(sources, (str, os.PathLike)):
                built([sources])
            elif isinstance(sources, Iterable):
                sources = list(sources)  # read once: a generator is load's to read too
                built([s for s in sources if isinstance(s, (str, os.PathLike))])
            return load(name, sources, *args, **kwargs)

        module.load = loading

    def _noting(self, cls: type, name: str, function_of: Callable[[Any], Any], passed: bool, kernel: bool) -> None:
        """``cls.name`` notes, each time it runs, the code of the function ``function_of`` finds for the object it
        runs on (and, when ``passed``, for each argument), and of what is compiled into that (:func:`reached`);
        with ``kernel``, the object's function as the one a launched kernel is named after."""
        original = getattr(cls, name)
        codes = _Reach(function_of)
        note, launched = self.note, self.launched

        def noting(this: Any, *args: Any, **kwargs: Any) -> Any:
            for value in (this, *args, *kwargs.values()) if passed else (this,):
                if function_of(value) is not None:
                    for code in codes(value):
                        note(code)
            if kernel:
                launched(function_of(this))
            return original(this, *args, **kwargs)

        setattr(cls, name, noting)

    def _decorators(self, module: types.ModuleType) -> None:
        for name in self.names[module.__name__]:
            original = getattr(module, name, None)
            if original is None:
                self.problem = self.problem or f"jit-decorators names {module.__name__}:{name}, which is not there"
            elif isinstance(original, type):
                _watch_class(original, self._source_ran)
            elif not getattr(original, "_kernel_symbol_map_noting", False):
                setattr(module, name, _noting_decorator(original, self._source_ran))

    def _source_ran(self, value: Any) -> None:
        """What a source-text JIT made for a function ran (called, launched or run): its code and what it names
        ran, and a kernel it launched is named after the function, as Triton names its kernels."""
        for code in _SOURCE_REACH(value):
            self.note(code)
        function = _source_function(value)
        if function is not None:
            self.launched(function)


def _numba_function(value: Any) -> Any:
    """The Python function numba compiles for ``value`` (a dispatcher, a ufunc, or a plain function it compiles
    in: ``register_jitable``, an overload's), or None."""
    if isinstance(value, types.FunctionType):
        return value
    dispatcher = getattr(value, "_dispatcher", value)  # a DUFunc's
    function = getattr(dispatcher, "py_func", None)
    return function if isinstance(function, types.FunctionType) else None


def _source_function(value: Any) -> Any:
    """The function a source-text JIT compiled for ``value`` (a result :func:`_noting_decorator` wrapped, or an
    instance of a watched class), or None."""
    if isinstance(value, _Noting):
        return object.__getattribute__(value, "_ksm")[2]
    watched = _WATCHED.get(id(value))
    return watched[1] if watched is not None and watched[0] is value else None


Ran = Callable[[Any], None]  # what a source-text JIT made ran: JitWatch._source_ran


def _noting_decorator(decorator: Callable[..., Any], ran: Ran) -> Callable[..., Any]:
    """``decorator``, whose result notes the function it compiled when it is called, launched (``f[grid]``) or
    run: ``@jit``, ``jit(f, options)`` and ``@jit(options)`` alike."""

    def decorate(*args: Any, **kwargs: Any) -> Any:
        made = decorator(*args, **kwargs)
        if args and isinstance(args[0], types.FunctionType):
            return _Noting(made, args[0], ran)
        if callable(made) and not args:  # a decorator factory's decorator: wrap it the same way
            return _noting_decorator(made, ran)
        return made

    decorate._kernel_symbol_map_noting = True  # type: ignore[attr-defined]
    decorate.__wrapped__ = decorator  # type: ignore[attr-defined]
    return decorate


class _Noting:
    """What a source-text JIT returned, noting its function's code (and that of the JIT'd functions it names,
    compiled in from their text) whenever it runs it; the rest is the original's."""

    def __init__(self, compiled: Any, function: types.FunctionType, ran: Ran) -> None:
        object.__setattr__(self, "_ksm", (compiled, ran, function))

    def _ran(self) -> None:
        object.__getattribute__(self, "_ksm")[1](self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _Noting._ran(self)
        return object.__getattribute__(self, "_ksm")[0](*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        launcher = object.__getattribute__(self, "_ksm")[0][key]

        def launch(*args: Any, **kwargs: Any) -> Any:
            _Noting._ran(self)
            return launcher(*args, **kwargs)

        return launch

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        compiled, ran, function = object.__getattribute__(self, "_ksm")
        bind = getattr(compiled, "__get__", None)
        return self if bind is None or instance is None else _Noting(bind(instance, owner), function, ran)

    def __getattr__(self, name: str) -> Any:
        found = getattr(object.__getattribute__(self, "_ksm")[0], name)
        if name != "run" or not callable(found):
            return found

        def run(*args: Any, **kwargs: Any) -> Any:
            _Noting._ran(self)
            return found(*args, **kwargs)

        return run

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_ksm")[0], name, value)


# A decorator that is a class stays itself (isinstance, subclasses): an instance made from a function is noted
# when it is called, launched or run. id(instance) -> (the instance, kept alive; its function).
_WATCHED: dict[int, tuple[Any, types.FunctionType]] = {}


def _watch_class(cls: type, ran: Ran) -> None:
    if cls.__dict__.get("_kernel_symbol_map_noting", False):
        return
    init = cls.__init__

    def noting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if args and isinstance(args[0], types.FunctionType):
            _WATCHED[id(self)] = (self, args[0])

    cls.__init__ = noting_init  # type: ignore[misc]
    for method in ("__call__", "__getitem__", "run"):
        original = next((k.__dict__[method] for k in cls.__mro__ if method in k.__dict__ and k is not object), None)
        if callable(original):  # its own or inherited: set on this class
            def noting(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                ran(self)
                return _original(self, *args, **kwargs)

            setattr(cls, method, noting)
    cls._kernel_symbol_map_noting = True  # type: ignore[attr-defined]


class _Reach:
    """:func:`reached`, found once per JIT'd object (it is called in loops)."""

    def __init__(self, function_of: Callable[[Any], Any]) -> None:
        self.function_of = function_of
        self.found: dict[int, tuple[Any, list[types.CodeType]]] = {}  # id -> (the object, kept alive; its codes)

    def __call__(self, value: Any) -> list[types.CodeType]:
        known = self.found.get(id(value))
        if known is None or known[0] is not value:
            known = self.found[id(value)] = (value, reached(value, self.function_of))
        return known[1]


def reached(value: Any, function_of: Callable[[Any], Any]) -> list[types.CodeType]:
    """The code of ``value``'s JIT'd function and of every JIT'd object its code names (globals, closure cells,
    attributes of modules it names), transitively, with the code objects nested in each: what the JIT compiles
    into it. ``function_of`` gives a value's function, or None for a value the JIT does not compile."""
    found: list[types.CodeType] = []
    seen: set[int] = set()
    todo = [function_of(value)]
    while todo:
        fn = todo.pop()
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType) or id(code) in seen:
            continue
        seen.add(id(code))
        found.extend(_nested(code))
        for named in _named(fn, code):
            function = function_of(named)
            if function is not None:
                todo.append(function)
    return found


_SOURCE_REACH = _Reach(_source_function)


def _nested(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested(const)


def _named(fn: Any, code: types.CodeType) -> Iterable[Any]:
    """The values the names in ``code`` (and its nested code) may mean: globals, closure cells, and a named
    module's attributes of those names."""
    names = {n for c in _nested(code) for n in c.co_names}
    namespace = getattr(fn, "__globals__", {})
    values = [namespace[n] for n in names if n in namespace]
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    modules = [v for v in values if isinstance(v, types.ModuleType)]
    seen = {id(m) for m in modules}
    while modules:  # pkg.sub.deep.f: each named module's attributes of those names, modules among them too
        found = [vars(m)[n] for m in modules for n in names if n in vars(m)]
        values.extend(found)
        modules = [v for v in found if isinstance(v, types.ModuleType) and id(v) not in seen]
        seen.update(id(m) for m in modules)
    return values


def _traced_code(frame: types.FrameType | None) -> list[types.CodeType] | None:
    """The code objects Dynamo traced into the frame it just compiled: its output graph's ``traced_code``, held
    by the function that calls the bytecode hooks; None when no caller holds one."""
    while frame is not None:
        output = getattr(frame.f_locals.get("tracer_output"), "output_graph", None) or frame.f_locals.get("output")
        traced = getattr(output, "traced_code", None)
        if isinstance(traced, list):
            return [c for c in traced if isinstance(c, types.CodeType)]
        frame = frame.f_back
    return None


def decorators_from_environment() -> list[str]:
    return [e.strip() for e in os.environ.get(DECORATORS_VARIABLE, "").split(",") if e.strip()]
