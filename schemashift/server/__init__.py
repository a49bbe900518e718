"""The OpenEnv server: SchemaShift episodes over WebSocket sessions, HTTP and MCP.

This package is the only one that imports `openenv`; nothing below it (`env`, `policies`,
`rollout`) knows it exists. `schemashift.server.app:app` is the ASGI app, `build_app()` builds
one with other limits, and `schemashift serve` runs it.
"""
