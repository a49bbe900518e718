"""The MCP face: SchemaShift episodes for any MCP-capable agent, one environment per MCP session.

OpenEnv's own `/mcp` route speaks JSON-RPC without the MCP handshake, so standard MCP clients
cannot use it; this is a FastMCP server (streamable HTTP) mounted in the same app. Its tools:

- `reset(scenario, seed, ruleset, policy, arm)` starts an episode and returns the first
  observation (`policy`: the name a recording server records the episode under; `arm`: drift,
  the default, or control, the task with its drift plan off);
- one tool per endpoint in the documentation the ruleset shows the agent, named
  `<tool>__<endpoint>`, with a JSON schema built from that documentation (the same function
  definitions as the `tools` harness's, `schemashift.policies.llm.functions`) (legacy: the live
  schema; a ruleset whose documentation goes stale lists the stale endpoints). A call of an
  endpoint name that is no longer valid still reaches the simulated API, so it fails with that
  API's own error;
- `inspect_schema`, `report_drift`, and `complete_task`, whose result carries the grade.

Every call is one environment step, exactly as the action it stands for.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import mcp.types as mt
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_context
from fastmcp.server.providers import Provider
from fastmcp.tools import Tool
from fastmcp.tools.base import ToolResult

from schemashift.env import DEFAULT_ARM, Environment, EpisodeStateError, InvalidAction, check_arm, get_ruleset
from schemashift.policies.llm.functions import ENDPOINT_SEPARATOR, endpoint_schema, function_name
from schemashift.server.environment import DEFAULT_RULESET, request_error
from schemashift.server.recording import DEFAULT_POLICY, EpisodeStore, ServedEpisode, check_name

#: the harness MCP episodes are recorded under: the agent acts through MCP tool calls
MCP_HARNESS = "mcp"


class McpEpisode:
    """The environment of one MCP session. `idle_scope`, when given, is the scope the session
    runs in: every reset or step applied moves its deadline `idle_timeout_s` ahead, so the
    session ends when it has played nothing for that long."""

    def __init__(
        self,
        idle_scope: anyio.CancelScope | None = None,
        idle_timeout_s: float | None = None,
        store: EpisodeStore | None = None,
    ) -> None:
        self.envs: dict[str, Environment] = {}
        self.env: Environment | None = None
        self.docs: Any = None
        self.idle_scope = idle_scope
        self.idle_timeout_s = idle_timeout_s
        self.store = store
        self.recorded: ServedEpisode | None = None
        self.played()

    def played(self) -> None:
        if self.idle_scope is not None and self.idle_timeout_s is not None:
            self.idle_scope.deadline = anyio.current_time() + self.idle_timeout_s

    def close(self) -> None:
        self.end_recorded()
        self.envs.clear()
        self.env = None
        self.docs = None

    def reset(
        self,
        scenario: str | None,
        seed: int,
        ruleset: str,
        policy: str = DEFAULT_POLICY,
        arm: str = DEFAULT_ARM,
    ) -> dict[str, Any]:
        """Start an episode; a refused one (a ValueError, an unknown ruleset or scenario) leaves
        the session's episode as it was."""
        policy = check_name("policy", policy)
        arm = check_arm(arm)
        env = self.envs.get(ruleset)
        if env is None:
            env = self.envs[ruleset] = Environment(get_ruleset(ruleset))
        view = env.reset(env.ruleset.scenario_ids()[0] if scenario is None else scenario, seed, arm=arm)
        self.end_recorded()
        self.env = env
        if self.store is not None:
            self.recorded = self.store.begin(env, policy, MCP_HARNESS)
        self.played()
        return view

    def end_recorded(self) -> None:
        """Record the episode in play, if any, before it is replaced or dropped."""
        if self.recorded is not None:
            self.recorded.end()
            self.recorded = None

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        if self.env is None:
            raise EpisodeStateError("Call the reset tool before any other tool.")
        result = self.env.step(action)
        if self.recorded is not None:
            self.recorded.stepped()
        self.played()
        return result

    def documentation(self) -> dict[str, dict[str, Any]]:
        """The endpoint documentation the ruleset currently shows the agent."""
        env = self.env
        if env is None or env.episode is None:
            return {}
        return env.ruleset.documentation(env.episode)


