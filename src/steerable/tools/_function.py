"""``@tool``: turn a typed Python function into a tool.

The JSON schema comes from the type hints (through pydantic), the description from the
docstring's first paragraph, and each parameter's description from its ``Args:`` entry. A
parameter annotated ``ToolContext`` receives the running call's context and is hidden from the
model. Sync functions run in a worker thread so they never block the loop.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, get_args, get_type_hints, overload

from steerable._threads import run_in_daemon_thread
from steerable.errors import ConfigurationError, ToolArgumentsError
from steerable.tools._base import BaseTool, ToolContext

if TYPE_CHECKING:
    import pydantic

__all__ = ["FunctionTool", "tool"]



@functools.cache
def _docstring_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """The Args header, an argument's line and another section's header: compiled at the
    first ``@tool`` (~0.3 ms of the core's import otherwise)."""
    return (re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$"),
            re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$"),
            re.compile(r"^\s*(Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$"))


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the summary and per-argument descriptions."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    args_header, arg_line, section = _docstring_patterns()
    summary: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in lines:
        if args_header.match(line):
            in_args, current = True, None
            continue
        if section.match(line):
            in_args, current = False, None
            continue
        if in_args:
            m = arg_line.match(line)
            if m and (line.startswith("    ") or not line.startswith(" ")) and m.group(1):
                current = m.group(1)
                args[current] = m.group(2).strip()
            elif current and line.strip():
                args[current] = f"{args[current]} {line.strip()}".strip()
            continue
        if current is None and not in_args and not args:
            summary.append(line)
    return "\n".join(summary).strip(), args


def _strip_titles(schema: Any) -> Any:
    # pydantic adds a "title" to every property; models do not need them and they cost tokens.
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _describe_errors(tool_name: str, exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"'{where}': {err['msg']}")
    return f"Invalid arguments for tool '{tool_name}': " + "; ".join(parts)


class FunctionTool(BaseTool):
    """A tool backed by a Python function; made by ``@tool``."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        timeout: float | None = None,
        preview: Callable[[Mapping[str, Any]], str] | None = None,
        permission_key: str | None = None,
        permission_subjects: Callable[[Mapping[str, Any]], list[str]] | None = None,
        permission_family: str | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"@tool needs a function, got {type(fn).__name__}")
        if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[\w.-]{1,64}", name)):
            raise ConfigurationError(
                f"tool name must be 1-64 letters, digits, '_', '-' or '.', got {name!r}"
            )
        if not isinstance(read_only, bool):
            raise TypeError(f"read_only must be a bool, got {type(read_only).__name__}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.fn = fn
        self.name = name or fn.__name__
        summary, arg_docs = _parse_docstring(fn.__doc__)
        self.description = description if description is not None else summary
        self.read_only = read_only
        self.timeout = float(timeout) if timeout is not None else None
        self._preview = preview
        self._subjects = permission_subjects
        self._is_async = inspect.iscoroutinefunction(fn)
        self._context_param: str | None = None
        self._model = self._build_model(arg_docs)
        self._parameters = _strip_titles(self._model.model_json_schema())
        self._parameters.setdefault("properties", {})
        self.permission_key = permission_key or self._first_string_param()
        self.permission_family = permission_family
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def _build_model(self, arg_docs: dict[str, str]) -> type[pydantic.BaseModel]:
        import pydantic  # deferred: `import steerable` stays fast without tools

        try:
            # ToolContext is resolvable by name even when imported only inside a function
            # (string annotations under `from __future__ import annotations`).
            hints = get_type_hints(self.fn, localns={"ToolContext": ToolContext})
        except Exception as exc:  # a hint naming an undefined type
            raise ConfigurationError(f"cannot read the type hints of {self.name}: {exc}") from exc
        fields: dict[str, Any] = {}
        for param in inspect.signature(self.fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigurationError(
                    f"tool {self.name}: *args and **kwargs cannot be described to a model"
                )
            annotation = hints.get(param.name, Any)
            if annotation is ToolContext or ToolContext in get_args(annotation):
                self._context_param = param.name
                continue
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (
                annotation,
                pydantic.Field(default=default, description=arg_docs.get(param.name)),
            )
        config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True)
        return pydantic.create_model(f"{self.name}_arguments", __config__=config, **fields)

    def _first_string_param(self) -> str | None:
        for key, prop in self._parameters["properties"].items():
            if isinstance(prop, dict) and prop.get("type") == "string":
                return str(key)
        return None

    @property
    def parameters(self) -> Mapping[str, Any]:
        params: Mapping[str, Any] = self._parameters
        return params

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        import pydantic  # already imported by _build_model: a dict lookup

        try:
            model = self._model.model_validate(dict(arguments))
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(_describe_errors(self.name, exc)) from None
        # Keep the validated (coerced) values, not a JSON dump: a Path stays a Path.
        return {key: getattr(model, key) for key in type(model).model_fields}

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        kwargs = dict(arguments)
        if self._context_param is not None:
            kwargs[self._context_param] = ctx
        if self._is_async:
            return await self.fn(**kwargs)
        return await run_in_daemon_thread(self.fn, **kwargs)

    def permission_subjects(self, arguments: Mapping[str, Any]) -> list[str]:
        if self._subjects is not None:
            return list(self._subjects(arguments))
        return super().permission_subjects(arguments)

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        if self._preview is not None:
            return self._preview(arguments)
        return super().preview(arguments, ctx)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (handy in tests)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        kind = "read-only" if self.read_only else "mutating"
        return f"<tool {self.name} ({kind})>"


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
    description: str | None = None,
    preview: Callable[[Mapping[str, Any]], str] | None = None,
    permission_key: str | None = None,
    permission_subjects: Callable[[Mapping[str, Any]], list[str]] | None = None,
    permission_family: str | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
    description: str | None = None,
    preview: Callable[[Mapping[str, Any]], str] | None = None,
    permission_key: str | None = None,
    permission_subjects: Callable[[Mapping[str, Any]], list[str]] | None = None,
    permission_family: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a function: ``@tool`` or ``@tool(read_only=True, timeout=10)``.

    ``preview`` returns the dry-run text for a mutating tool; ``permission_key`` names the
    argument that permission rules match (default: the first string parameter), and
    ``permission_subjects`` can instead compute the normalised values they match.
    ``permission_family`` names another tool whose rules also hold for this one (``grep`` is
    in the ``read`` family: ``deny: read(secrets/**)`` holds for it too).
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            read_only=read_only,
            timeout=timeout,
            preview=preview,
            permission_key=permission_key,
            permission_subjects=permission_subjects,
            permission_family=permission_family,
        )

    if fn is not None:
        return wrap(fn)
    return wrap
