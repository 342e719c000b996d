"""Benchmark what extraction costs in tokens: per turn, with and without prompt caching.

For a set of realistic turns (short, long, tool heavy, Chinese, and the
acknowledgements and tool churn a session is full of) it builds the real
extraction request (``mdmem.extract.prompt.build``, with the bundled example
store as the existing memory) and reports, per kind of turn:

* the estimated tokens of the fixed part (instructions + the tool's schema),
  of the memory part (the prompt block the session sees: both are cached
  prefixes, each ending in a breakpoint) and of the per-turn part (today's
  date, the notes related to the turn, the turn);
* the input billed per turn without caching, and with a warm cache for each
  model minimum of cacheable prefix (the longest marked prefix over the
  minimum is read at 0.1x; the first call of every 5 minutes writes it at 1.25x);
* the share of the prompt's budget (``PROMPT_TOKENS``) it uses;
* whether the turn is skipped before any call (``worth_a_call``).

Then it sends every turn through the real Anthropic SDK to the local fake API
(tests/fake_anthropic.py) and checks that both system blocks carry the cache mark.

    python benchmarks/bench_tokens.py
    python benchmarks/bench_tokens.py --json

Token counts are mdmem's estimate (``estimate_tokens``: a CJK character is a
token, other text four characters a token), the same one the budget uses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import date

from _util import REPO, table

sys.path.insert(0, os.path.join(REPO, "tests"))

from mdmem.extract import prompt
from mdmem.extract import turn as turn_
from mdmem.extract.providers.anthropic import operations_schema

CACHE_READ, CACHE_WRITE = 0.1, 1.25
#: A turn's answer: one or two operations (~120 tokens each), or "[]".
ANSWER_TOKENS = 160

LONG = (
    "We discussed how the importer should treat partial files. The uploader writes "
    "`*.part` files and renames them when done; the importer must skip them, retry "
    "after 30 seconds, and give up after 10 minutes with a warning in the job log. "
)


def _tool(i: int, size: int) -> list[dict[str, object]]:
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": f"t{i}",
                    "name": "Bash",
                    "input": {"command": "go test ./..."},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok  pkg\n" * size}
            ],
        },
    ]


TURNS: dict[str, list[list[dict[str, object]]]] = {
    "short": [
        [
            {"role": "user", "content": "No, use pnpm instead of npm in this repo."},
            {"role": "assistant", "content": "Switched the scripts to pnpm."},
        ],
        [
            {"role": "user", "content": "From now on, answer in British English."},
            {"role": "assistant", "content": "Understood, I will."},
        ],
        [
            {"role": "user", "content": "Why does the login test fail on CI but not locally?"},
            {
                "role": "assistant",
                "content": "CI runs with TZ=UTC; the test builds a local midnight. I fixed the "
                "test to use UTC explicitly.",
            },
        ],
    ],
    "long": [
        [
            {"role": "user", "content": LONG * 12},
            {"role": "assistant", "content": LONG * 20},
            {"role": "user", "content": "Remember that partial files are skipped. " + LONG * 4},
            {"role": "assistant", "content": LONG * 8},
        ],
        [
            {"role": "user", "content": "Write the design note for the importer. " + LONG * 30},
            {"role": "assistant", "content": LONG * 40},
        ],
    ],
    "tool heavy": [
        [
            {"role": "user", "content": "Run the tests and fix what fails."},
            *(m for i in range(6) for m in _tool(i, 200)),
            {"role": "assistant", "content": "Fixed the flaky clock test; all packages pass."},
        ],
        [
            {"role": "user", "content": "Find where the retry limit is set."},
            *(m for i in range(3) for m in _tool(i, 800)),
            {"role": "assistant", "content": "It is `MaxRetries` in internal/queue/config.go (5)."},
        ],
    ],
    "Chinese": [
        [
            {
                "role": "user",
                "content": "记住：发布前要先跑 `make release-check`，"
                "并且版本号写在 VERSION 文件里。",
            },
            {"role": "assistant", "content": "好的，已记下发布流程。"},
        ],
        [
            {
                "role": "user",
                "content": "不对，测试数据库的端口是 5433，不是 5432。"
                + "我们之前讨论过这个问题。" * 20,
            },
            {"role": "assistant", "content": "明白，我把配置改成了 5433，并更新了文档。" * 10},
        ],
    ],
    "acknowledgement": [
        [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Running the tests."}],
        [
            {"role": "user", "content": "thanks!"},
            {"role": "assistant", "content": "You're welcome."},
        ],
        [{"role": "user", "content": "继续"}, {"role": "assistant", "content": "好的。"}],
        [
            {"role": "user", "content": "go on"},
            *_tool(9, 300),
            {"role": "assistant", "content": "Done."},
        ],
    ],
}


def _index(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


#: Minimum cacheable prefix (tokens) by model family, from Anthropic's prompt caching
#: documentation: 1,024 (Sonnet 4.5, Opus 4.1/4), 2,048 (Haiku 3.5/3, Sonnet 4.6),
#: 4,096 (Haiku 4.5, Opus 4.5/4.6).
MINIMUMS = (1_024, 2_048, 4_096)


def _large_memory(notes: int) -> tuple[str, str]:
    """The memory a store of ``notes`` notes shows: its prompt block (bounded), split by store."""
    from mdmem.store.block import PROJECT_HEADING, USER_HEADING, line_filename, merge

    kinds = ["project_knowledge", "correction_feedback", "reference_material"]
    project = "\n".join(
        f"- [{kinds[i % 3]}] Fact number {i} about the build — What the build does in case "
        f"{i}, and why it matters. [updated 2026-11-{1 + i % 28:02d}] "
        f"({kinds[i % 3]}_fact-{i}.md)"
        for i in range(notes)
    )
    user = "\n".join(
        f"- [user_preference] Preference {i} — How the person likes things done, case {i}. "
        f"(user_preference_preference-{i}.md)"
        for i in range(25)
    )
    sections: dict[str, list[str]] = {PROJECT_HEADING: [], USER_HEADING: []}
    current: list[str] | None = None
    for line in merge(project, user).splitlines():
        if line in sections:
            current = sections[line]
        elif current is not None and line_filename(line):
            current.append(line)
    return "\n".join(sections[PROJECT_HEADING]), "\n".join(sections[USER_HEADING])


RELATED = "\n".join(
    f"- project: [project_knowledge] Related fact {i} — What a note about this turn "
    f"says, case {i}. [updated 2026-11-20] (project_knowledge_related-{i}.md)"
    for i in range(12)
)


def measure() -> dict[str, object]:
    example = os.path.join(REPO, ".PseudoClaude.example", "memory", "MEMORY.md")
    memories = {
        "example store + 25 preferences": (
            _index(example),
            "\n".join(
                f"- [user_preference] Preference {i} — How the person likes things done, "
                f"case {i}. (user_preference_preference-{i}.md)"
                for i in range(25)
            ),
            "",
        ),
        "10,000 notes (a full block) + 12 related": (*_large_memory(10_000), RELATED),
    }
    fixed = turn_.estimate_tokens(prompt.instructions()) + turn_.estimate_tokens(
        json.dumps(operations_schema())
    )
    rows: list[dict[str, object]] = []
    for memory_name, (project_index, user_index, related) in memories.items():
        for kind, turns in TURNS.items():
            for number, messages in enumerate(turns):
                texts = turn_.from_messages(messages)
                worth = turn_.worth_a_call(texts)
                request = prompt.build(
                    texts, project_index, user_index, date(2026, 12, 1), related=related
                )
                memory = turn_.estimate_tokens(request.memory)
                per_turn = turn_.estimate_tokens(request.prompt)
                prefix = fixed + memory
                uncached = prefix + per_turn
                # The longest marked prefix over the model's minimum is what a warm cache
                # serves: instructions + memory, else instructions alone, else nothing.
                warm = {}
                for minimum in MINIMUMS:
                    cached = prefix if prefix >= minimum else fixed if fixed >= minimum else 0
                    # Most calls read it; one in ten (a pause over 5 minutes) writes it.
                    warm[minimum] = round(
                        uncached - cached + cached * (0.9 * CACHE_READ + 0.1 * CACHE_WRITE)
                    )
                rows.append(
                    {
                        "memory": memory_name,
                        "kind": kind,
                        "turn": number + 1,
                        "skipped": not worth,
                        "fixed": fixed,
                        "memory_tokens": memory,
                        "per_turn": per_turn,
                        "input_uncached": 0 if not worth else uncached,
                        "input_cached": {m: 0 if not worth else w for m, w in warm.items()},
                        "budget_share": round(uncached / prompt.PROMPT_TOKENS, 3),
                    }
                )
    summary = {}
    for memory_name in memories:
        mine = [r for r in rows if r["memory"] == memory_name]
        called = [r for r in mine if not r["skipped"]]
        answers = ANSWER_TOKENS * len(called)
        summary[memory_name] = {
            "turns": len(mine),
            "skipped": len(mine) - len(called),
            "every_turn_uncached": sum(
                fixed + int(str(r["memory_tokens"])) + int(str(r["per_turn"])) + ANSWER_TOKENS
                for r in mine
            ),
            "after_skip_uncached": sum(int(str(r["input_uncached"])) for r in called) + answers,
            "after_skip_cached": {
                m: sum(r["input_cached"][m] for r in called) + answers  # type: ignore[index]
                for m in MINIMUMS
            },
        }
    return {
        "rows": rows,
        "fixed_prefix_tokens": fixed,
        "prompt_budget": prompt.PROMPT_TOKENS,
        "summary": summary,
        "cache_marks_seen": _through_the_sdk(),
    }


def _through_the_sdk() -> list[bool]:
    """One turn through the real SDK and the fake API: which system blocks are marked?"""
    import tempfile

    from fake_anthropic import FakeAnthropic
    from mdmem import Manager

    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as fake:
        os.environ.update(fake.env, MDMEM_STATE_DIR=os.path.join(tmp, "state"))
        os.environ["MDMEM_USER_DIR"] = os.path.join(tmp, "user")
        os.makedirs(os.path.join(tmp, "ws", ".git"))
        fake.enqueue(FakeAnthropic.tool_use("record_memory_operations", {"operations": []}))
        with Manager(os.path.join(tmp, "ws")) as manager:
            manager.update_async(TURNS["short"][0]).result(timeout=60)
        [request] = fake.requests
        return [
            block.get("cache_control") == {"type": "ephemeral"} for block in request.body["system"]
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = measure()
    if args.json:
        print(json.dumps(data, indent=2))
        return
    rows = data["rows"]
    assert isinstance(rows, list)
    print(
        table(
            [
                "memory",
                "turn",
                "skipped",
                "instructions + tool",
                "memory part",
                "per turn",
                "input, no cache",
                *(f"cached, min {m:,}" for m in MINIMUMS),
                "of budget",
            ],
            [
                [
                    str(r["memory"]),
                    f"{r['kind']} {r['turn']}",
                    "yes" if r["skipped"] else "no",
                    str(r["fixed"]),
                    str(r["memory_tokens"]),
                    str(r["per_turn"]),
                    str(r["input_uncached"]),
                    *(str(r["input_cached"][m]) for m in MINIMUMS),
                    f"{float(r['budget_share']):.0%}",
                ]
                for r in rows
            ],
        )
    )
    print()
    summary = data["summary"]
    assert isinstance(summary, dict)
    for memory_name, s in summary.items():
        cached = "; ".join(f"min {m:,}: {s['after_skip_cached'][m]}" for m in MINIMUMS)
        print(
            f"{memory_name}: {s['skipped']} of {s['turns']} turns skipped without a call. "
            f"Tokens for the whole set (input + ~{ANSWER_TOKENS} output a call): every turn, "
            f"no cache {s['every_turn_uncached']}; after the skip rule "
            f"{s['after_skip_uncached']}; with a warm cache by the model's minimum: {cached}."
        )
    print(f"Cache marks on the system blocks the fake API received: {data['cache_marks_seen']}")


if __name__ == "__main__":
    main()
