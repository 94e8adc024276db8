#!/usr/bin/env python3
"""Reference renders for the differential chat-template tests (test_jinja_differential).

Usage: jinja_reference.py CHAT_TEMPLATES_DIR IN.json OUT.json
IN.json is a list of {"template": str, "vars": {...}}; OUT.json gets one entry per case:
{"ok": rendered} or {"error": "ExceptionType: message"}.

The environment is the one of CHAT_TEMPLATES_DIR/render_with_jinja2.py (transformers'
configuration), and the variables are the ones spillway's ChatTemplate passes: messages,
tools, documents=None, add_generation_prompt, plus any others in "vars".
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
from render_with_jinja2 import make_env  # noqa: E402


def main():
    env = make_env()
    with open(sys.argv[2], encoding="utf-8") as f:
        cases = json.load(f)
    out = []
    for case in cases:
        v = dict(case.get("vars", {}))
        kw = {
            "messages": v.pop("messages", []),
            "tools": v.pop("tools", None),
            "documents": None,
            "add_generation_prompt": v.pop("add_generation_prompt", True),
        }
        kw.update(v)
        try:
            out.append({"ok": env.from_string(case["template"]).render(**kw)})
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            out.append({"error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
