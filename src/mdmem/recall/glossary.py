"""A small English ↔ Chinese glossary of software words, so a lexical query can cross languages.

Notes are written in English and in Chinese, often by one team; a question in
one language should still find a note in the other when the semantic extra is
not installed. At query time each English word of the query also looks for its
Chinese equivalents and each Chinese word for its English ones
(:func:`expand`); the notes' own terms are unchanged. The list is general
software vocabulary, kept short on purpose: a word belongs here only when its
translation is unambiguous in a developer's notes.
"""

from __future__ import annotations

from mdmem.recall.text import terms

__all__ = ["PAIRS", "expand"]

#: English word -> Chinese words with the same meaning in software.
PAIRS: dict[str, tuple[str, ...]] = {
    "api": ("接口",),
    "app": ("应用",),
    "application": ("应用", "应用程序"),
    "argument": ("参数",),
    "authentication": ("认证", "鉴权"),
    "authenticate": ("认证", "鉴权"),
    "backup": ("备份",),
    "benchmark": ("基准测试", "基准"),
    "branch": ("分支",),
    "browser": ("浏览器",),
    "bug": ("缺陷",),
    "build": ("构建", "编译"),
    "cache": ("缓存",),
    "change": ("改动", "变更"),
    "client": ("客户端",),
    "code": ("代码",),
    "colour": ("颜色",),
    "color": ("颜色",),
    "command": ("命令",),
    "commit": ("提交",),
    "compile": ("编译",),
    "config": ("配置",),
    "configuration": ("配置",),
    "crash": ("崩溃",),
    "database": ("数据库",),
    "debug": ("调试",),
    "default": ("默认",),
    "dependency": ("依赖",),
    "deploy": ("部署", "上线"),
    "deployment": ("部署",),
    "directory": ("目录",),
    "document": ("文档",),
    "documentation": ("文档",),
    "emulator": ("模拟器",),
    "environment": ("环境",),
    "error": ("错误", "报错"),
    "file": ("文件",),
    "folder": ("目录", "文件夹"),
    "format": ("格式",),
    "function": ("函数",),
    "index": ("索引",),
    "install": ("安装",),
    "interface": ("接口", "界面"),
    "language": ("语言",),
    "latency": ("延迟",),
    "log": ("日志",),
    "logging": ("日志",),
    "memory": ("内存",),
    "merge": ("合并",),
    "message": ("消息", "信息"),
    "migration": ("迁移",),
    "mobile": ("移动端",),
    "network": ("网络",),
    "notification": ("通知",),
    "output": ("输出",),
    "package": ("软件包",),
    "password": ("密码",),
    "performance": ("性能",),
    "permission": ("权限",),
    "pipe": ("管道",),
    "production": ("生产", "生产环境"),
    "push": ("推送",),
    "query": ("查询",),
    "regression": ("回退", "回归"),
    "release": ("发布", "发版"),
    "request": ("请求",),
    "review": ("评审", "审查"),
    "run": ("运行",),
    "screen": ("屏幕", "页面"),
    "search": ("搜索",),
    "server": ("服务器",),
    "service": ("服务",),
    "setting": ("设置",),
    "ship": ("发布", "上线"),
    "signing": ("签名",),
    "signature": ("签名",),
    "snapshot": ("快照",),
    "state": ("状态",),
    "storage": ("存储",),
    "string": ("字符串",),
    "task": ("任务",),
    "test": ("测试",),
    "thread": ("线程",),
    "time": ("时间",),
    "timeout": ("超时",),
    "timezone": ("时区",),
    "token": ("令牌",),
    "translation": ("翻译",),
    "update": ("更新",),
    "upgrade": ("升级",),
    "user": ("用户",),
    "version": ("版本",),
    "warning": ("警告",),
    "window": ("窗口",),
}


# The words of PAIRS whose stem (mdmem.recall.text.stem) is not the word itself, written
# out: stemming all of them at import was most of what the glossary cost the per-prompt
# hook, a fresh process at every prompt. tests/recall/test_glossary.py holds this table
# to stem(); a word added to PAIRS whose stem differs goes here too.
_STEMS: dict[str, str] = {
    "application": "applic",
    "argument": "argu",
    "authentication": "authentic",
    "authenticate": "authentic",
    "cache": "cach",
    "change": "chang",
    "compile": "compil",
    "configuration": "configur",
    "database": "databas",
    "dependency": "dependenci",
    "deployment": "deploy",
    "directory": "directori",
    "document": "docu",
    "documentation": "document",
    "environment": "environ",
    "interface": "interfac",
    "language": "languag",
    "latency": "latenci",
    "logging": "log",
    "memory": "memori",
    "merge": "merg",
    "message": "messag",
    "migration": "migr",
    "mobile": "mobil",
    "notification": "notific",
    "package": "packag",
    "performance": "performanc",
    "query": "queri",
    "release": "releas",
    "service": "servic",
    "setting": "set",
    "signing": "sign",
    "signature": "signatur",
    "state": "stat",
    "storage": "storag",
    "timezone": "timezon",
    "translation": "transl",
    "update": "upd",
    "upgrade": "upgrad",
    "warning": "warn",
}


def _build() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    english: dict[str, list[str]] = {}
    chinese: dict[str, list[str]] = {}
    for word, translations in PAIRS.items():
        key = _STEMS.get(word, word)
        for zh in translations:
            english.setdefault(key, []).append(zh)
            chinese.setdefault(zh, []).append(key)
    return english, chinese


_EN, _ZH = _build()
# A Chinese word's terms, worked out when a query needs them (the per-prompt hook runs
# in a fresh process: terms of every word up front would be most of its glossary cost).
_ZH_TERMS: dict[str, list[str]] = {}


def _zh_terms(zh: str) -> list[str]:
    found = _ZH_TERMS.get(zh)
    if found is None:
        found = _ZH_TERMS[zh] = terms(zh)
    return found


def expand(query: str, query_terms: list[str]) -> dict[str, list[str]]:
    """For each query term, the terms of its translations (terms without one are left out)."""
    out: dict[str, list[str]] = {}
    for term in set(query_terms):
        for zh in _EN.get(term, ()):
            out.setdefault(term, []).extend(_zh_terms(zh))
    for zh, english in _ZH.items():
        if zh in query:
            # The Chinese word's own terms stand for it; each gains the English stems.
            for term in _zh_terms(zh):
                out.setdefault(term, []).extend(english)
    return {t: sorted(set(v) - {t}) for t, v in out.items() if set(v) - {t}}
