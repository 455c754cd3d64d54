#!/usr/bin/env python3
"""Finds names with internal linkage defined in two sources of one unity-built target.

CMake's unity build compiles a target's sources in batches as one file, so every source's
anonymous namespace (and file-scope `static`s) shares one scope with the others of its batch.
Two classes of one name fail to compile; two functions of one name silently become overloads,
and a call may bind to the other file's. Batches shift as sources are added, so a name must be
unique in the whole target. Usage: check_unity_names.py SOURCE_LIST... (files listing a target's
sources, absolute paths one per line or separated by ';'); exit status 1 when a name repeats.
"""
import collections
import pathlib
import re
import sys

KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "decltype", "alignas",
            "static_assert", "operator", "noexcept", "requires"}
# GoogleTest's macros: each expands to a class named after its suite and test, unique per target.
GTEST_MACROS = {"TEST", "TEST_F", "TEST_P", "TYPED_TEST", "TYPED_TEST_P", "TYPED_TEST_SUITE",
                "INSTANTIATE_TEST_SUITE_P", "INSTANTIATE_TYPED_TEST_SUITE_P"}


def strip_code(text):
    """The source without comments, string and character literals, or preprocessor lines."""
    text = re.sub(r'R"(\w*)\((?:.|\n)*?\)\1"', '""', text)  # raw strings
    text = re.sub(r'//[^\n]*|/\*(?:.|\n)*?\*/', " ", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\\n])*'", "''", text)
    return re.sub(r"^\s*#[^\n]*(?:\\\n[^\n]*)*", " ", text, flags=re.M)


def declared_name(head):
    """The name a declaration's head (text before its '{' or ';') introduces, or None."""
    head = re.sub(r"\s+", " ", head).strip()
    head = re.sub(r"^template ?<.*?> ?", "", head)  # templates' parameter lists (not nested >)
    # Namespace aliases and using-declarations may repeat (the same alias twice is no clash).
    if not head or head.startswith(("using namespace", "namespace ", "friend", "extern ")):
        return None
    m = re.match(r"(?:class|struct|union|enum(?: class| struct)?) (?:\[\[.*?\]\] )?(\w+)", head)
    if m:
        return m.group(1)
    m = re.match(r"using (\w+) ?=", head)
    if m:
        return m.group(1)
    if head.startswith("using "):
        return None
    # A function: the identifier before the first '(' at the head's top level.
    depth = 0
    for i, ch in enumerate(head):
        if ch in "<[":
            depth += 1
        elif ch in ">]":
            depth -= 1
        elif ch == "=" and depth == 0:
            break  # a variable's initialiser
        elif ch == "(" and depth == 0:
            m = re.search(r"(::)?(\w+) ?$", head[:i])  # A::f( defines a member: no new name
            if m and not m.group(1) and m.group(2) not in KEYWORDS | GTEST_MACROS:
                return m.group(2)
            return None
    m = re.search(r"(\w+) ?(?:\[[^\]]*\] ?)*(?:=.*)?$", head.split("=")[0].strip() + " ")
    name = m.group(1) if m else None
    return name if name and name not in KEYWORDS and not re.match(r"\d", name) else None


def internal_names(path):
    """Names declared directly in the file's anonymous namespaces or `static` at namespace scope."""
    code = strip_code(path.read_text(errors="replace"))
    names = set()
    stack = []  # per open brace: 'anon', 'ns' or 'block'
    head_start = 0
    for i, ch in enumerate(code):
        if ch == "{":
            head = code[head_start:i]
            if re.search(r"\bnamespace\s*$", head):
                kind = "anon"
            elif re.search(r"\bnamespace\s+[\w:]+\s*$", head):
                kind = "ns"
            else:
                kind = "block"
            if kind == "block" and all(k != "block" for k in stack):
                in_anon = bool(stack) and stack[-1] == "anon"
                if in_anon or re.match(r"\s*(?:template ?<.*?>\s*)?static\b", head, re.S):
                    name = declared_name(head.replace("static ", "").replace("inline ", ""))
                    if name:
                        names.add(name)
            stack.append(kind)
            head_start = i + 1
        elif ch == "}":
            if stack:
                stack.pop()
            head_start = i + 1
        elif ch == ";":
            if all(k != "block" for k in stack):
                head = code[head_start:i]
                in_anon = bool(stack) and stack[-1] == "anon"
                if in_anon or re.match(r"\s*static\b", head):
                    name = declared_name(re.sub(r"\b(?:static|inline|constexpr|const)\b ?", "",
                                                head))
                    if name:
                        names.add(name)
            head_start = i + 1
    return names


def sources(list_file):
    text = pathlib.Path(list_file).read_text()
    for entry in re.split(r"[;\n]", text):
        entry = entry.strip()
        if entry.endswith((".cpp", ".cc", ".cxx")):
            yield pathlib.Path(entry)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    clashes = 0
    for list_file in sys.argv[1:]:
        where = collections.defaultdict(list)
        for path in sources(list_file):
            for name in internal_names(path):
                where[name].append(str(path))
        for name, paths in sorted(where.items()):
            if len(paths) > 1:
                clashes += 1
                print(f"{list_file}: '{name}' has internal linkage in {len(paths)} sources of "
                      f"one unity target: {', '.join(paths)}")
    if clashes:
        print(f"{clashes} name(s) repeat: rename them (docs/architecture.md, unity builds)")
    sys.exit(1 if clashes else 0)


if __name__ == "__main__":
    main()
