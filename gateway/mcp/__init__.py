"""The MCP front door (gateway.mcp.door): agents ask for approval and ask people through the
Model Context Protocol; the tools (gateway.mcp.tools) create ordinary requests."""
