// The Jinja constructs chat templates use, one case each; every expected text (or error) is what Jinja2 3.1
// prints through render_reference.py's environment (trim_blocks, lstrip_blocks, the immutable sandbox).
#include <gtest/gtest.h>

#include "chat/chat_template.h"

namespace infer::chat {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* variables;  // JSON object of template variables
  const char* expected;   // the rendering, or "ERROR " + Jinja2's exception
};

const Case kCases[] = {
    {"TrimBlocksDropsNewlineAfterBlockTag", R"~({% if true %}
yes
{% endif %}
end)~", R"~({})~", R"~(yes
end)~"},
    {"LstripBlocksDropsIndentBeforeBlockTag", R"~(a
    {% if true %}
    x
    {% endif %}
b)~", R"~({})~", R"~(a
    x
b)~"},
    {"LstripBlocksKeepsIndentBeforeExpression", R"~(a
    {{ 'x' }}
b)~", R"~({})~", R"~(a
    x
b)~"},
    {"MinusStripsAllWhitespace", R"~(a   

  {%- if true -%}  

  b  {{- ' c ' -}}  d{% endif %})~", R"~({})~", R"~(ab c d)~"},
    {"PlusKeepsWhitespace", R"~(a
  {%+ if true +%}
b{% endif %})~", R"~({})~", R"~(a
  
b)~"},
    {"CommentsDisappearWithTrim", R"~(a
  {# note #}
b{#- x -#}  c)~", R"~({})~", R"~(a
bc)~"},
    {"RawBlockPrintsTagsLiterally", R"~({% raw %}{{ x }}{% if %}{% endraw %}!)~", R"~({})~", R"~({{ x }}{% if %}!)~"},
    {"TrailingNewlineDropped", R"~(x
)~", R"~({})~", R"~(x)~"},
    {"IfElifElse", R"~({% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %},{% endfor %})~", R"~({})~", R"~(one,two,many,)~"},
    {"LoopVariables", R"~({% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %})~", R"~({})~", R"~(1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|)~"},
    {"LoopPrevAndNextItem", R"~({% for x in [1, 2, 3] %}{{ loop.previtem is defined }}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %})~", R"~({})~", R"~(False-2;True1-3;True2-;)~"},
    {"ForElseRunsOnEmpty", R"~({% for x in [] %}x{% else %}empty{% endfor %})~", R"~({})~", R"~(empty)~"},
    {"ForWithFilterCondition", R"~({% for x in range(10) if x is odd %}{{ x }}{{ loop.length }},{% endfor %})~", R"~({})~", R"~(15,35,55,75,95,)~"},
    {"ForUnpacksDictItems", R"~({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|dictsort %}{{ k }}{% endfor %})~", R"~({"d": {"b": 1, "a": 2}})~", R"~(b=1;a=2;ab)~"},
    {"BreakAndContinue", R"~({% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %})~", R"~({})~", R"~(0134)~"},
    {"SetInLoopDoesNotLeak", R"~({% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }})~", R"~({})~", R"~(231)~"},
    {"NamespaceCarriesOutOfLoop", R"~({% set ns = namespace(total=0, seen=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }})~", R"~({})~", R"~(6)~"},
    {"SetBlockAndFilters", R"~({% set x %}  Hello {{ name }}  {% endset %}[{{ x }}]{% set y | trim | upper %}  hi  {% endset %}[{{ y }}])~", R"~({"name": "W"})~", R"~([  Hello W  ][HI])~"},
    {"SetTupleUnpacks", R"~({% set a, b = 1, 'two' %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }})~", R"~({})~", R"~(1two(1, 2))~"},
    {"MacroWithDefaultsAndKeywords", R"~({% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }} {{ greet(name='C', greeting='Hi') }})~", R"~({})~", R"~(Hello, A! Hello, B? Hi, C!)~"},
    {"MacroRecursion", R"~({% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }})~", R"~({})~", R"~(120)~"},
    {"MacroSeesTemplateVariables", R"~({% set sep = '/' %}{% macro j(a, b) %}{{ a }}{{ sep }}{{ b }}{% endmacro %}{{ j(1, 2) }})~", R"~({})~", R"~(1/2)~"},
    {"FilterBlock", R"~({% filter upper %}abc {{ 'def' }}{% endfilter %})~", R"~({})~", R"~(ABC DEF)~"},
    {"GenerationBlockRendersBody", R"~(a{% generation %}b{% endgeneration %}c)~", R"~({})~", R"~(abc)~"},
    {"IntegerAndFloatArithmetic", R"~({{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 + 2.0 }} {{ 3 * 'ab' }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 10 / 5 }})~", R"~({})~", R"~(3.5 3 -4 1 2 1024 3.0 ababab 0.30000000000000004 1e+20 1.5e-07 2.0)~"},
    {"ConcatAndMembership", R"~({{ 1 ~ 'a' ~ none ~ true }} {{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }})~", R"~({})~", R"~(1aNoneTrue True False True)~"},
    {"ComparisonsChain", R"~({{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ 1 == 1.0 }} {{ true == 1 }})~", R"~({})~", R"~(True False True True True True)~"},
    {"LogicReturnsOperands", R"~({{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }} {{ not 0 }})~", R"~({})~", R"~(x b [] True)~"},
    {"ConditionalExpression", R"~({{ 'y' if 1 > 0 else 'n' }} [{{ 'y' if false }}])~", R"~({})~", R"~(y [])~"},
    {"Slicing", R"~({{ 'héllo'[1:3] }} {{ 'abcdef'[::-2] }} {{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3][-1] }} {{ 'abc'[-2:] }})~", R"~({})~", R"~(él fdb [2, 3, 4] 3 bc)~"},
    {"PythonReprOfValues", R"~({{ {'a': 1, 'b': [true, none, 1.5, "it's"]} }} {{ (1,) }} {{ ['x'] }} {{ none }} {{ true }})~", R"~({})~", R"~({'a': 1, 'b': [True, None, 1.5, "it's"]} (1,) ['x'] None True)~"},
    {"IsTests", R"~({{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 's' is string }}{{ 1 is number }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is sequence }}{{ true is boolean }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is true }}{{ false is false }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is equalto 'a' }}{{ none is sameas none }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 1 is not string }})~", R"~({"x": 1})~", R"~(TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue)~"},
    {"TojsonAsPythonJsonDumps", R"~({{ v|tojson }}|{{ v|tojson(indent=2) }}|{{ v|tojson(separators=(',', ':')) }}|{{ v|tojson(sort_keys=true) }})~", R"~({"v": {"z": "日本\n\"q\"", "a": [1, 2.5, null, true], "e": {}}})~", R"~({"z": "日本\n\"q\"", "a": [1, 2.5, null, true], "e": {}}|{
  "z": "日本\n\"q\"",
  "a": [
    1,
    2.5,
    null,
    true
  ],
  "e": {}
}|{"z":"日本\n\"q\"","a":[1,2.5,null,true],"e":{}}|{"a": [1, 2.5, null, true], "e": {}, "z": "日本\n\"q\""})~"},
    {"StringFilters", R"~({{ '  x  '|trim }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello world-x'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aXbX'|replace('X', '-') }}|{{ 'abc'|length }}|{{ 'a b  c'|wordcount }}|{{ 'x'|center(5) }}|)~", R"~({})~", R"~(x|AB|ab|Hello World-X|Hello|a-b-|3|3|  x  |)~"},
    {"SequenceFilters", R"~({{ [3, 1, 2]|sort|list }} {{ [3, 1, 2]|sort(reverse=true)|join(',') }} {{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ [1, 2]|reverse|list }} {{ [1, 1, 2]|unique|list }} {{ [4, 2, 9]|min }} {{ [4, 2, 9]|max }} {{ [1, 2]|sum }} {{ 'ab'|list }} {{ [1, 2]|length }})~", R"~({})~", R"~([1, 2, 3] 3,2,1 1 3 [2, 1] [1, 2] 2 9 3 ['a', 'b'] 2)~"},
    {"SelectAndMapFilters", R"~({{ users|selectattr('active')|map(attribute='name')|join(',') }} {{ users|rejectattr('active')|map(attribute='name')|list }} {{ users|selectattr('name', 'equalto', 'b')|list|length }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ ['a', 'b']|map('upper')|list }} {{ users|map(attribute='info.age')|list }})~", R"~({"users": [{"name": "a", "active": true, "info": {"age": 3}}, {"name": "b", "active": false, "info": {"age": 4}}]})~", R"~(a ['b'] 1 [1, 3] [1, 3] ['A', 'B'] [3, 4])~"},
    {"ConversionFilters", R"~({{ '42'|int + 1 }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 5|float }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 1|string ~ 2 }} {{ none|default('d') }} {{ undefined_thing|default('d') }} {{ ''|default('e', true) }} {{ x|d('z') }})~", R"~({})~", R"~(43 0 7 3 2.5 5.0 3 2.57 2.0 12 None d e z)~"},
    {"IndentFilter", R"~([{{ 'a
b

c'|indent(2) }}][{{ 'a
b'|indent(2, true) }}][{{ 'a

b'|indent('> ', blank=true) }}])~", R"~({})~", R"~([a
  b

  c][  a
  b][a
> 
> b])~"},
    {"DictFiltersAndMethods", R"~({{ d|items|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('z', 'none') }} {{ d.get('z') }} {{ d['b'] }} {{ d.b }} {{ d|dictsort(reverse=true) }} {{ d|length }})~", R"~({"d": {"b": 2, "a": 1}})~", R"~([('b', 2), ('a', 1)] ['b', 'a'] [2, 1] 1 none None 2 2 [('b', 2), ('a', 1)] 2)~"},
    {"StringMethods", R"~({{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abc'.upper() }}|{{ 'hello world'.title() }}|{{ 'abc'.find('c') }}|{{ 'abc'.find('z') }}|{{ '{}-{}-{x}'.format(1, 'b', x=3) }}|{{ ','.join(['a', 'b']) }}|{{ 'a
b'.splitlines() }}|{{ 'aXa'.count('a') }})~", R"~({})~", R"~(x|a|a|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b,c']|['a,b', 'c']|True|True|bba|ABC|Hello World|2|-1|1-b-3|a,b|['a', 'b']|2)~"},
    {"GlobalsRangeDictNamespace", R"~({{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ dict(a=1, b='x') }} {% set ns = namespace(a=1) %}{{ ns.a }})~", R"~({})~", R"~([0, 1, 2] [1, 4, 7] {'a': 1, 'b': 'x'} 1)~"},
    {"StrftimeNow", R"~({{ strftime_now('%Y-%m-%d %H:%M %B %d %b') }})~", R"~({})~", R"~(2024-07-26 09:30 July 26 Jul)~"},
    {"UndefinedPrintsEmpty", R"~([{{ missing }}][{{ missing|length }}][{% for x in missing %}x{% endfor %}][{{ missing is defined }}][{{ d.nokey }}])~", R"~({"d": {}})~", R"~([][0][][False][])~"},
    {"UndefinedAttributeFails", R"~({{ missing.attr }})~", R"~({})~", R"~(ERROR UndefinedError: 'missing' is undefined)~"},
    {"MissingKeyAttributeFails", R"~({{ d.a.b }})~", R"~({"d": {}})~", R"~(ERROR UndefinedError: 'dict object' has no attribute 'a')~"},
    {"MissingListElementFails", R"~({{ (l[5]).x }})~", R"~({"l": [1]})~", R"~(ERROR UndefinedError: list object has no element 5)~"},
    {"SandboxRefusesListAppend", R"~({% set l = [] %}{% set _ = l.append(1) %})~", R"~({})~", R"~(ERROR SecurityError: access to attribute 'append' of 'list' object is unsafe.)~"},
    {"SandboxRefusesDictUpdate", R"~({% set d = {} %}{{ d.update({'a': 1}) }})~", R"~({})~", R"~(ERROR SecurityError: access to attribute 'update' of 'dict' object is unsafe.)~"},
    {"RaiseException", R"~({{ raise_exception('bad role: ' ~ r) }})~", R"~({"r": "x"})~", R"~(ERROR raise_exception: bad role: x)~"},
    {"StringPlusDictFails", R"~({{ 'a' + {} }})~", R"~({})~", R"~(ERROR TypeError: can only concatenate str (not "dict") to str)~"},
    {"IntPlusStringFails", R"~({{ 1 + 'a' }})~", R"~({})~", R"~(ERROR TypeError: unsupported operand type(s) for +: 'int' and 'str')~"},
    {"CompareStringToIntFails", R"~({{ 'a' < 1 }})~", R"~({})~", R"~(ERROR TypeError: '<' not supported between instances of 'str' and 'int')~"},
    {"DivisionByZeroFails", R"~({{ 1 / 0 }})~", R"~({})~", R"~(ERROR ZeroDivisionError: division by zero)~"},
    {"GeneratorIsNotJson", R"~({{ [1]|map('string')|tojson }})~", R"~({})~", R"~(ERROR TypeError: Object of type generator is not JSON serializable)~"},
    {"UnknownFilterFails", R"~({% if x %}{{ 1|nosuchfilter }}{% endif %})~", R"~({"x": true})~", R"~(ERROR TemplateRuntimeError: No filter named 'nosuchfilter' found.)~"},
    {"RangeTooBigFails", R"~({{ range(1000000)|length }})~", R"~({})~", R"~(ERROR OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).)~"},
    {"NoneIsNotIterable", R"~({% for x in none %}{% endfor %})~", R"~({})~", R"~(ERROR TypeError: 'NoneType' object is not iterable)~"},
    {"CallingStringFails", R"~({{ 'a'() }})~", R"~({})~", R"~(ERROR TypeError: 'str' object is not callable)~"},    {"RangeSlices", R"~({{ range(5)[1:3]|list }})~", R"~({})~", R"~([1, 2])~"},
    {"RoundOfIntStaysInt", R"~({{ 5|round }} {{ 2.5|round }})~", R"~({})~", R"~(5 2.0)~"},
    {"LoopBodyStartsAfreshEachIteration", R"~({% for i in [1, 2, 3] %}[{{ y }}]{% if i == 1 %}{% set y = 'set' %}{% endif %}{% endfor %})~", R"~({})~", R"~([][][])~"},
    {"MacroSeesTopLevelNotLoopVariables", R"~({% macro m() %}{{ z }}{% endmacro %}{% for i in [1] %}{% set z = 'loop' %}{{ m() }}{% endfor %}{% set z = 'top' %}{{ m() }})~", R"~({})~", R"~(top)~"},
    {"FiltersIterateStringsAndDicts", R"~({{ {'a': 1, 'b': 0}|select|list }} {{ '-'.join('abc') }} {{ 'abc'|join('.') }} {{ 'cab'|sort|join }} {{ 'hello'|unique|join }} {{ {'b': 1, 'a': 2}|max }})~", R"~({})~", R"~(['a', 'b'] a-b-c a.b.c abc helo b)~"},
    {"PowersAndLoopEdges", R"~({{ (-1) ** 3 }} {{ (-1) ** 4 }} {{ 0 ** 0 }} {{ 1 ** 99 }} {{ (-2) ** 3 }} {{ 2 ** 62 }} {% for x in [1, 2] %}[{{ loop.previtem is defined }}{{ loop.nextitem is defined }}]{% endfor %})~", R"~({})~", R"~(-1 1 1 1 -8 4611686018427387904 [FalseTrue][TrueFalse])~"},
    {"FirstPrevItemAttributeFails", R"~({% for x in [1] %}{{ loop.previtem.role }}{% endfor %})~", R"~({})~", R"~(ERROR UndefinedError: there is no previous item)~"},
};

class JinjaConstruct : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaConstruct, RendersAsJinja2) {
  const Case& c = GetParam();
  std::string got;
  try {
    ChatTemplate tmpl(c.source);
    tmpl.set_clock([] { return std::int64_t(1721986200); });  // 2024-07-26 09:30, as the oracle
    got = tmpl.render(nlohmann::ordered_json::array(), nullptr, false, "<s>", "</s>",
                      nlohmann::ordered_json::parse(c.variables));
  } catch (const TemplateError& e) {
    got = std::string("ERROR ") + e.what();
  }
  EXPECT_EQ(got, c.expected) << c.source;
}

INSTANTIATE_TEST_SUITE_P(Jinja2, JinjaConstruct, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace infer::chat
