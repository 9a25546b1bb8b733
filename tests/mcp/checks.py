"""What every client script in tests/mcp/ checks with: one expectation a line, and a result's
text. A script imports it from its own directory (Python puts the script's directory first on
the path)."""


def expect(condition, what):
    """Exit non-zero saying `what` failed, or print that it held."""
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}")


def text_of(result):
    """The text blocks of a call's result, joined."""
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")
