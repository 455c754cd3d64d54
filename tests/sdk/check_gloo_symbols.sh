#!/usr/bin/env bash
# Checks that no code depending on the layout of a Gloo type is compiled into our binaries.
#
# Usage: check_gloo_symbols.sh LIB_OR_OBJECT...   (exit 0: clean, 1: offending symbols, 2: usage)
#
# The SDK compiles c10d's ProcessGroupGloo.hpp against Debian's libgloo-dev headers (gloo
# 2022-05), while libtorch_cpu.so contains a newer Gloo (rendezvous::Store derives from
# gloo::IStore and has the "store v2" virtuals; GLOO_STORE_HAS_STORE_V2 is undefined for us).
# That is safe only while every piece of code that depends on a Gloo layout is libtorch's own:
# our objects may hold Gloo objects through std::shared_ptr handles and call libtorch's
# out-of-line ProcessGroupGloo entry points, nothing else. For each file this fails on:
#   * a defined symbol (global, weak or local code) in namespace gloo::, of c10d::ProcessGroupGloo
#     or a nested class (GlooStore, AsyncWork, SendWork, RecvWork, Options): a member function,
#     vtable, typeinfo, guard variable; or a template instantiated on such a type, other than
#     the layout-neutral handles std::shared_ptr<gloo::T> (copy, move, destroy) and
#     c10::intrusive_ptr / c10::make_intrusive of ProcessGroupGloo and ProcessGroupGloo::Options
#     (their sizes do not depend on Gloo: every Gloo member is behind a shared_ptr).
#     Dereferencing a shared_ptr<gloo::T> (operator->, operator*, get) is flagged;
#   * an undefined reference to a gloo:: or ProcessGroupGloo symbol outside the allow-list of
#     libtorch entry points below (a call into Gloo's own API would pass Gloo objects built
#     with our view of their layout).
#   * (with debug info) any machine code whose line-table rows point into a Gloo header
#     (.../gloo/*.h): an inline Gloo function compiled or inlined into our code.
# A virtual call or member access written in our own source on a gloo object leaves neither a
# symbol nor a Gloo-header line at -O2; at -O0 (Debug) each one instantiates the flagged
# shared_ptr accessors (operator->, get), so run this on a Debug build too. Local data
# constants from Gloo headers (gloo::kNoTimeout and the like, emitted at -O0) are notes only.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 LIB_OR_OBJECT..." >&2
  exit 2
fi

# libtorch entry points the SDK may call (demangled-name prefixes, as extended regexes).
allowed_undefined='^c10d::ProcessGroupGloo::(createDeviceForInterface|createDeviceForHostname|createDefaultDevice|ProcessGroupGloo|~ProcessGroupGloo|Options::Options|Options::create_default)\('
# Inline members of those classes that are layout-neutral: Options::create is
# make_intrusive<Options>(timeout), and sizeof(Options) does not depend on Gloo.
allowed_defined='^c10d::ProcessGroupGloo::Options::create\('

# Replaces the layout-neutral uses of Gloo types by placeholders (one demangled name a line):
# shared_ptr handles to Gloo objects, raw pointers to them (moved, swapped, never dereferenced
# by themselves), and intrusive_ptr / make_intrusive of ProcessGroupGloo and its Options, whose
# sizes and bases come from torch's headers only. A dereference of a Gloo handle is marked.
neutralise() {
  sed -E \
    -e 's/std::(__)?shared_ptr<(::)?gloo::[A-Za-z0-9_:]+/std::\1shared_ptr<GLOO_HANDLE/g' \
    -e 's/(::)?gloo::[A-Za-z0-9_:]+( const)?\*/GLOO_PTR/g' \
    -e 's/(intrusive_ptr|make_intrusive|intrusive_target_default_null_type)<c10d::ProcessGroupGloo(::Options)?([,> ])/\1<PGG_HANDLE\3/g' \
    -e 's/c10d::ProcessGroupGloo(::Options)?( const)?\*/PGG_PTR/g' \
    -e 's/(std::__shared_ptr<GLOO_HANDLE[^>]*>::get\(\))/DEREF:\1/'
}
offending='gloo::|ProcessGroupGloo|DEREF:|__shared_ptr_access<GLOO_HANDLE'

status=0
for f in "$@"; do
  if [ ! -f "$f" ]; then
    echo "check_gloo_symbols: $f: no such file" >&2
    status=1
    continue
  fi
  # The static symbol table when the file has one (objects, unstripped libraries), else the
  # dynamic one. Lines: TYPE NAME (demangled).
  syms=$({ nm -C "$f" 2>/dev/null || true; } | sed -nE 's/^([0-9a-fA-F]+| +) ([A-Za-z?]) (.*)$/\2 \3/p')
  if [ -z "$syms" ]; then
    syms=$({ nm -DC "$f" 2>/dev/null || true; } | sed -nE 's/^([0-9a-fA-F]+| +) ([A-Za-z?]) (.*)$/\2 \3/p')
  fi
  if [ -z "$syms" ]; then
    echo "check_gloo_symbols: $f: no symbols could be read (not an ELF object?)" >&2
    status=1
    continue
  fi
  relevant=$(printf '%s\n' "$syms" | grep -E 'gloo::|ProcessGroupGloo' || true)
  bad=()
  notes=()
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    type=${line%% *}
    name=${line#* }
    residue=$(printf '%s\n' "$name" | neutralise)
    case "$type" in
      n | N) ;; # debugging / section-name twins of the symbols below
      U | w | v)
        # undefined (w/v: undefined weak)
        if printf '%s\n' "$residue" | grep -qE "$offending" &&
          ! printf '%s\n' "$name" | grep -qE "$allowed_undefined"; then
          bad+=("undefined $type  $name")
        fi
        ;;
      r | d | b | g | s)
        # local data: a constant or static from a header (no code, no layout assumption of
        # its own); a note, not a failure
        if printf '%s\n' "$residue" | grep -qE "$offending"; then
          notes+=("local data $type  $name")
        fi
        ;;
      *)
        if printf '%s\n' "$residue" | grep -qE "$offending" &&
          ! printf '%s\n' "$name" | grep -qE "$allowed_defined"; then
          bad+=("defined $type  $name")
        fi
        ;;
    esac
  done <<<"$relevant"

  # With debug info (RelWithDebInfo, Debug): no machine code, inlined or not, may come from a
  # line of a Gloo header (a gloo/ include directory), whatever symbol it ended up in.
  if objdump -h "$f" 2>/dev/null | grep '\.debug_line' >/dev/null; then
    while IFS= read -r header; do
      [ -n "$header" ] && bad+=("code compiled from ${header%:}")
    done < <(objdump --dwarf=decodedline "$f" 2>/dev/null | grep -E '(^|[ /])gloo/[^:]*:$' |
      sed -E 's/^CU: //' | sort -u)
  else
    notes+=("no .debug_line: the check for code inlined from Gloo headers was skipped")
  fi

  for n in "${notes[@]+"${notes[@]}"}"; do echo "check_gloo_symbols: $f: note: $n"; done
  if [ ${#bad[@]} -gt 0 ]; then
    echo "check_gloo_symbols: $f: ${#bad[@]} Gloo-layout-dependent finding(s); this code must" \
      "stay in libtorch (our Gloo headers are Debian's, not the wheel's):" >&2
    for b in "${bad[@]}"; do echo "  $b" >&2; done
    status=1
  else
    echo "check_gloo_symbols: $f: ok ($(printf '%s\n' "$relevant" | grep -c . || true) Gloo-related symbol(s), all layout-neutral or allowed libtorch entry points)"
  fi
done
exit $status
