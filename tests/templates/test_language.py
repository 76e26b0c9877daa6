"""The template language feature by feature: each snippet is rendered by our engine
(`triad template render`) and by Python's jinja2 (reference_render.py) with the same context,
and must give the same text, or fail in both."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest

import reference_render

BIN = os.environ.get("TRIAD_BIN")

CONTEXT = {
    "messages": [
        {"role": "system", "content": "  Be brief.  "},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
    ],
    "n": 7, "x": 2.5, "big": 10**15, "neg": -3, "s": "Hello, World", "empty": "", "none_v": None,
    "lst": [3, 1, 2], "words": ["b", "A", "c"], "d": {"b": 2, "a": 1, "items": "key named items"},
    "nested": {"k": [1, {"z": "deep"}]}, "flag": True, "uni": "héllo wörld ✓",
}

SNIPPETS = [
    # printing (Python str / repr)
    "{{ n }} {{ x }} {{ big }} {{ neg }} {{ flag }} {{ none_v }} {{ lst }} {{ d }} {{ 1.0 }} {{ 1e-7 }} {{ 1e20 }} {{ 0.1 + 0.2 }}",
    "{{ [1, 'a', none, true, 2.0] }} {{ {'k': 'v\"q'} }} {{ \"it's\" }} {{ ['it\\'s'] }}",
    "[{{ undefined_thing }}] [{{ d.missing }}] [{{ lst[10] }}]",
    # arithmetic and operators
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2 * 3 - 4 }}",
    "{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1] + [2, 3] }} {{ 'x' + 'y' }} {{ 10 - 2.5 }}",
    "{{ 1 < 2 and 2 <= 2 and 3 > 2 and 3 >= 3 and 1 != 2 and not 1 == 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }}",
    "{{ 'ell' in s }} {{ 2 in lst }} {{ 'a' in d }} {{ 'q' not in d }} {{ 1 if flag else 2 }} {{ 'y' if none_v }}|",
    "{{ none_v or 'fallback' }} {{ 0 and 1 }} {{ '' or [] or 'last' }} {{ true + 1 }}",
    "{{ 1 + 'a' }}",
    "{{ 1 / 0 }}",
    # strings and methods
    "{{ s.upper() }} {{ s.lower() }} {{ s.split(', ') }} {{ s.split() }} {{ '  a  b '.split() }} {{ 'a,b,,c'.split(',', 1) }}",
    "[{{ '  pad  '.strip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ '  l'.lstrip() }}] [{{ 'r  '.rstrip() }}]",
    "{{ s.startswith('Hell') }} {{ s.endswith(('x', 'ld')) }} {{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 1) }}",
    "{{ s.find('o') }} {{ s.count('l') }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ '-'.join(['a', 'b']) }}",
    "{{ s[0] }} {{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[:-3] }} {{ lst[1:] }} {{ lst[::-1] }} {{ lst[-2:] }} {{ uni[1:4] }}",
    "{{ '{} is {}'.format('x', 1) }} {{ 'a\\nb\\nc'.splitlines() }} {{ 'abc'.rsplit('b', 1) }}",
    # filters
    "{{ lst | length }} {{ s | length }} {{ uni | length }} {{ d | length }} {{ lst | first }} {{ lst | last }} {{ lst | sort }} {{ words | sort }}",
    "{{ lst | sort(reverse=true) }} {{ words | sort(case_sensitive=true) }} {{ lst | reverse | list }} {{ lst | min }} {{ lst | max }} {{ lst | sum }}",
    "{{ lst | join(', ') }} {{ words | join }} {{ messages | map(attribute='role') | join('/') }} {{ messages | map(attribute='role') | list }}",
    "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | list }}",
    "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ [0, 1, '', 'a'] | select | list }}",
    "{{ messages | selectattr('tool_calls', 'defined') | list | length }} {{ [1, 1, 2] | unique | list }}",
    "{{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ d | items | list }} {{ d.items() | list }} {{ d.keys() | list }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }}",
    "{{ undefined_thing | default('dflt') }} {{ '' | default('dflt') }} {{ '' | default('dflt', true) }} {{ none_v | default('x') }}",
    "{{ s | upper }} {{ s | lower }} {{ 'hi there' | title }} {{ 'hi' | capitalize }} [{{ '  t  ' | trim }}] {{ s | replace('o', '0') }}",
    "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(width='> ', blank=true) }}",
    "{{ 3.7 | int }} {{ '42' | int }} {{ 'x' | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 7 | string }}",
    "{{ d | tojson }} {{ lst | tojson }} {{ uni | tojson }} {{ nested | tojson(indent=2) }} {{ {'b': 1, 'a': [1.5, none, true]} | tojson }}",
    "{{ 'q\"<&>' | tojson }} {{ 'a\\tb\\u0001' | tojson }} {{ 1e100 | tojson }} {{ {} | tojson }} {{ [] | tojson(indent=2) }}",
    "{{ 'x' | safe + '<y>' }} {{ '<y>' + 'x' | safe }} {{ '<b>' | e }} {{ ('<a>' | safe) ~ '<b>' }}",
    "{{ 'one two  three' | wordcount }} {{ 'abc' | list }} {{ 'hello' | truncate(3) }} {{ 'x' | center(5) }}|",
    "{{ lst | map('string') | join('-') }} {{ words | map('upper') | list }} {{ lst | tojson | length }}",
    "{{ (messages | map(attribute='role')) | tojson }}",
    "{{ lst | map(attribute='nope') | list }}",
    # tests
    "{{ n is defined }} {{ zz is defined }} {{ zz is undefined }} {{ none_v is none }} {{ s is string }} {{ n is number }} {{ n is integer }} {{ x is float }}",
    "{{ d is mapping }} {{ lst is iterable }} {{ s is iterable }} {{ lst is sequence }} {{ flag is boolean }} {{ flag is true }} {{ n is odd }} {{ n is even }}",
    "{{ 9 is divisibleby 3 }} {{ n is eq 7 }} {{ n is gt 3 }} {{ 2 is in lst }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ n is not none }}",
    # statements
    "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.length }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}:{{ m.role }} {% endfor %}",
    "{% for m in messages if m.role != 'system' %}{{ loop.index }}={{ m.role }}{{ loop.cycle('a', 'b') }} {% else %}none{% endfor %}",
    "{% for x in [] %}x{% else %}empty{% endfor %} {% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
    "{% for x in lst %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in lst %}{{ loop.previtem | default('^') }}{{ x }}{{ loop.nextitem | default('$') }} {% endfor %}",
    "{% for c in 'héllo' %}[{{ c }}]{% endfor %} {% for k in d %}{{ k }}{% endfor %}",
    "{% set a = 1 %}{% for x in lst %}{% set a = a + x %}{% endfor %}{{ a }} {% set ns = namespace(t=0) %}{% for x in lst %}{% set ns.t = ns.t + x %}{% endfor %}{{ ns.t }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = (1, 2) %}{{ t }} {% set l = [1, 2,] %}{{ l }}",
    "{% set block %}inner {{ n }}{% endset %}[{{ block }}] {% set up | upper %}shout{% endset %}{{ up }}",
    "{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %} {% if zz %}y{% else %}n{% endif %} {% if lst %}L{% endif %}",
    "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet('C', punct='?') }}",
    "{% macro rec(k) %}{% if k > 0 %}{{ k }}{{ rec(k - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{% macro m() %}{{ n }}{{ local_var | default('-') }}{% endmacro %}{% set local_var = 'L' %}{{ m() }}{% for i in [1] %}{% set inloop = 1 %}{{ m() }}{% endfor %}",
    "{% filter upper %}shout {{ s }}{% endfilter %}",
    "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b='x') }} {{ namespace(a=1).a }}",
    "{{ raise_exception('custom failure') }}",
    "{{ messages[0]['content'] | trim }} {{ messages[2].tool_calls[0].function.arguments | tojson }} {{ nested.k[1].z }} {{ nested['k'][0] }}",
    "{{ d['items'] }} {{ d.items is defined }}",
    "{{ undefined_thing.attr }}",
    "{{ undefined_thing() }}",
    "{{ messages.append(1) }}",
    "{{ lst[1.5] }}",
    # whitespace control (trim_blocks and lstrip_blocks on)
    "a\n  {% if true %}\n    b\n  {% endif %}\nc\n",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "x\n{# comment #}\ny {#- tight -#} z\n  {%+ if true %}kept{% endif %}\n{%- for i in [1,2] +%}\n{{ i }}{% endfor %}",
    "{% for m in messages %}\n  {{ m.role }}\n{% endfor %}\n",
    "line1\n    {%- set q = 1 %}\n  {{- ' v' }}\n",
    "{{ '%s and %s' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ 'x' | format }}",
    "{% generation %}gen {{ n }}{% endgeneration %}",
    "{{ 'unterminated }}",
    "{% if %}{% endif %}",
    "{% for x in lst %}no end",
    "{% endfor %}",
    "{{ 1 +* 2 }}",
    "{% unknowntag %}",
    "{% break %}",
    "{{ (1, 2)[0] }} {{ [[1, 2], [3]][0][1] }} {{ -n }} {{ +n }} {{ not flag }} {{ -(2 ** 2) }} {{ 2 ** 3 ** 2 }}",
    "{{ 'a' < 1 }}",
]


def render_ours(source: str, context: dict):
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False, encoding="utf-8") as f:
        f.write(source)
        path = f.name
    try:
        p = subprocess.run([BIN, "template", "render", "-t", path], input=json.dumps(context).encode(),
                           capture_output=True, timeout=30)
    finally:
        os.unlink(path)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("source", SNIPPETS, ids=[f"s{i:02d}" for i in range(len(SNIPPETS))])
def test_snippet(source):
    if not BIN:
        pytest.skip("TRIAD_BIN is not set")
    try:
        want, want_error = reference_render.render(source, json.loads(json.dumps(CONTEXT))), None
    except Exception as e:  # noqa: BLE001
        want, want_error = None, e
    rc, got, err = render_ours(source, CONTEXT)
    assert "internal error" not in err, err
    if want_error is not None:
        assert rc == 1 and got == "", f"jinja2 raised {type(want_error).__name__}: {want_error}; we printed {got!r}"
        assert "error" in err
        return
    assert rc == 0, f"we failed: {err} (jinja2 gave {want!r})"
    assert got == want
