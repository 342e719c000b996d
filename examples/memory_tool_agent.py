"""Run Claude with mdmem as its memory tool, under the SDK's tool runner.

    export ANTHROPIC_API_KEY=...
    python examples/memory_tool_agent.py --workspace . "Remember that tests run with make test"
    python examples/memory_tool_agent.py --workspace . "How do I run the tests here?"

Claude's memory reads and writes land in ``<workspace>/.PseudoClaude/memory``
(the project store) and ``~/.PseudoClaude/memory`` (the user store), as Markdown
notes with MEMORY.md kept up to date; ``mdmem list`` shows them afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    """Ask Claude one question with the memory tool; print its final answer."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("prompt", help="what to ask or tell Claude")
    parser.add_argument("--workspace", default=None, help="the repository (default: discovered)")
    parser.add_argument(
        "--user-dir", default=None, help="the user store (default: ~/.PseudoClaude/memory)"
    )
    parser.add_argument("--model", default=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5"))
    parser.add_argument("--max-tokens", type=int, default=2048)
    args = parser.parse_args(argv)
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print("Set ANTHROPIC_API_KEY first.", file=sys.stderr)
        return 2

    # Imported here, not at the top, so `--help` answers at once.
    import anthropic

    from mdmem.integrations.anthropic import INSTRUCTIONS, MemoryTool

    client = anthropic.Anthropic()  # reads ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL, if set)
    memory = MemoryTool(workspace=args.workspace, user_dir=args.user_dir)
    runner = client.beta.messages.tool_runner(
        model=args.model,
        max_tokens=args.max_tokens,
        system=INSTRUCTIONS,
        tools=[memory],
        messages=[{"role": "user", "content": args.prompt}],
    )
    final = runner.until_done()
    print("".join(block.text for block in final.content if block.type == "text"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
