#!/usr/bin/env python3
"""Writes the reference cases of the C++ chat-template renderer (tests/sdk/test_chat_template.cpp).

Each case is a template (a file of tests/sdk/data/chat_templates/ or inline text), the variables
it is rendered with, and what transformers' own renderer (render_jinja_template, the code behind
apply_chat_template) gives: the text, or the error it raises.

Usage: .venv/bin/python tools/gen_chat_template_reference.py OUTPUT
(the build writes test-data/chat_templates/reference.json)
"""

import json
import sys
from pathlib import Path

from transformers.utils.chat_template_utils import render_jinja_template

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "sdk" / "data"
TEMPLATES = DATA / "chat_templates"

SPECIAL_TOKENS = {
    "chatml": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"},
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>"},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama31": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen25": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "mixtral": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mistral_v3": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "gemma": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "deepseek_r1": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
}


def u(content):
    return {"role": "user", "content": content}


def a(content):
    return {"role": "assistant", "content": content}


def s(content):
    return {"role": "system", "content": content}


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "description": "Current time (UTC).", "parameters": {"type": "object", "properties": {}}},
}
TOOL_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}
TOOL_CALL_STR = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}}

CONVERSATIONS = {
    "one_user": [u("Hello!")],
    "system_user": [s("You are terse."), u("What is 2+2?")],
    "multi_turn": [u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")],
    "system_multi_turn": [s("Be kind."), u("Hi"), a("Hey."), u("Bye"), a("Goodbye!")],
    "empty_content": [u(""), a(""), u("")],
    "unicode": [u("Grüße aus Zürich 👋 — 你好，世界"), a("¡Hola! ✨ こんにちは"), u("Ω≈ç√∫")],
    "quotes_newlines": [u("He said \"hi\" and 'bye'.\nNew line\\n not escaped\ttab"), a("  padded answer  \n\n"), u("\n  leading and trailing  \n")],
    "think_answer": [u("Why?"), a("<think>\nhmm\n</think>\n\nBecause."), u("OK")],
    "not_alternating": [u("one"), u("two")],
    "starts_assistant": [a("I speak first"), u("fine")],
    "tool_role": [u("x"), {"role": "tool", "content": "result"}],
    "empty": [],
}
TOOL_CONVERSATIONS = {
    "tool_calls": [
        s("You can call tools."),
        u("Weather in Zürich?"),
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "name": "get_weather", "content": "{\"temp\": 21}"},
        {"role": "tool", "name": "get_weather", "content": "sunny"},
        a("It is 21 °C and sunny."),
    ],
    "tool_call_no_system": [
        u("Weather?"),
        {"role": "assistant", "content": "Let me check.", "tool_calls": [TOOL_CALL, {"function": {"name": "get_time", "arguments": {}}}]},
        {"role": "tool", "content": "21"},
    ],
}

