// The sanitizer runtimes' options for a SHARDFORMER_SANITIZE build, compiled into each binary
// (the runtimes call these hooks at start-up); ASAN_OPTIONS / UBSAN_OPTIONS still win.
extern "C" {

// allocator_may_return_null: an allocation too large (the fuzz tests' sizes taken from broken
// headers) fails as without ASan, with std::bad_alloc, which the code under test must handle.
// detect_stack_use_after_return stays off: LibTorch and Gloo switch stacks (c10 threads).
const char* __asan_default_options() {
  return "allocator_may_return_null=1:detect_leaks=1:strict_string_checks=1:"
         "check_initialization_order=1:print_summary=1";
}

const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// Objects that libraries' static initialisers allocate for the life of the process, such as
// libtorch_cuda's CachingHostAllocator (24 bytes, reported when a test ends): singletons, not
// leaks. Only allocations made under a static initialiser (_GLOBAL__sub_I_*) are suppressed.
const char* __lsan_default_suppressions() { return "leak:_GLOBAL__sub_I_\n"; }

}  // extern "C"
