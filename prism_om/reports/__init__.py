"""What the command line, the inspector and the MCP server report alike, written once.

Below all three surfaces (``tests/test_layers.py``), so none of them imports another:

- ``session_list``: one row per session from the store's kept summaries.
- ``entry_text``: a wire entry's text, its tool calls written out.
- ``thresholds``: the transcript's tokens beside the memory thresholds (``status``).
- ``flush_report``: a flush's outcome as JSON.
- ``http_security``: the DNS-rebinding check of a server on a loopback port.
"""