# Which conversations each family is rendered with (tool conversations only where the template
# has tools), and extra variables for some cases.
FAMILIES = {
    "chatml": list(CONVERSATIONS),
    "smollm2": list(CONVERSATIONS),
    "llama2": list(CONVERSATIONS),
    "llama3": list(CONVERSATIONS),
    "llama31": list(CONVERSATIONS) + list(TOOL_CONVERSATIONS),
    "qwen25": list(CONVERSATIONS) + list(TOOL_CONVERSATIONS),
    "mixtral": list(CONVERSATIONS),
    "mistral_v3": list(CONVERSATIONS),
    "gemma": list(CONVERSATIONS),
    "gemma3": list(CONVERSATIONS),
    "phi3": list(CONVERSATIONS),
    "deepseek_r1": list(CONVERSATIONS),
}
EXTRA_FAMILY_CASES = [
    ("qwen25", "tools_one_user", CONVERSATIONS["one_user"], {"tools": [WEATHER_TOOL, TIME_TOOL]}),
    ("qwen25", "tools_system", CONVERSATIONS["system_user"], {"tools": [WEATHER_TOOL]}),
    ("qwen25", "tools_calls", TOOL_CONVERSATIONS["tool_calls"], {"tools": [WEATHER_TOOL]}),
    ("llama31", "tools_in_user", CONVERSATIONS["system_multi_turn"][:2], {"tools": [WEATHER_TOOL]}),
    ("llama31", "tools_in_system", CONVERSATIONS["system_user"], {"tools": [WEATHER_TOOL], "tools_in_user_message": False}),
    ("llama31", "tools_no_user", [s("sys")], {"tools": [WEATHER_TOOL]}),
    ("llama31", "builtin_tools", [u("search"), {"role": "assistant", "tool_calls": [{"function": {"name": "brave_search", "arguments": {"query": "x", "n": "3"}}}]}, {"role": "ipython", "content": {"r": 1}}], {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"], "date_string": "01 Jan 2025"}),
    ("llama31", "two_tool_calls", [u("x"), {"role": "assistant", "tool_calls": [TOOL_CALL, TOOL_CALL]}], {}),
    ("deepseek_r1", "tool_calls", [u("Weather?"), {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL_STR, TOOL_CALL_STR]}, {"role": "tool", "content": "21"}, {"role": "tool", "content": "sunny"}, a("Warm.")], {}),
    ("deepseek_r1", "tool_pending", [u("Weather?"), {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL_STR]}, {"role": "tool", "content": "21"}], {}),
    ("gemma3", "content_parts", [s([{"type": "text", "text": "Sys part"}]), {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  What is this?  "}]}, a("A cat.")], {}),
    ("gemma3", "bad_content", [u(None)], {}),
    ("mistral_v3", "unknown_role", [u("a"), {"role": "tool", "content": "x"}], {}),
]

M = CONVERSATIONS["system_multi_turn"]

# Feature templates: (name, template, variables). Each renders with messages M.
FEATURES = [
    # whitespace control, trim_blocks and lstrip_blocks
    ("ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("ws_lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", {}),
    ("ws_lstrip_not_variables", "a\n    {{ 'x' }}\n    {# c #}\nb", {}),
    ("ws_minus_left", "a   \n\n  {%- if true %}b{% endif %}", {}),
    ("ws_minus_right", "{% if true -%}   \n\n  b{% endif %}", {}),
    ("ws_var_minus", "a  {{- 'x' -}}  \n b", {}),
    ("ws_plus_left", "a\n    {%+ if true %}b{% endif %}", {}),
    ("ws_plus_right", "{% if true +%}\nb{% endif %}", {}),
    ("ws_comment_trim", "a\n  {# comment #}\nb\n{#- c -#}\n  c", {}),
    ("ws_comment_plus", "a {#+ c +#}\nb", {}),
    ("ws_lstrip_after_var", "{{ 'v' }}   {% if true %}x{% endif %}", {}),
    ("ws_lstrip_mid_line", "text {% if true %}x{% endif %}", {}),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("ws_trailing_newline", "hello\n", {}),
    ("ws_two_trailing_newlines", "hello\n\n", {}),
    ("ws_tabs", "\t{% for x in [1,2] %}\n\t{{ x }}\n\t{% endfor %}\n", {}),
    ("ws_raw", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}!", {}),
    ("ws_raw_ws", "  {%- raw -%}  x  {%- endraw -%}  y", {}),
    ("ws_raw_trim", "{% raw %}\nx\n{% endraw %}\ny", {}),
    ("ws_set_block", "{% set x %}\n  inner {{ 1 + 1 }}\n{% endset %}[{{ x }}]", {}),
    ("ws_nested", "{%- for m in messages -%}\n  {%- if m.role == 'user' -%}\n    U:{{ m.content }}\n  {% else %}\n    O\n  {%- endif %}\n{% endfor -%}", {}),
    # literals and printing
    ("lit_numbers", "{{ 1 }} {{ 1.0 }} {{ 1.5e3 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 1_000 }} {{ 0x1F }} {{ 10 / 4 }} {{ 2.50 }} {{ 1e16 }} {{ 123456789012345678 }}", {}),
    ("lit_bools_none", "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }} {{ [true, none] }}", {}),
    ("lit_strings", "{{ 'single \\'q\\' \"d\"' }}|{{ \"double \\\"q\\\"\" }}|{{ 'tab\\tnl\\nback\\\\' }}|{{ '\\u00e9\\x41\\U0001F600' }}|{{ 'a' 'b' }}", {}),
    ("lit_repr", "{{ ['a', \"it's\", 'q\"', 1, 2.0, none, true] }} {{ {'k': 'v', 'n': [1, {'x': none}]} }} {{ (1, 'a') }} {{ (1,) }} {{ () }}", {}),
    ("lit_repr_escapes", "{{ ['nl\\n', 'tab\\t', 'bs\\\\', '\\x01', 'é😀'] }}", {}),
    ("print_values", "{{ x }}|{{ y }}|{{ z }}|{{ d }}|{{ e }}", {"x": [1, "two", 3.5], "y": {"a": [None, True]}, "z": "", "d": 0.0, "e": -0.5}),
    ("print_float_edge", "{{ 1e15 }} {{ 1e-4 }} {{ 0.0001234 }} {{ 123456789.125 }} {{ -0.0 }} {{ 3.0 * 2 }}", {}),
    # operators
    ("op_arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }}", {}),
    ("op_concat", "{{ 'a' ~ 1 ~ none ~ true ~ 2.0 ~ undefined_var }}|{{ 'x' + 'y' }}|{{ [1] + [2] }}|{{ 'ab' * 3 }}|{{ [0] * 2 }}", {}),
    ("op_compare", "{{ 1 < 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ true == 1 }} {{ [1, 2] == [1, 2] }} {{ 'a' != 'a' }} {{ none == none }} {{ [1, 2] < [1, 3] }}", {}),
    ("op_in", "{{ 'a' in 'cat' }} {{ 'x' not in ['x', 'y'] }} {{ 'k' in {'k': 1} }} {{ 2 in [1, 2] }} {{ 'role' in messages[0] }} {{ 'zz' in messages[0] }}", {}),
    ("op_logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ not 0 }} {{ not 'a' }} {{ none or [] }} {{ 1 if 0 else 2 }} [{{ 'a' if false }}] {{ 'y' if 1 }}", {}),
    ("op_precedence", "{{ not 1 == 2 }} {{ '1' + 2 | string }} {{ -1 | abs }} {{ 'a' ~ 'b' | upper }} {{ 2 * 3 | string | length }}", {}),
    # subscripts, attributes and slices
    ("sub_index", "{{ messages[0].role }} {{ messages[-1]['content'] }} {{ messages[1]['role'] }} [{{ messages[10] }}] {{ 'hello'[1] }} {{ 'hello'[-1] }} [{{ 'abc'[5] }}]", {}),
    ("sub_slices", "{{ messages[1:] | length }} {{ messages[:-1] | length }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3,4,5][::2] }} {{ [1,2,3,4,5][-2:] }} {{ [1,2,3][5:] }} {{ 'héllo😀'[1:4] }} {{ [1,2,3,4][3:0:-1] }}", {}),
    ("sub_attr_fallback", "{{ d.k }} {{ d['k'] }} [{{ d.missing }}] {{ d['items'] }} {{ d.items is callable }} {{ d.get('k') }} {{ d.get('nope') }} {{ d.get('nope', 'def') }}", {"d": {"k": "v", "items": "item-key"}}),
    ("sub_none_attr", "[{{ n.x }}] [{{ n['x'] }}] {{ n is none }}", {"n": None}),
    # tests
    ("tests_types", "{% for v in [1, 1.5, 'a', none, true, [1], {'a': 1}] %}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is string }}{{ v is none }}{{ v is boolean }}{{ v is mapping }}{{ v is iterable }}{{ v is sequence }};{% endfor %}", {}),
    ("tests_defined", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ x is not defined }} {{ messages[0].nope is defined }} {{ tools is defined }} {{ tools is none }}", {"x": 1}),
    ("tests_numbers", "{{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 3 is eq 3 }} {{ 3 is ne 3 }} {{ 2 is lt 3 }} {{ 2 is ge 3 }} {{ 2 is gt 1 }} {{ 2 is le 2 }}", {}),
    ("tests_misc", "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 'a' is in 'cat' }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 'a' is equalto 'a' }} {{ none is sameas none }} {{ x is callable }} {{ raise_exception is callable }}", {"x": 1}),
    ("tests_undefined_iterable", "{{ nope is iterable }} {{ nope is sequence }} {{ nope is string }} {{ nope is mapping }} {{ nope is none }}", {}),
    # filters
    ("f_trim_case", "[{{ '  x y  ' | trim }}] [{{ 'xxhixx' | trim('x') }}] {{ 'hello WORLD' | upper }} {{ 'HeLLo' | lower }} {{ 'ÀÉÎ ÕÜ' | lower }} {{ 'hello world' | capitalize }} {{ 'hello big-world (x) [y' | title }}", {}),
    ("f_length", "{{ messages | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }} {{ nope | length }} {{ '' | length }}", {}),
    ("f_default", "{{ nope | default('d') }} {{ nope | d('dd') }} {{ '' | default('e') }} {{ '' | default('e', true) }} {{ none | default('n') }} {{ 0 | default(5, boolean=true) }} [{{ nope | default }}]", {}),
    ("f_first_last", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ 'abc' | last }} [{{ [] | first }}] {{ {'a': 1, 'b': 2} | first }} {{ (messages | last).content }}", {}),
    ("f_join", "{{ ['a', 'b'] | join }} {{ ['a', 'b'] | join(', ') }} {{ [1, none, 'x'] | join('-') }} {{ messages | join('|', attribute='role') }} {{ 'abc' | join('.') }}", {}),
    ("f_conversions", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '0x1F' | int(0, 16) }} {{ ' 12 ' | int }} {{ '3.5' | float }} {{ 'y' | float }} {{ 2 | float }} {{ true | int }} {{ none | int }} {{ '1e3' | float }}", {}),
    ("f_string_list", "{{ 12 | string }} {{ [1] | string }} {{ none | string }} {{ 'ab' | list }} {{ {'k': 1, 'j': 2} | list }} {{ (messages | list)[0].role }} [{{ nope | string }}] [{{ nope | list }}]", {}),
    ("f_replace", "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'ab' | replace('', '-') }} {{ 'x.y.z' | replace('.', '') }}", {}),
    ("f_selectattr", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }} {{ messages | rejectattr('role', 'eq', 'user') | list | length }} {{ msgs | selectattr('flag') | list | length }} {{ msgs | rejectattr('flag') | map(attribute='name') | list }}", {"msgs": [{"name": "a", "flag": True}, {"name": "b", "flag": False}, {"name": "c"}]}),
    ("f_select", "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ ['a', 'b'] | select('in', ['a']) | list }}", {}),
    ("f_map", "{{ ['a', 'b'] | map('upper') | join }} {{ [' a ', 'b '] | map('trim') | list }} {{ items | map(attribute='x.y') | list }} {{ items | map(attribute='z', default='dz') | list }} {{ [[1, 2], [3]] | map('length') | list }} {{ [1.5, 2.4] | map('round') | list }}", {"items": [{"x": {"y": 1}}, {"x": {"y": 2}, "z": 3}]}),
    ("f_items_dictsort", "{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %} {{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ d | dictsort(by='value') }} {{ {'b': 1, 'A': 2, 'a': 3} | dictsort }} {{ {'b': 1, 'A': 2} | dictsort(true) }}", {"d": {"b": 2, "a": 1, "c": 0}}),
    ("f_indent", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'x\\ny' | indent('> ') }}|{{ 'single' | indent(first=true) }}", {}),
    ("f_numbers", "{{ -3 | abs }} {{ -2.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3 | round }} {{ 1.234 | round(1, 'ceil') }} {{ 1.26 | round(1, 'floor') }} {{ [1, 2, 3] | sum }} {{ [1.5, 2] | sum }} {{ items | sum(attribute='n') }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ ['b', 'A', 'c'] | max }} {{ items | max(attribute='n') }}", {"items": [{"n": 2}, {"n": 5}]}),
    ("f_reverse_unique_sort", "{{ 'abc' | reverse }} {{ [1, 2, 3] | reverse | list }} {{ [1, 2, 1, 3, 2] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} {{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ messages | sort(attribute='role') | map(attribute='role') | join(',') }}", {}),
    ("f_wordcount_safe", "{{ 'hello big  world, again' | wordcount }} {{ 'x' | safe }} {{ 5 | safe }}", {}),
    ("f_tojson", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(separators=(',', ':')) }}|{{ d | tojson(sort_keys=true) }}|{{ 'é\"\\n\\u0001' | tojson }}|{{ 'é' | tojson(true) }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson }}|{{ [1.0, 1e20, none, true] | tojson }}", {"d": {"z": 1, "a": [1, 2, {"b": None}], "u": "ü😀", "f": 0.5, "t": True}}),
    ("f_tojson_tools", "{% for t in tools %}{{ t | tojson(indent=4) }}\n{% endfor %}", {"tools": [WEATHER_TOOL, TIME_TOOL]}),
    ("f_generator_truthy", "{% if [] | select %}generator-true{% endif %} {% set g = [1, 2, 3] | map('string') %}{{ g | first }} {{ g | list }} {{ g | list }}", {}),
    # loops
    ("loop_vars", "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem.role if loop.previtem is defined else '-' }}/{{ loop.nextitem.role if not loop.last else '-' }};{% endfor %}", {}),
    ("loop_filter_else", "{% for m in messages if m.role == 'user' %}{{ loop.index }}:{{ m.content }}({{ loop.length }}){% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] if x > 5 %}x{% else %}filtered-empty{% endfor %}", {}),
    ("loop_dict_items", "{% for k, v in d.items() %}{{ k }}:{{ v }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for (a, b) in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", {"d": {"x": 1, "y": [2]}}),
    ("loop_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}", {}),
    ("loop_scoping", "{% set x = 0 %}{% for i in [1, 2, 3] %}{{ x }}{% set x = x + i %}{{ x }};{% endfor %}{{ x }}", {}),
    ("loop_nested_loop", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}-{{ loop.index }} {% endfor %}", {}),
    ("loop_cycle_range", "{% for i in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %} {{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }}", {}),
    ("loop_string_iter", "{% for c in 'hé😀' %}[{{ c }}]{% endfor %}{% for x in nope %}never{% else %}undef-empty{% endfor %}", {}),
    # set and namespaces
    ("set_basic", "{% set a = 1 %}{% set b, c = [2, 3] %}{% set t = 1, 2 %}{{ a }}{{ b }}{{ c }}{{ t }}{% if true %}{% set a = 5 %}{% endif %}{{ a }}", {}),
    ("set_namespace", "{% set ns = namespace(found=false, count=0) %}{% for m in messages %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% set ns.count = ns.count + 1 %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.count }} {{ ns }} {{ ns.missing is defined }}", {}),
    ("set_namespace_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{% set d = dict(x=1, y='z') %}{{ d }} {{ dict(d, w=0) }}", {}),
    ("set_messages_shadow", "{% if messages[0].role == 'system' %}{% set sys = messages[0].content %}{% set messages = messages[1:] %}{% endif %}{{ sys }}|{{ messages | length }}", {}),
    # macros
    ("macro_basic", "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }} {{ greet() }}", {}),
    ("macro_outer_scope", "{% macro m(a) %}{{ a }}{{ z }}{% endmacro %}{% set z = 1 %}{{ m(2) }}{% set z = 3 %}{{ m(4) }}", {}),
    ("macro_recursive_ok", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_render_content", "{%- macro render(content) -%}\n{%- if content is string -%}{{ content }}{%- else -%}{%- for c in content -%}{{ c.text }}{%- endfor -%}{%- endif -%}\n{%- endmacro -%}\n{% for m in msgs %}{{ render(m.content) }};{% endfor %}", {"msgs": [{"content": "plain"}, {"content": [{"text": "a"}, {"text": "b"}]}]}),
    # string methods
    ("str_methods", "[{{ '  x  '.strip() }}] [{{ 'xxaxx'.strip('x') }}] [{{ '  x '.lstrip() }}] [{{ ' x  '.rstrip() }}] {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a-b-c'.rsplit('-', 1) }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'aXa'.replace('a', 'b') }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }}", {}),
    ("str_methods_more", "{{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'banana'.count('an') }} {{ ', '.join(['a', 'b']) }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.txt'.removesuffix('.txt') }} {{ '123'.isdigit() }} {{ ' \\n'.isspace() }} {{ content.split('</think>')[-1].strip() }}", {"content": "<think>a</think>\n answer "}),
    ("dict_methods", "{{ d.keys() | list }} {{ d.values() | list }} {% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {{ d.items() }} {{ d.keys() }} {{ d.values() | length }}", {"d": {"a": 1, "b": 2}}),
    # globals and HF variables
    ("hf_variables", "{{ add_generation_prompt }} {{ tools }} {{ documents }} {{ bos_token }}|{{ eos_token }}|{{ custom_var }}", {"bos_token": "<s>", "eos_token": "</s>", "custom_var": {"nested": [1]}}),
    ("hf_documents", "{% for d in documents %}{{ loop.index }}. {{ d.title }}: {{ d.text }}\n{% endfor %}", {"documents": [{"title": "T1", "text": "Body 1"}, {"title": "Ü", "text": "Body 2"}]}),
    ("hf_reasoning_alias", "{% for m in messages %}{{ m.role }}:{{ m.reasoning_content }}|{{ m.thinking }}|{{ m.content }};{% endfor %}{{ messages[1] | tojson }}", {}, [u("q"), {"role": "assistant", "content": "a", "reasoning": "r1"}, {"role": "assistant", "reasoning_content": "r2", "content": "b"}, {"role": "assistant", "thinking": "r3", "content": "c", "reasoning_content": None}]),
    ("hf_strftime_static", "{{ strftime_now('%%') }}", {}),
    ("generation_block", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|{% endfor %}", {}),
    # undefined behaviour
    ("undef_print", "[{{ nope }}] [{{ messages[0].nope }}] [{{ nope | default('x') }}] {{ nope is defined }} {% if nope %}t{% else %}f{% endif %} {{ nope == nope }} {{ 'x' in nope }}", {}),
    # errors raised by the template or by jinja2 at runtime
    ("err_raise", "a{{ raise_exception('Custom failure: ' ~ messages | length) }}", {}),
    ("err_undefined_attr", "{{ nope.attr }}", {}),
    ("err_undefined_call", "{{ nope() }}", {}),
    ("err_undefined_add", "{{ nope + 1 }}", {}),
    ("err_type_add", "{{ 'a' + 1 }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_not_iterable", "{% for x in 5 %}{% endfor %}", {}),
    ("err_append_unsafe", "{% set l = [1] %}{{ l.append(2) }}", {}),
    ("err_namespace_underscore", "{% set ns = namespace() %}{% set ns._x = 1 %}", {}),
    ("err_set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("err_generator_length", "{{ [1] | select | length }}", {}),
    ("err_unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("err_compare_types", "{{ 1 < 'a' }}", {}),
    ("err_tojson_undefined", "{{ nope | tojson }}", {}),
    ("err_slice_none", "{{ n[1:] }}", {"n": None}),
    ("err_slice_dict", "{{ d[:1] }}", {"d": {"a": 1}}),
    ("err_precedence_filter", "{{ 1 + 2 | string }}", {}),
    ("err_recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {}),
    ("err_items_non_mapping", "{{ [1] | items | list }}", {}),
]


def render(template, conversation, variables):
    kwargs = dict(variables)
    tools = kwargs.pop("tools", None)
    documents = kwargs.pop("documents", None)
    add_generation_prompt = kwargs.pop("add_generation_prompt", False)
    context = {"messages": conversation, "tools": tools, "documents": documents, "add_generation_prompt": add_generation_prompt, **kwargs}
    try:
        rendered, _ = render_jinja_template(
            conversations=[conversation], chat_template=template, tools=tools, documents=documents,
            add_generation_prompt=add_generation_prompt, **kwargs)
        return context, {"expected": rendered[0]}
    except Exception as e:  # the error is what the C++ renderer must match
        return context, {"error": type(e).__name__, "message": str(e)}


def main():
    out_path = Path(sys.argv[1])
    out_path.parent.mkdir(parents=True, exist_ok=True)
    cases = []
    for family, conversations in FAMILIES.items():
        template = (TEMPLATES / f"{family}.jinja").read_text(encoding="utf-8")
        for conv_name in conversations:
            conversation = {**CONVERSATIONS, **TOOL_CONVERSATIONS}[conv_name]
            for agp in (False, True):
                variables = {**SPECIAL_TOKENS[family], "add_generation_prompt": agp}
                if conv_name in TOOL_CONVERSATIONS:
                    variables["tools"] = [WEATHER_TOOL]
                context, result = render(template, conversation, variables)
                cases.append({"name": f"{family}/{conv_name}/agp={int(agp)}", "template_file": f"chat_templates/{family}.jinja", "context": context, **result})
    for family, name, conversation, extra in EXTRA_FAMILY_CASES:
        template = (TEMPLATES / f"{family}.jinja").read_text(encoding="utf-8")
        context, result = render(template, conversation, {**SPECIAL_TOKENS[family], "add_generation_prompt": True, **extra})
        cases.append({"name": f"{family}/{name}", "template_file": f"chat_templates/{family}.jinja", "context": context, **result})
    for feature in FEATURES:
        name, template, variables = feature[:3]
        conversation = feature[3] if len(feature) > 3 else M
        context, result = render(template, conversation, variables)
        cases.append({"name": f"feature/{name}", "template": template, "context": context, **result})
    out_path.write_text(json.dumps({"generator": "tools/gen_chat_template_reference.py", "cases": cases}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    errors = sum("error" in c for c in cases)
    print(f"wrote {len(cases)} cases ({errors} expected errors) to {out_path}")


if __name__ == "__main__":
    main()
