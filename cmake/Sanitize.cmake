# AddressSanitizer + UndefinedBehaviorSanitizer for the project's own code (the SDK, kernels,
# host, plugins, tests and tools; tools/build.sh --sanitize, build dir build-asan). LibTorch,
# Gloo and the other wheel / Debian libraries are not instrumented: ASan still sees their
# allocations through malloc and new, but not their reads and writes.
set(_shardformer_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
add_compile_options(${_shardformer_sanitize_flags})
# -O1 -g1 after the build type's -O2 -g: the sanitizers' usual level, with line tables for their
# reports. One translation unit compiled 36-45% faster (session.cpp 9.6 -> 6.1 s,
# test_parallel_layers.cpp 15.2 -> 8.3 s), the bulk of a cold CI's sanitizer step.
add_compile_options(-O1 -g1)
add_link_options(-fsanitize=address,undefined)
# Tests skip what a sanitizer changes by design (RSS bounds: ASan's shadow memory and
# quarantine) and nothing else.
add_compile_definitions(SHARDFORMER_SANITIZE=1)
# Every executable gets the runtime options compiled in (sanitizer_defaults.cpp), so that
# `ctest --test-dir build-asan` and every binary it starts run with them, no environment needed.
# The runtime looks the hooks up in the executable, which is searched before libasan; the
# object is compiled here, at configure time, so that it is a plain link input of every
# executable (no target: nothing to export with the SDK). Ninja does not know it as a link
# dependency: after changing sanitizer_defaults.cpp, build into a fresh build-asan/.
set(_shardformer_sanitizer_object "${PROJECT_BINARY_DIR}/sanitizer_defaults.o")
execute_process(
  COMMAND ${CMAKE_CXX_COMPILER} -O2 -fPIE -c "${CMAKE_CURRENT_LIST_DIR}/sanitizer_defaults.cpp"
          -o "${_shardformer_sanitizer_object}"
  RESULT_VARIABLE _shardformer_sanitizer_result)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             "${CMAKE_CURRENT_LIST_DIR}/sanitizer_defaults.cpp")
if(NOT _shardformer_sanitizer_result EQUAL 0)
  message(FATAL_ERROR "cannot compile cmake/sanitizer_defaults.cpp")
endif()
add_link_options(
  "$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:${_shardformer_sanitizer_object}>")