class Sessions:
    """The episodes of live MCP sessions: each session gets one when it starts (as the low-level
    server's per-session lifespan context) and loses it when it ends, by client DELETE or after
    `idle_timeout_s` seconds without a reset or step (None: never). The idle deadline is the
    session's own, not the MCP SDK's, which counts an open GET stream or any request in flight
    as activity: a client holding its notification stream open, or polling `ping` or
    `tools/list`, would keep its slot for ever. The number of sessions is the session
    manager's (`bound_session_manager`)."""

    def __init__(self, idle_timeout_s: float | None = None, store: EpisodeStore | None = None) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.store = store
        self._live: set[McpEpisode] = set()

    @contextlib.asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[McpEpisode]:
        # The session's message loop runs inside this scope: at its deadline the loop is
        # cancelled, the SDK's `run` returns as after a client DELETE and its session manager
        # discards the session (the transport is terminated, open streams end, the id is 404).
        with anyio.CancelScope() as idle_scope:
            episode = McpEpisode(idle_scope, self.idle_timeout_s, self.store)
            self._live.add(episode)
            try:
                yield episode
            finally:
                self._live.discard(episode)
                episode.close()

    def __len__(self) -> int:
        return len(self._live)


def current_episode() -> McpEpisode | None:
    """The episode of the MCP session the current request belongs to."""
    try:
        request = get_context().request_context
    except RuntimeError:
        return None
    episode = request.lifespan_context if request is not None else None
    return episode if isinstance(episode, McpEpisode) else None


def bound_session_manager(app: Any, max_sessions: int) -> None:
    """Bound the running MCP app's session manager by the server's settings instead of the MCP
    SDK's defaults (10,000 sessions; 30 minutes with no request in flight, turned off here:
    idleness is `Sessions`'). FastMCP builds the manager when the app's lifespan starts, with no
    way to pass them, so this is called inside that lifespan."""
    for route in app.routes:
        manager = getattr(getattr(route, "endpoint", None), "session_manager", None)
        if manager is not None:
            manager.max_sessions = max_sessions
            manager.session_idle_timeout = None
            return
    raise RuntimeError("the MCP app has no streamable HTTP session manager to bound")


class EndpointTool(Tool):
    """One endpoint of a simulated API; a call is a `call_tool` step of the session's episode."""

    api: str
    endpoint: str

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        episode = current_episode()
        if episode is None:
            raise ToolError("EpisodeStateError: Call the reset tool before any other tool.")
        action = {
            "type": "call_tool",
            "tool_call": {"tool": self.api, "endpoint": self.endpoint, "params": arguments},
        }
        result = await step_and_notify(episode, action)
        response = result["response"]
        if response is not None and not response.get("ok", True):
            raise ToolError(f"{self.api}.{self.endpoint} failed: {json.dumps(response, default=str)}")
        return ToolResult(structured_content=result)


class EndpointTools(Provider):
    """Lists the endpoint tools of the calling session's current documentation."""

    async def _list_tools(self) -> Sequence[Tool]:
        episode = current_episode()
        if episode is None:
            return []
        tools = []
        for api, endpoints in episode.documentation().items():
            for endpoint, doc in endpoints.items():
                tools.append(self._tool(api, endpoint, doc))
        return tools

    async def _get_tool(self, name: str, version: Any = None) -> Tool | None:
        api, sep, endpoint = name.partition(ENDPOINT_SEPARATOR)
        episode = current_episode()
        if not sep or not endpoint or episode is None or episode.env is None:
            return None
        if api not in episode.env.ruleset.tool_names:
            return None
        doc = episode.documentation().get(api, {}).get(endpoint, {})
        return self._tool(api, endpoint, doc)

    def _tool(self, api: str, endpoint: str, doc: dict[str, Any]) -> EndpointTool:
        return EndpointTool(
            name=function_name(api, endpoint),
            description=f"Call {api}.{endpoint} (one environment step).",
            parameters=endpoint_schema(doc),
            api=api,
            endpoint=endpoint,
        )


