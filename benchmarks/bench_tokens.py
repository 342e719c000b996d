"""Benchmark what extraction costs in tokens: per turn, with and without prompt caching.

For a set of realistic turns (short, long, tool heavy, Chinese, and the
acknowledgements and tool churn a session is full of) it builds the real
extraction request (``mdmem.extract.prompt.build``, with the bundled example
store as the existing memory) and reports, per kind of turn:

* the estimated tokens of the fixed part (instructions + the tool's schema,
  the prefix Anthropic caches) and of the per-turn part (indexes + the turn);
* the input billed per turn without caching, and with a warm cache (cached
  prefix read at 0.1x; the first call of every 5 minutes writes it at 1.25x);
* the share of the prompt's budget (``PROMPT_TOKENS``) it uses;
* whether the turn is skipped before any call (``worth_a_call``).

Then it sends every turn through the real Anthropic SDK to the local fake API
(tests/fake_anthropic.py) and checks that the request carries the cache mark.

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


def measure() -> dict[str, object]:
    example = os.path.join(REPO, ".PseudoClaude.example", "memory", "MEMORY.md")
    project_index = _index(example)
    user_index = "\n".join(
        f"- [user_preference] Preference {i} — How the person likes things done, case {i}. "
        f"(user_preference_preference-{i}.md)"
        for i in range(25)
    )
    fixed = turn_.estimate_tokens(prompt.instructions()) + turn_.estimate_tokens(
        json.dumps(operations_schema())
    )
    rows: list[dict[str, object]] = []
    for kind, turns in TURNS.items():
        for number, messages in enumerate(turns):
            texts = turn_.from_messages(messages)
            worth = turn_.worth_a_call(texts)
            request = prompt.build(texts, project_index, user_index, date(2026, 12, 1))
            per_turn = turn_.estimate_tokens(request.prompt)
            uncached = fixed + per_turn
            # Warm: most calls read the prefix; one in ten (a pause over 5 minutes) writes it.
            warm = per_turn + fixed * (0.9 * CACHE_READ + 0.1 * CACHE_WRITE)
            rows.append(
                {
                    "kind": kind,
                    "turn": number + 1,
                    "skipped": not worth,
                    "fixed": fixed,
                    "per_turn": per_turn,
                    "input_uncached": 0 if not worth else uncached,
                    "input_cached": 0 if not worth else round(warm),
                    "budget_share": round(uncached / prompt.PROMPT_TOKENS, 3),
                }
            )
    called = [r for r in rows if not r["skipped"]]
    total_u = sum(int(str(r["input_uncached"])) for r in called) + ANSWER_TOKENS * len(called)
    total_c = sum(int(str(r["input_cached"])) for r in called) + ANSWER_TOKENS * len(called)
    naive = sum(fixed + int(str(r["per_turn"])) + ANSWER_TOKENS for r in rows)
    return {
        "rows": rows,
        "fixed_prefix_tokens": fixed,
        "prompt_budget": prompt.PROMPT_TOKENS,
        "turns": len(rows),
        "skipped": len(rows) - len(called),
        "tokens_every_turn_uncached": naive,
        "tokens_after_skip_uncached": total_u,
        "tokens_after_skip_cached": total_c,
        "cache_mark_seen": _through_the_sdk(),
    }


def _through_the_sdk() -> bool:
    """One turn through the real SDK and the fake API: is the system block marked for caching?"""
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
        return bool(request.body["system"][0].get("cache_control") == {"type": "ephemeral"})


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
                "turn",
                "skipped",
                "fixed prefix",
                "per turn",
                "input, no cache",
                "input, cached",
                "of budget",
            ],
            [
                [
                    f"{r['kind']} {r['turn']}",
                    "yes" if r["skipped"] else "no",
                    str(r["fixed"]),
                    str(r["per_turn"]),
                    str(r["input_uncached"]),
                    str(r["input_cached"]),
                    f"{float(r['budget_share']):.0%}",
                ]
                for r in rows
            ],
        )
    )
    print()
    print(
        f"{data['skipped']} of {data['turns']} turns skipped without a call "
        f"({int(str(data['skipped'])) / int(str(data['turns'])):.0%}). Tokens for the whole set "
        f"(input + ~{ANSWER_TOKENS} output a call): every turn, no cache "
        f"{data['tokens_every_turn_uncached']}; after the skip rule "
        f"{data['tokens_after_skip_uncached']}; "
        f"after the skip rule with a warm cache {data['tokens_after_skip_cached']}."
    )
    print(f"Cache mark in the request the fake API received: {data['cache_mark_seen']}")


if __name__ == "__main__":
    main()