def play(episode: McpEpisode, action: dict[str, Any]) -> dict[str, Any]:
    """One step; returns what a tool call answers (plus the grade once the episode is done)."""
    try:
        view, breakdown = episode.step(action)
    except (InvalidAction, EpisodeStateError, ValueError) as exc:
        raise ToolError(str(request_error(exc))) from None
    result = {
        "step": view.get("step"),
        "response": episode.env.episode.history[-1]["response"],
        "feedback": view.get("feedback"),
        "reward": breakdown,
        "done": view["done"],
    }
    if view["done"]:
        env = episode.env
        result["grade"] = env.ruleset.summary(env.episode)
    return result


async def step_and_notify(episode: McpEpisode, action: dict[str, Any]) -> dict[str, Any]:
    """`play`, then tell the client when the documented endpoints (so the tool list) changed."""
    result = play(episode, action)
    docs = episode.documentation()
    if docs is not episode.docs:
        episode.docs = docs
        await get_context().send_notification(mt.ToolListChangedNotification())
    return result


def build_mcp(idle_timeout_s: float | None = None, store: EpisodeStore | None = None) -> FastMCP:
    """The MCP server; its episodes live as long as their MCP sessions, which end after
    `idle_timeout_s` seconds without a reset or step (`Sessions`), and are recorded in `store`
    (`serve --record`) when given."""
    sessions = Sessions(idle_timeout_s, store)
    server = FastMCP("schemashift", providers=[EndpointTools()])
    # The low-level server enters its lifespan once per session: the session's episode.
    server._mcp_server.lifespan = sessions.lifespan
    server.sessions = sessions  # type: ignore[attr-defined]

    def episode_of(ctx: Context) -> McpEpisode:
        episode = current_episode()
        if episode is None or episode.env is None:
            raise ToolError("EpisodeStateError: Call the reset tool before any other tool.")
        return episode

    @server.tool
    async def reset(
        ctx: Context,
        scenario: str | None = None,
        seed: int = 0,
        ruleset: str = DEFAULT_RULESET,
        policy: str = DEFAULT_POLICY,
        arm: str = DEFAULT_ARM,
    ) -> dict:
        """Start an episode of `scenario` (default: the ruleset's first) with `seed` under `ruleset`;
        `policy` names you (your agent or model) in the records of a recording server; `arm` is
        `drift` (the default) or `control` (the same task with no schema drift).

        Returns the first observation: the task, its success criteria and the API documentation.
        """
        episode = current_episode()
        if episode is None:
            raise ToolError("SessionError: this request belongs to no MCP session")
        try:
            view = episode.reset(scenario, seed, ruleset, policy, arm)
        except (KeyError, ValueError) as exc:
            raise ToolError(str(request_error(exc))) from None
        episode.docs = episode.documentation()
        await ctx.send_notification(mt.ToolListChangedNotification())
        return view

    @server.tool
    async def inspect_schema(ctx: Context, tool: str) -> dict:
        """Read the live schema of an API (`mail`, `calendar`, `crm`), as it is now."""
        episode = episode_of(ctx)
        return await step_and_notify(episode, {"type": "inspect_schema", "inspect": {"tool": tool}})

    @server.tool
    async def report_drift(ctx: Context, tool: str, drift_kind: str, description: str) -> dict:
        """Report a schema drift you noticed on `tool`, naming its kind and what changed."""
        episode = episode_of(ctx)
        action = {
            "type": "report_drift",
            "report": {"tool": tool, "drift_kind": drift_kind, "description": description},
        }
        return await step_and_notify(episode, action)

    @server.tool
    async def complete_task(ctx: Context, summary: str) -> dict:
        """Declare the task finished; the result carries the episode's grade."""
        episode = episode_of(ctx)
        return await step_and_notify(episode, {"type": "complete_task", "complete": {"summary": summary}})

    return server
